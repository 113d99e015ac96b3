"""The pod network for the journey's Python containers, loaded at interpreter start-up (site.py imports
`sitecustomize` from sys.path; the journey puts this folder on every pod's PYTHONPATH after the pod's own entries, as
an image's site-packages comes after PYTHONPATH).

A pod on this machine shares the host's loopback, so two things a pod's network namespace gives it are made here:
- its own loopback: 127.0.0.1 and localhost are the pod's address (JOURNEY_POD_IP), so the start-up guard's and the
  build's /health polls and vLLM's own port reach this pod's server, not another pod's;
- cluster DNS: names under .svc.cluster.local are asked of the world's DNS server (JOURNEY_DNS, host:port), which
  answers a Service's ClusterIP (or a headless Service's Ready pod addresses), as CoreDNS's kubernetes plugin does.
Everything else resolves as usual.

And one thing a mount gives it: a volumeMount with readOnly: true is a read-only file system (writes fail with EROFS,
root or not: kubernetes.io, "Volumes"). The journey's volumes are folders and may run as root, where file modes do not
stop a write, so writes under the read-only mounts (JOURNEY_READ_ONLY, os.pathsep-separated folders) are refused
here with EROFS: open() for writing, os.open with a write flag, mkdir, remove, rename and replace.

And one thing a container does not give it: the deployer's files. A pod runs on another machine, where a path of the
laptop (the repository, the journey's output folder: JOURNEY_HIDDEN) does not exist; here they would, so opening,
stat-ing or listing a path under them fails with ENOENT, except the image's own files under them (JOURNEY_IMAGE: the
interpreter's environment, the stand-ins' code and data). Imports are not affected (importlib reads through its own
posix calls), and only Python code is: a shell command of a Job still sees the machine.
Standard library only: it runs in every interpreter of every pod.
"""

from __future__ import annotations

import builtins
import errno
import io
import os
import random
import socket
import struct

_POD_IP = os.environ.get("JOURNEY_POD_IP", "")
_DNS = os.environ.get("JOURNEY_DNS", "")
_CLUSTER_DOMAIN = ".svc.cluster.local"
_LOOPBACK = {"127.0.0.1", "localhost"}
_getaddrinfo = socket.getaddrinfo


def _ask(name: str) -> list[str]:
    """The A records of `name` from the world's DNS (RFC 1035 4.1: one question, recursion desired)."""
    host, port = _DNS.rsplit(":", 1)
    ident = random.randrange(1 << 16)
    question = b"".join(bytes([len(part)]) + part.encode() for part in name.rstrip(".").split(".")) + b"\0"
    query = struct.pack(">HHHHHH", ident, 0x0100, 1, 0, 0, 0) + question + struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(2.0)
        sock.sendto(query, (host, int(port)))
        answer, _ = sock.recvfrom(512)
    _, flags, _, count, _, _ = struct.unpack(">HHHHHH", answer[:12])
    if flags & 0x000F:
        raise socket.gaierror(socket.EAI_NONAME, f"{name}: no such Service (journey DNS)")
    offset = 12 + len(question) + 4
    addresses = []
    for _ in range(count):  # each record: name pointer (2), type, class, ttl, length (10), then 4 bytes
        addresses.append(socket.inet_ntoa(answer[offset + 12 : offset + 16]))
        offset += 16
    return addresses


def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):  # type: ignore[no-untyped-def]
    name = host.decode() if isinstance(host, bytes) else host
    if _POD_IP and name in _LOOPBACK:
        return _getaddrinfo(_POD_IP, port, family, type, proto, flags)
    if _DNS and isinstance(name, str) and name.rstrip(".").endswith(_CLUSTER_DOMAIN):
        kind = type or socket.SOCK_STREAM
        number = int(port) if port not in (None, "") else 0
        return [(socket.AF_INET, kind, proto or 6, "", (a, number)) for a in _ask(name)]
    return _getaddrinfo(host, port, family, type, proto, flags)


socket.getaddrinfo = getaddrinfo


_READ_ONLY = tuple(p for p in os.environ.get("JOURNEY_READ_ONLY", "").split(os.pathsep) if p)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _refuse(path) -> None:  # type: ignore[no-untyped-def]
    try:
        full = os.path.abspath(os.fsdecode(path))
    except TypeError:
        return  # a file descriptor
    if any(full == root or full.startswith(root.rstrip("/") + "/") for root in _READ_ONLY):
        raise OSError(errno.EROFS, "Read-only file system", full)


def _guard(real, writes):  # type: ignore[no-untyped-def]
    def guarded(*args, **kwargs):  # type: ignore[no-untyped-def]
        if writes(args, kwargs):
            _refuse(args[0])
        return real(*args, **kwargs)

    return guarded


if _READ_ONLY:
    _mode_writes = lambda a, k: any(c in (a[1] if len(a) > 1 else k.get("mode", "r")) for c in "wax+")  # noqa: E731
    builtins.open = io.open = _guard(io.open, _mode_writes)
    os.open = _guard(os.open, lambda a, k: bool((a[1] if len(a) > 1 else k.get("flags", 0)) & _WRITE_FLAGS))
    for _name in ("mkdir", "remove", "unlink", "rmdir"):
        setattr(os, _name, _guard(getattr(os, _name), lambda a, k: True))
    for _name in ("rename", "replace"):
        _real = getattr(os, _name)

        def _both(src, dst, *args, _real=_real, **kwargs):  # type: ignore[no-untyped-def]
            _refuse(src)
            _refuse(dst)
            return _real(src, dst, *args, **kwargs)

        setattr(os, _name, _both)


def _roots(name: str) -> tuple[str, ...]:
    return tuple(os.path.abspath(p) for p in os.environ.get(name, "").split(os.pathsep) if p)


_HIDDEN, _IMAGE = _roots("JOURNEY_HIDDEN"), _roots("JOURNEY_IMAGE")


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _absent(real, at=0):  # type: ignore[no-untyped-def]
    def checked(*args, **kwargs):  # type: ignore[no-untyped-def]
        target = args[at] if len(args) > at else kwargs.get("path", kwargs.get("file"))
        if target is not None and not isinstance(target, int):
            full = os.path.abspath(os.fsdecode(target))
            if _under(full, _HIDDEN) and not _under(full, _IMAGE):
                raise FileNotFoundError(errno.ENOENT, "No such file or directory", full)
        return real(*args, **kwargs)

    return checked


if _HIDDEN:
    builtins.open = io.open = _absent(builtins.open)
    for _name in ("open", "stat", "lstat", "access", "scandir", "listdir"):
        setattr(os, _name, _absent(getattr(os, _name)))
