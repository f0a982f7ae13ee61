"""Outbound Feishu/Lark calls through lark-oapi: rate-limited per message, throttling retried.

lark-oapi fetches and caches the tenant access token itself, but does so with blocking
`requests` calls even from its `a*` coroutine variants, so every SDK call here runs on a small
thread pool owned by the sender; the event loop never blocks.

Feishu allows 5 requests a second per message (replying to or editing one message); the
`MessageRateLimiter` spaces calls on the same message id. A throttled answer (HTTP 429, or
code 99991400 / 230020) is retried after `x-ogw-ratelimit-reset` seconds when given, else with
exponential backoff. The tenant token lives in a `TokenCache` the sender owns; a token Feishu
rejects early (revoked, secret reset) is dropped and fetched anew once.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import lark_oapi as lark
from lark_oapi.api.im.v1 import (
    CreateFileRequest,
    CreateFileRequestBody,
    CreateMessageRequest,
    CreateMessageRequestBody,
    PatchMessageRequest,
    PatchMessageRequestBody,
    ReplyMessageRequest,
    ReplyMessageRequestBody,
)
from lark_oapi.core.cache import ICache
from lark_oapi.core.enum import AccessTokenType, HttpMethod
from lark_oapi.core.model import BaseRequest, BaseResponse

from bot.errors import SurfaceError

logger = logging.getLogger(__name__)

THROTTLE_CODES = frozenset({99991400, 230020})
# the tenant access token is invalid or expired (revoked, app secret reset): fetch a new one
TOKEN_CODES = frozenset({99991661, 99991663, 99991668})
R = TypeVar("R", bound=BaseResponse)


class FeishuAPIError(SurfaceError):
    """A Feishu API call failed; carries Feishu's code and message (never credentials)."""

    def __init__(self, operation: str, code: int | None, msg: str, status: int | None) -> None:
        super().__init__(f"feishu {operation} failed: code={code} status={status} msg={msg}")
        self.code = code
        self.status = status


class MessageRateLimiter:
    """At most `per_second` calls a second on one message id (Feishu: 5 QPS per message)."""

    def __init__(
        self,
        per_second: float = 5.0,
        *,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._interval = 1.0 / per_second
        self._next: dict[str, float] = {}
        self._max_keys = max_keys
        self._clock = clock
        self._sleep = sleep

    async def acquire(self, key: str) -> None:
        """Take this key's next free slot (no await in between, so no lock), then wait for it."""
        now = self._clock()
        if len(self._next) > self._max_keys:
            self._next = {k: t for k, t in self._next.items() if t > now}
        slot = max(now, self._next.get(key, 0.0))
        self._next[key] = slot + self._interval
        if slot > now:
            await self._sleep(slot - now)


class TokenCache(ICache):
    """lark-oapi's token cache, owned by one sender so that a rejected token can be dropped.

    lark-oapi keeps the tenant token until its stated expiry; if Feishu rejects it earlier the
    sender clears this cache and the SDK fetches a fresh one on the retry.
    """

    def __init__(self) -> None:
        self._items: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> str:
        with self._lock:
            value, expires = self._items.get(key, ("", 0.0))
        return value if expires > time.time() else ""

    def set(self, key: str, value: str, expire: int) -> None:
        """`expire`: a Unix time (lark-oapi's convention)."""
        with self._lock:
            self._items[key] = (value, float(expire))

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


def build_client(app_id: str, app_secret: str, domain: str, cache: ICache) -> lark.Client:
    """A lark-oapi client for the app; it fetches and refreshes the tenant token itself."""
    return (
        lark.Client.builder()
        .app_id(app_id)
        .app_secret(app_secret)
        .domain(domain.rstrip("/"))
        .timeout(10.0)
        .cache(cache)
        .log_level(lark.LogLevel.WARNING)
        .build()
    )


class FeishuSender:
    """The Open API calls the surface makes, on a lark-oapi `Client`."""

    def __init__(
        self,
        client: lark.Client,
        *,
        token_cache: TokenCache | None = None,
        limiter: MessageRateLimiter | None = None,
        max_attempts: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        workers: int = 8,
    ) -> None:
        self._client = client
        self._token_cache = token_cache
        self._limiter = limiter or MessageRateLimiter()
        self._max_attempts = max_attempts
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="feishu-api")

    @classmethod
    def for_app(cls, app_id: str, app_secret: str, domain: str, **options: Any) -> FeishuSender:
        """A sender on its own client and token cache (raises ValueError for a bad domain)."""
        cache = TokenCache()
        return cls(build_client(app_id, app_secret, domain, cache), token_cache=cache, **options)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def reply(self, message_id: str, msg_type: str, content: dict[str, Any]) -> str:
        """Reply in the thread of `message_id`; returns the new message id."""
        body = (
            ReplyMessageRequestBody.builder()
            .msg_type(msg_type)
            .content(json.dumps(content, ensure_ascii=False))
            .reply_in_thread(True)
            .uuid(str(uuid.uuid4()))
            .build()
        )
        request = ReplyMessageRequest.builder().message_id(message_id).request_body(body).build()
        resp = await self._call("reply", message_id, self._client.im.v1.message.reply, request)
        return resp.data.message_id

    async def create(
        self, receive_id_type: str, receive_id: str, msg_type: str, content: dict[str, Any]
    ) -> str:
        """Send a new message to a chat (`chat_id`) or a user (`open_id`)."""
        body = (
            CreateMessageRequestBody.builder()
            .receive_id(receive_id)
            .msg_type(msg_type)
            .content(json.dumps(content, ensure_ascii=False))
            .uuid(str(uuid.uuid4()))
            .build()
        )
        request = (
            CreateMessageRequest.builder()
            .receive_id_type(receive_id_type)
            .request_body(body)
            .build()
        )
        resp = await self._call("create", receive_id, self._client.im.v1.message.create, request)
        return resp.data.message_id

    async def patch(self, message_id: str, card: dict[str, Any]) -> None:
        """Replace a shared card's content in place."""
        body = PatchMessageRequestBody.builder().content(json.dumps(card, ensure_ascii=False))
        request = (
            PatchMessageRequest.builder().message_id(message_id).request_body(body.build()).build()
        )
        await self._call("patch", message_id, self._client.im.v1.message.patch, request)

    async def upload_file(self, name: str, data: bytes) -> str:
        """Upload a document (`POST /open-apis/im/v1/files`, type `stream`); its file_key."""

        def upload(_: object) -> Any:  # a fresh request per attempt: the body is a stream
            body = (
                CreateFileRequestBody.builder()
                .file_type("stream")
                .file_name(name)
                .file(io.BytesIO(data))
                .build()
            )
            request = CreateFileRequest.builder().request_body(body).build()
            return self._client.im.v1.file.create(request)

        resp = await self._call("file.create", f"file:{name}", upload, None)
        return str(resp.data.file_key)

    async def bot_open_id(self) -> str:
        """The bot's own open_id (`GET /open-apis/bot/v3/info`), to recognise its mentions."""
        request = (
            BaseRequest.builder()
            .http_method(HttpMethod.GET)
            .uri("/open-apis/bot/v3/info")
            .token_types({AccessTokenType.TENANT})
            .build()
        )
        resp = await self._call("bot.info", "bot.info", self._client.request, request)
        body = json.loads(resp.raw.content or b"{}")
        return str((body.get("bot") or {}).get("open_id") or "")

    async def _call(self, op: str, key: str, fn: Callable[[Any], R], request: Any) -> R:
        loop = asyncio.get_running_loop()
        for attempt in range(1, self._max_attempts + 1):
            await self._limiter.acquire(key)
            try:
                resp = await loop.run_in_executor(self._executor, fn, request)
            except Exception as exc:  # noqa: BLE001 - network, token or non-JSON answer
                # the type only: SDK messages may quote request details
                raise FeishuAPIError(
                    op, getattr(exc, "code", None), type(exc).__name__, None
                ) from None
            if resp.success():
                return resp
            status = resp.raw.status_code if resp.raw is not None else None
            if resp.code in TOKEN_CODES and self._token_cache is not None and attempt == 1:
                logger.info("feishu %s: tenant token rejected (code %s), renewing", op, resp.code)
                self._token_cache.clear()
                continue
            if (status == 429 or resp.code in THROTTLE_CODES) and attempt < self._max_attempts:
                delay = self._retry_delay(resp, attempt)
                logger.info(
                    "feishu %s throttled (code %s), retrying in %.2fs", op, resp.code, delay
                )
                await asyncio.sleep(delay)
                continue
            raise FeishuAPIError(op, resp.code, resp.msg or "", status)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _retry_delay(self, resp: BaseResponse, attempt: int) -> float:
        headers = {k.lower(): v for k, v in ((resp.raw.headers or {}) if resp.raw else {}).items()}
        for name in ("x-ogw-ratelimit-reset", "retry-after"):
            try:
                return min(max(float(headers[name]), 0.0), self._max_backoff_s)
            except (KeyError, ValueError):
                continue
        return min(self._backoff_s * 2 ** (attempt - 1), self._max_backoff_s)
