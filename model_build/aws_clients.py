"""boto3 clients whose every call ends within a known time, with each failed attempt shown.

A silent endpoint (accepts TCP, never answers) costs one read timeout per attempt; a refused or unreachable one
one connect timeout at most. botocore's defaults (60 s each, up to 5 or 10 attempts) leave a command silent for
minutes; here a call gives up after ATTEMPTS attempts, so within SILENT_BOUND_S, and says so on each one.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

ATTEMPTS = 3  # botocore "standard" retries: the first attempt and two retries
CONNECT_S = 5.0
READ_S = 15.0  # per socket read: S3 answers a part within this once the body is sent, and keeps a long
# CompleteMultipartUpload alive with whitespace; STS and CloudFormation answer in well under a second
MAX_BACKOFF_S = 1.0 + 2.0  # standard mode waits up to 2^(n-1) s (random jitter) before retry n: 1 s, then 2 s
SILENT_BOUND_S = ATTEMPTS * max(CONNECT_S, READ_S) + MAX_BACKOFF_S


def bounded_config(**extra: Any) -> Any:
    """A botocore Config with the timeouts and attempts above (`extra` adds e.g. max_pool_connections)."""
    from botocore.config import Config

    return Config(
        connect_timeout=CONNECT_S,
        read_timeout=READ_S,
        retries={"mode": "standard", "total_max_attempts": ATTEMPTS},
        **extra,
    )


def client(service: str, region: str, *, stream: TextIO | None = None, **extra: Any) -> Any:
    """boto3.client(service) with bounded_config(); each attempt that got no answer is reported on `stream`."""
    import boto3

    made = boto3.client(service, region_name=region, config=bounded_config(**extra))
    announce_retries(made, stream)
    return made


def announce_retries(made: Any, stream: TextIO | None = None) -> None:
    """Print one line per attempt that ended without an answer (timeout, refused, reset), as it happens."""
    out = stream or sys.stderr
    service = made.meta.service_model.service_name

    def on_retry(attempts: int, caught_exception: Exception | None = None, operation: Any = None, **_: Any) -> None:
        if caught_exception is None:
            return
        then = "retrying" if attempts < ATTEMPTS else "giving up"
        name = getattr(operation, "name", "call")
        print(
            f"{service} {name}: no answer from {made.meta.endpoint_url} (attempt {attempts}/{ATTEMPTS}: "
            f"{type(caught_exception).__name__}); {then}",
            file=out,
            flush=True,
        )

    made.meta.events.register(f"needs-retry.{made.meta.service_model.service_id.hyphenize()}", on_retry)
