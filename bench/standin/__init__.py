"""The loopback stand-in for a vLLM server (`server`, with its step-time table) and the benchmark client's
self-check against it."""
