"""The checks behind `GET /readyz`: the database (reachable and migrated to the newest
revision) and the model endpoint (configured and answering), each named in the body.

The model check is `GET {base}/models` with a short timeout, its answer kept for
`MODEL_CHECK_TTL_S` so a load balancer polling `/readyz` costs the model provider almost
nothing; concurrent polls share one request. Any HTTP answer but a refused key or a 5xx counts
as reachable (some OpenAI-compatible servers have no `/models` and say 404: they are there).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import aiohttp
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from bot.config import Settings
from bot.engine.llm import LLM_NOT_CONFIGURED
from bot.storage import migrate
from bot.storage.database import db_error_reason

MODEL_CHECK_TTL_S = 30.0
MODEL_CHECK_TIMEOUT_S = 3.0
OPENAI_DEFAULT_BASE = "https://api.openai.com/v1"


@dataclass(frozen=True)
class Check:
    """One named check's answer: `ok`, or `reason`; `detail`: extra fields for the body."""

    ok: bool
    reason: str = ""
    detail: tuple[tuple[str, str], ...] = ()

    def as_json(self) -> dict[str, object]:
        body: dict[str, object] = {"ok": self.ok}
        if not self.ok:
            body["reason"] = self.reason
        body.update(self.detail)
        return body


class DatabaseProbe:
    """Reachable, and at the migrations' head (read once: the code does not change under a
    running process). `check` blocks: call it in a thread."""

    def __init__(self) -> None:
        self._head: str | None = None

    def check(self, engine: Engine) -> Check:
        try:
            current = migrate.current_revision(engine)
        except SQLAlchemyError as exc:
            return Check(False, f"unreachable: {db_error_reason(exc)}")
        if self._head is None:
            self._head = migrate.head_revision()
        if current != self._head:
            shown = current or "none (no schema)"
            return Check(False, f"not migrated: at revision {shown}, the code needs {self._head}")
        return Check(True, detail=(("revision", current),))


class ModelProbe:
    """`GET {base}/models`, answered from a cache for `ttl_s` seconds."""

    def __init__(self, settings: Settings, *, ttl_s: float = MODEL_CHECK_TTL_S) -> None:
        self._settings = settings
        self._ttl_s = ttl_s
        self._last: tuple[float, Check] | None = None
        self._lock = asyncio.Lock()

    async def check(self, http: aiohttp.ClientSession) -> Check:
        settings = self._settings
        if not settings.llm_configured:
            return Check(False, LLM_NOT_CONFIGURED)
        async with self._lock:  # concurrent polls share one request
            if self._last is not None and time.monotonic() - self._last[0] < self._ttl_s:
                return self._last[1]
            result = await self._probe(http)
            self._last = (time.monotonic(), result)
            return result

    async def _probe(self, http: aiohttp.ClientSession) -> Check:
        base = (self._settings.openai_base_url or OPENAI_DEFAULT_BASE).rstrip("/")
        key = self._settings.openai_api_key
        headers = {"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}
        where = (("model", self._settings.chatops_model),)
        try:
            async with http.get(
                f"{base}/models",
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=MODEL_CHECK_TIMEOUT_S),
                allow_redirects=False,
            ) as response:
                status = response.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            reason = type(exc).__name__ if isinstance(exc, TimeoutError) else _first_line(exc)
            return Check(False, f"unreachable: {reason} (check OPENAI_BASE_URL)", where)
        if status in (401, 403):
            return Check(False, f"refused the key (HTTP {status}; check OPENAI_API_KEY)", where)
        if status >= 500:
            return Check(False, f"answered HTTP {status}", where)
        return Check(True, detail=where)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__
