"""Loopback ports for the servers the tests start (Envoy, Prometheus, moto, stand-ins): one chooser and one retry.

A port chosen free here is written into a server's configuration before the server binds it, so another process may
take it in between; the server then fails with "address already in use" and `retry_on_taken_port` starts it again on
newly chosen ports. A server of ours binds port 0 instead and says which port it got."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import TypeVar

import pytest

T = TypeVar("T")
PORT_ATTEMPTS = 5


class PortTaken(RuntimeError):
    """A server could not bind a port chosen for it: another process bound it after free_port() let it go."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on now on `host`."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def retry_on_taken_port(start: Callable[[], T]) -> T:
    """`start()` chooses its ports with free_port(), starts its server and returns once it is ready, raising PortTaken
    (its server stopped) when a port was taken: then it is called again, up to PORT_ATTEMPTS times in all."""
    for _attempt in range(PORT_ATTEMPTS - 1):
        try:
            return start()
        except PortTaken:
            continue
    return start()


@contextmanager
def squatted_port(monkeypatch: pytest.MonkeyPatch, harness: ModuleType) -> Iterator[int]:
    """For the race tests: a loopback port another socket binds and listens on, which `harness`'s next free_port()
    call returns (the ones after it are free), as if someone took it between the choice and the bind."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        picks = iter([taken])
        monkeypatch.setattr(harness, "free_port", lambda: next(picks, None) or free_port())
        yield taken
