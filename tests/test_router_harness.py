"""The router harness (tests/router_harness.py): a port chosen for Envoy and taken before Envoy binds it costs a
restart on other ports, not a failed test; a stand-in on a taken address says so instead of dying."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

import pytest

from charts.envoy_bootstrap import Upstream
from config import parse_config
from tests import router_harness
from tests.conftest import default_config_dict
from tests.ports import squatted_port
from tests.router_harness import ADDRESS_IN_USE, PortTaken, envoy_router, replicas_on_one_port, stand_in, stand_ins


def test_a_port_taken_between_the_choice_and_envoys_bind_is_replaced_by_another(tmp_path: Path, monkeypatch) -> None:
    """The race a run lost once ("Address already in use"): the API port chosen for Envoy is bound by someone else
    before Envoy binds it."""
    data = default_config_dict()
    data["endpoint"] = {"weights": {"baseline": 50, "speculative": 50}}
    with squatted_port(monkeypatch, router_harness) as taken, stand_ins(["baseline", "speculative"]) as si:
        upstreams = {name: Upstream("127.0.0.1", s.port) for name, s in si.items()}
        with envoy_router(parse_config(data), upstreams, tmp_path) as router:
            assert not router.url.endswith(f":{taken}")
            with urllib.request.urlopen(router.url + "/v1/models", timeout=5) as response:  # loopback only
                assert response.status == 200
    assert ADDRESS_IN_USE in (tmp_path / f"envoy-{taken}.log").read_text()


def test_a_stand_in_on_a_taken_address_says_the_port_is_taken() -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.3", 0))
        squatter.listen()
        with pytest.raises(PortTaken), stand_in("replica", address=("127.0.0.3", squatter.getsockname()[1])):
            pass


HOSTS = ("127.0.0.2", "127.0.0.3")


def test_replicas_share_the_port_the_first_one_was_given() -> None:
    with replicas_on_one_port({"replica-a": "127.0.0.2", "replica-b": "127.0.0.3"}) as replicas:
        assert [r.url for r in replicas.values()] == [f"http://{h}:{replicas['replica-a'].port}" for h in HOSTS]
        for model, replica in replicas.items():
            with urllib.request.urlopen(replica.url + "/v1/models", timeout=5) as response:  # loopback only
                assert model in response.read().decode()
