"""Every S3 request our code sends names the bucket's expected owner (x-amz-expected-bucket-owner).

Installed by the `aws_env` fixture on every moto-backed test: it wraps botocore's BaseClient._make_request, the one
place every client's request passes, and records each S3 request that our packages made (a frame of model_build/,
bench/, ops/ or config/ is on the calling thread's stack; the tests' own set-up and tampering calls are not ours)
without the header, or with another account. moto does not enforce the header (it accepts any owner), so the
header itself is what is checked; S3's 403 for another owner is verified on AWS (docs/verify-on-aws.md).
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OURS = tuple(str(ROOT / pkg) + "/" for pkg in ("model_build", "bench", "ops", "config"))
HEADER = "x-amz-expected-bucket-owner"


def _our_caller() -> str | None:
    """The innermost frame of our packages on this thread's stack, as file:line, or None."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(OURS):
            return f"{Path(name).relative_to(ROOT)}:{frame.f_lineno}"
        frame = frame.f_back
    return None


class ExpectedOwnerCheck:
    """Records S3 requests of ours that do not name `account` as the bucket owner."""

    def __init__(self, account: str) -> None:
        self.account = account
        self.missing: list[str] = []
        self.checked = 0
        self._lock = threading.Lock()

    def install(self, monkeypatch: Any) -> None:
        from botocore.client import BaseClient

        original = BaseClient._make_request
        check = self

        def make_request(client: Any, operation_model: Any, request_dict: dict[str, Any], *args: Any) -> Any:
            if client.meta.service_model.service_name == "s3":
                check.observe(operation_model.name, request_dict.get("headers", {}))
            return original(client, operation_model, request_dict, *args)

        monkeypatch.setattr(BaseClient, "_make_request", make_request)

    def observe(self, operation: str, headers: Any) -> None:
        caller = _our_caller()
        if caller is None:
            return
        owner = headers.get(HEADER)
        with self._lock:
            self.checked += 1
            if owner != self.account:
                self.missing.append(f"{operation} from {caller} ({HEADER}: {owner!r})")
