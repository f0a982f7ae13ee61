"""Where audit events go: an HTTP endpoint (JSON lines, HMAC-signed) or a file (JSON lines).

A sink is one object with a `name` (its outbox rows carry it) and one `deliver(lines)` that
either takes the whole batch or raises `AuditSinkError` (then the sender retries the same batch,
in the same order, after a back-off).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from bot.errors import AuditSinkError

SIGNATURE_HEADER = "X-Chatops-Signature"
TIMESTAMP_HEADER = "X-Chatops-Timestamp"


class Sink(Protocol):
    name: str

    async def deliver(self, events: Sequence[dict[str, Any]]) -> None: ...


def json_lines(events: Sequence[dict[str, Any]]) -> bytes:
    """One compact JSON object per line, each line ended."""
    return b"".join(
        json.dumps(event, separators=(",", ":"), sort_keys=True).encode() + b"\n"
        for event in events
    )


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """`sha256=<hex>` of HMAC-SHA256 over `<timestamp>.<body>`: a receiver checks both the body
    and its age (a replayed batch carries an old timestamp)."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


class HttpSink:
    """POSTs each batch as `application/x-ndjson`; any 2xx takes it, anything else (or no
    answer within the timeout) is a failure the sender retries."""

    name = "http"

    def __init__(
        self, url: str, secret: str, *, session: aiohttp.ClientSession, timeout_s: float
    ) -> None:
        """`session`: the app's one client session; `secret`: the HMAC key (from the
        environment, never logged); `timeout_s`: one delivery's limit."""
        self._url = url
        self._secret = secret
        self._session = session
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def deliver(self, events: Sequence[dict[str, Any]]) -> None:
        body = json_lines(events)
        timestamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/x-ndjson",
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: signature(self._secret, timestamp, body),
        }
        try:
            async with self._session.post(
                self._url, data=body, headers=headers, timeout=self._timeout
            ) as response:
                if not 200 <= response.status < 300:
                    raise AuditSinkError(f"the audit sink answered HTTP {response.status}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise AuditSinkError(f"the audit sink is unreachable: {type(exc).__name__}") from None


class FileSink:
    """Appends each batch to a file (created if missing) and flushes it to disk, for a log
    shipper that tails it. One process writes at a time (the sink's lease)."""

    name = "file"

    def __init__(self, path: str | Path) -> None:
        self._path = Path(path)

    async def deliver(self, events: Sequence[dict[str, Any]]) -> None:
        try:
            await asyncio.to_thread(self._append, json_lines(events))
        except OSError as exc:
            raise AuditSinkError(f"cannot append to {self._path}: {exc.strerror}") from None

    def _append(self, data: bytes) -> None:
        with self._path.open("ab") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
