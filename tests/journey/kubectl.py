"""The fake `kubectl` on the journey's PATH: a client of the fake cluster's API (JOURNEY_API, the world's loopback
server), as the real kubectl is a client of the API server. It sends its command line (and stdin for `apply -f -`)
and prints what the cluster answers (tests/journey/cluster.py says what each verb imitates). Two verbs run here:
`logs -f` follows the log until the pod ends, and `port-forward svc/NAME LOCAL:REMOTE` listens on 127.0.0.1:LOCAL
and forwards each connection to the Service (prints kubectl's "Forwarding from" line, runs until stopped).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
import urllib.request


def call(argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    request = urllib.request.Request(
        os.environ["JOURNEY_API"] + "/kubectl",
        data=json.dumps({"argv": argv, "stdin": stdin}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:  # the world's loopback API
        answer = json.loads(response.read())
    return answer["code"], answer["stdout"], answer["stderr"]


def follow(argv: list[str]) -> int:
    args = [a for a in argv if a not in ("-f", "--follow")]
    i = args.index("logs")
    offset = 0
    while True:
        code, out, err = call([*args[:i], "journey-follow", *args[i + 1 :], f"--offset={offset}"])
        if code != 0:
            sys.stderr.write(err)
            return code
        part = json.loads(out)
        for line in part["text"].splitlines(keepends=True):
            sys.stdout.write(line.partition(" ")[2])
        sys.stdout.flush()
        offset += part["size"]
        if part["done"]:
            return 0
        time.sleep(0.5)


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy one direction of a TCP connection until it closes (also kube-proxy's, tests/journey/network.py)."""
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


def port_forward(argv: list[str]) -> int:
    i = argv.index("port-forward")
    target, ports = argv[i + 1], argv[i + 2]
    local, _, remote = ports.partition(":")
    code, out, err = call([*argv[:i], "journey-resolve", target, remote or local])
    if code != 0:
        sys.stderr.write(err)
        return code
    upstream = json.loads(out)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(upstream["host"], upstream["port"])
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", int(local))
        print(f"Forwarding from 127.0.0.1:{local} -> {remote or local}", flush=True)
        async with server:
            await server.serve_forever()

    asyncio.run(serve())
    return 0


def main(argv: list[str]) -> int:
    if "logs" in argv and ("-f" in argv or "--follow" in argv):
        return follow(argv)
    if "port-forward" in argv:
        return port_forward(argv)
    stdin = sys.stdin.read() if "apply" in argv else ""
    code, out, err = call(argv, stdin)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
