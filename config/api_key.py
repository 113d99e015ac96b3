"""The optional vLLM API key: where it lives and how it reaches vLLM and the benchmark client (one owner)."""

API_KEY_ENV = "VLLM_API_KEY"  # vLLM reads it at start (then requires `Authorization: Bearer <key>` on /v1/*)
API_KEY_SECRET_KEY = "api-key"  # the key inside the Secret named by the config's `api_key_secret`
