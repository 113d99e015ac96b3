"""A loopback Hugging Face Hub holding the configured models at their pinned revisions: what `make stage`'s Job
downloads with huggingface_hub's snapshot_download (HF_ENDPOINT points it here) and what `make preflight` asks for
each revision.

Each repository holds the model's `config.json` as the engine check's fixtures record it
(tests/engine/fixtures/checkpoints/<hf_id>/<revision>/config.json: the real file's architecture fields, so the build's
checkpoint and drafter checks read what they would read) and a small `model.safetensors` of seeded bytes standing for
the weights. Routes, as huggingface_hub 2.4.0 calls them (HfApi.repo_info, HfApi.list_repo_tree, get_hf_file_metadata
and the download in huggingface_hub/file_download.py): `GET /api/models/<repo>/revision/<rev>`,
`GET /api/models/<repo>/tree/<rev>`, `HEAD` and `GET /<repo>/resolve/<rev>/<path>` with the `X-Repo-Commit`, `ETag`
and `Content-Length` headers file_download.py reads. Anything else is a 404 that names the path.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

FIXTURES = Path(__file__).resolve().parents[1] / "engine" / "fixtures" / "checkpoints"
WEIGHT_BYTES = 64 * 1024


@dataclass(frozen=True)
class Repo:
    hf_id: str
    revision: str
    files: dict[str, bytes]


def repo_of(hf_id: str, revision: str) -> Repo:
    """A model repository: the fixture's config.json (refused when there is none: the journey would otherwise invent
    an architecture) and seeded weights."""
    config = FIXTURES / hf_id / revision / "config.json"
    if not config.is_file():
        raise FileNotFoundError(
            f"no fixture config.json for {hf_id}@{revision} under tests/engine/fixtures/checkpoints; add the model's "
            "config.json there (from its Hugging Face repository at that revision) to run the journey with it"
        )
    weights = random.Random(f"{hf_id}@{revision}").randbytes(WEIGHT_BYTES)
    return Repo(hf_id, revision, {"config.json": config.read_bytes(), "model.safetensors": weights})


def _oid(data: bytes) -> str:
    """A git blob id, as the Hub's tree listing gives for each file."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Hub:
    """The server on (host, port 0), in a daemon thread; `requests` records every (method, path) it answered."""

    def __init__(self, host: str, repos: Iterable[Repo]) -> None:
        self.repos = {(r.hf_id, r.revision): r for r in repos}
        self.requests: list[tuple[str, str, int]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hub._answer(self, body=True)

            def do_HEAD(self) -> None:
                hub._answer(self, body=False)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Hub:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _find(self, rest: str) -> tuple[Repo, str] | None:
        """`<org>/<name>/<rev>/<tail>` -> (repo, tail)."""
        parts = rest.split("/", 3)
        if len(parts) < 3:
            return None
        repo = self.repos.get((f"{parts[0]}/{parts[1]}", parts[2]))
        return (repo, parts[3] if len(parts) > 3 else "") if repo else None

    def _answer(self, handler: BaseHTTPRequestHandler, *, body: bool) -> None:
        path = unquote(urlsplit(handler.path).path)
        status, headers, data = self._route(path)
        self.requests.append((handler.command, path, status))
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if body:
            handler.wfile.write(data)

    def _route(self, path: str) -> tuple[int, dict[str, str], bytes]:
        as_json = {"Content-Type": "application/json"}
        for kind in ("revision", "tree"):
            prefix = "/api/models/"
            if path.startswith(prefix) and f"/{kind}/" in path:
                repo_id, _, rest = path[len(prefix) :].partition(f"/{kind}/")
                found = self._find(f"{repo_id}/{rest}")
                if found is None:
                    return 404, as_json | {"X-Error-Code": "RevisionNotFound"}, b'{"error": "Revision Not Found"}'
                repo, _ = found
                if kind == "revision":
                    siblings = [{"rfilename": name} for name in repo.files]
                    return (
                        200,
                        as_json,
                        json.dumps({"id": repo.hf_id, "sha": repo.revision, "siblings": siblings}).encode(),
                    )
                tree = [
                    {"type": "file", "oid": _oid(data), "size": len(data), "path": name}
                    for name, data in sorted(repo.files.items())
                ]
                return 200, as_json, json.dumps(tree).encode()
        if "/resolve/" in path:
            repo_id, _, rest = path.lstrip("/").partition("/resolve/")
            found = self._find(f"{repo_id}/{rest}")
            if found is not None and found[1] in found[0].files:
                repo, name = found
                data = repo.files[name]
                headers = {
                    "X-Repo-Commit": repo.revision,
                    "ETag": f'"{_oid(data)}"',
                    "Content-Type": "application/octet-stream",
                }
                return 200, headers, data
        return 404, as_json | {"X-Error-Code": "EntryNotFound"}, json.dumps({"error": f"{path} not found"}).encode()
