"""Loopback servers that misbehave the way a broken network does: one accepts TCP and never answers, one
refuses (a port nobody listens on)."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def silent_server() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts every connection, reads nothing and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def refused_port() -> int:
    """A port that was free a moment ago: connecting to it is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SHOWN = [("1", "retrying"), ("2", "retrying"), ("3", "giving up")]  # what cloud.aws prints for 3 silent attempts


def attempts_shown(text: str) -> list[tuple[str, str]]:
    """The attempt lines cloud.aws.announce_retries printed: (attempt, what came next)."""
    return re.findall(r"attempt (\d)/3: \w+\); (retrying|giving up)", text)
