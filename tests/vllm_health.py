"""vLLM's /health for the stand-in vLLM processes that tests start (the vllm-neuron build in
tests/model_build/test_compile_cache.py, the start-up guard in tests/serving_pod/test_startup_guard.py): source text
their scripts include, since each stand-in runs as its own process. `health_server(port)` answers 200 on /health,
404 elsewhere, and logs nothing."""

from __future__ import annotations

HEALTH_SERVER = """
import http.server
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
def health_server(port):
    return http.server.HTTPServer(("127.0.0.1", port), Health)
"""
