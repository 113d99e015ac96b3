"""The local world a journey runs against: AWS (moto's server), Hugging Face (tests/journey/hub.py), the fake cluster
(tests/journey/cluster.py) with its API on loopback and the fake kubectl on PATH. Everything lives in one fresh
folder, and every process the journey starts gets the world's environment: fake static AWS credentials (never a real
account: every inherited AWS_* variable is dropped), AWS_ENDPOINT_URL at moto, HF_ENDPOINT at the loopback hub, the
fake kubectl first on PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from config import DeploymentConfig
from tests.journey.cluster import Cluster
from tests.journey.hub import Hub, repo_of
from tests.journey.network import Addresses
from tests.journey.pods import make_writable
from tests.ports import free_port

REPO = Path(__file__).resolve().parents[2]
MOTO_ACCOUNT = "123456789012"  # what moto's STS GetCallerIdentity answers (moto.core.DEFAULT_ACCOUNT_ID)
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing"}
START_TIMEOUT_S = 30.0


class World:
    """`with World(folder, config) as world:` the world is up; its processes and pods stop when the block ends."""

    def __init__(self, folder: Path, config: DeploymentConfig, *, laptop: tuple[Path, ...] = ()) -> None:
        self.folder = folder
        self.config = config
        self.hidden = (REPO, *laptop)  # the deployer's folders: no pod sees them (image/site/sitecustomize.py)
        self.addresses = Addresses()
        self._view_lock = threading.Lock()
        self._stack: list[Any] = []

    # --- start and stop ----------------------------------------------------------------------------------------

    def __enter__(self) -> World:
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            self._start_moto()
            models = {(m.hf_id, m.revision) for m in self.config.models.values()}
            self.hub = Hub(self.addresses.host, [repo_of(*m) for m in sorted(models)]).__enter__()
            self._stack.append(self.hub)
            t = self.config.trn2_nodes
            self.cluster = Cluster(
                self.folder / "cluster",
                self.addresses,
                host=self,
                trn2_max_nodes=t.max_size,
                trn2_nodes=t.desired_size,
                system_nodes=self.config.system_nodes.desired_size,
            )
            self._stack.append(self.cluster)
            self._start_api()
            self._write_kubectl()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        for part in reversed(self._stack):
            try:
                part.close() if hasattr(part, "close") else part.__exit__()
            except Exception as err:  # stopping one part must not leave the others running
                print(f"journey: stopping {type(part).__name__} failed: {err}", file=sys.stderr)
        self._stack.clear()

    def _start_moto(self) -> None:
        port = free_port(self.addresses.host)
        log = (self.folder / "moto.log").open("w")
        moto = Path(sys.executable).parent / "moto_server"
        proc = subprocess.Popen([str(moto), "-H", self.addresses.host, "-p", str(port)], stdout=log, stderr=log)
        self._stack.append(_Process(proc, log))
        self.aws_endpoint = f"http://{self.addresses.host}:{port}"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.aws_endpoint + "/moto-api/", timeout=1).close()  # loopback
                return
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"moto_server exited with {proc.returncode}; see {self.folder / 'moto.log'}"
                    ) from None
                time.sleep(0.2)
        raise RuntimeError(f"moto_server did not answer within {START_TIMEOUT_S:g} s")

    def _start_api(self) -> None:
        cluster = self.cluster

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                code, out, err = cluster.kubectl(body["argv"], body.get("stdin", ""))
                data = json.dumps({"code": code, "stdout": out, "stderr": err}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, name="api", daemon=True).start()
        self.api_url = f"http://127.0.0.1:{server.server_address[1]}"
        self._stack.append(_Server(server))

    def _write_kubectl(self) -> None:
        self.bin = self.folder / "bin"
        self.bin.mkdir(exist_ok=True)
        kubectl = self.bin / "kubectl"
        kubectl.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{REPO / "tests" / "journey" / "kubectl.py"}" "$@"\n')
        kubectl.chmod(0o755)

    # --- what processes get ------------------------------------------------------------------------------------

    def aws_env(self) -> dict[str, str]:
        return {
            **FAKE_CREDENTIALS,
            "AWS_ENDPOINT_URL": self.aws_endpoint,
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_DEFAULT_REGION": self.config.region,
        }

    def env(self) -> dict[str, str]:
        """The deployer's machine: the ops commands and bench run with this (cwd: the journey's output folder)."""
        kept = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "HF_", "KUBECONFIG", "PYTHONPATH"))}
        return {
            **kept,
            **self.aws_env(),
            "PATH": f"{self.bin}{os.pathsep}{kept.get('PATH', '/usr/bin:/bin')}",
            "PYTHONPATH": str(REPO),
            "HF_ENDPOINT": self.hub.url,
            "JOURNEY_API": self.api_url,
            "CDK_DISABLE_CLI_TELEMETRY": "true",
            "MPLBACKEND": "Agg",
        }

    def pod_env(self) -> dict[str, str]:
        return {**self.aws_env(), "HF_ENDPOINT": self.hub.url}

    # --- AWS ---------------------------------------------------------------------------------------------------

    def boto(self, service: str) -> Any:
        import boto3

        return boto3.client(
            service,
            region_name=self.config.region,
            endpoint_url=self.aws_endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            aws_session_token="testing",
        )

    def bucket_view(self, bucket: str) -> Path:
        """The models bucket as Mountpoint for S3 shows it: one file per object, mtime = Last-Modified, read-only;
        brought up to date (new, changed and removed objects) each time a pod mounts it."""
        root = self.folder / "mountpoint" / bucket
        with self._view_lock:
            make_writable(root)
            root.mkdir(parents=True, exist_ok=True)
            s3 = self.boto("s3")
            seen = set()
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
                for obj in page.get("Contents", []):
                    key, mtime = obj["Key"], int(obj["LastModified"].timestamp())
                    path = root / key
                    seen.add(path)
                    if path.is_file() and path.stat().st_size == obj["Size"] and int(path.stat().st_mtime) == mtime:
                        continue
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.unlink(missing_ok=True)  # read-only from the last sync (and for a non-root user, unwritable)
                    path.write_bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
                    os.utime(path, (mtime, mtime))
            for path in sorted(root.rglob("*"), reverse=True):
                if path.is_file() and path not in seen:
                    path.unlink()
                elif path.is_dir() and not any(path.iterdir()):
                    path.rmdir()
            for path in sorted(root.rglob("*"), reverse=True):
                path.chmod(0o555 if path.is_dir() else 0o444)
            root.chmod(0o555)
        return root

    @staticmethod
    def remove_folder(folder: Path) -> None:
        make_writable(folder)
        shutil.rmtree(folder, ignore_errors=True)


class _Process:
    def __init__(self, proc: subprocess.Popen[bytes], log: Any) -> None:
        self.proc, self.log = proc, log

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class _Server:
    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
