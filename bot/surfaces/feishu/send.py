"""Outbound Feishu/Lark calls through lark-oapi: rate-limited per message, throttling retried.

lark-oapi fetches and caches the tenant access token itself, but does so with blocking
`requests` calls even from its `a*` coroutine variants, so every SDK call here runs on a small
thread pool owned by the sender; the event loop never blocks.

Feishu allows 5 requests a second per message (replying to or editing one message); the
`message_rate_limiter()` spaces calls on the same message id. A throttled answer (HTTP 429, or
code 99991400 / 230020) and a server error (5xx) are retried by the shared policy
(`bot.engine.retry`): after `x-ogw-ratelimit-reset` (or `Retry-After`) seconds when given,
else with exponential backoff.
The tenant token lives in a `TokenCache`; a token Feishu rejects early (revoked, secret reset)
is dropped and fetched anew once. lark-oapi reads tokens from `TokenManager.cache`, a class
attribute each new client overwrites with its own cache, so with several apps (apps.py) a
sender drops its token there too, by its app id, never another app's. Every call goes
through `_call`, which counts it, each throttled answer and its final failure on the
sender's `PlatformMeter`.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import lark_oapi as lark
from lark_oapi.api.cardkit.v1 import (
    Card,
    ContentCardElementRequest,
    ContentCardElementRequestBody,
    CreateCardRequest,
    CreateCardRequestBody,
    UpdateCardRequest,
    UpdateCardRequestBody,
)
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
from lark_oapi.core.token.manager import TokenManager
from tenacity import RetryCallState

from bot.engine.retry import RetryPolicy, hinted_delay
from bot.errors import SurfaceError
from bot.observability.metrics import PlatformMeter
from bot.rate_limits import KeyedLimiter

logger = logging.getLogger(__name__)

THROTTLE_CODES = frozenset({99991400, 230020})
SERVER_ERRORS = frozenset({500, 502, 503, 504})
# the tenant access token is invalid or expired (revoked, app secret reset): fetch a new one
TOKEN_CODES = frozenset({99991661, 99991663, 99991668})
R = TypeVar("R", bound=BaseResponse)


class FeishuAPIError(SurfaceError):
    """A Feishu API call failed; carries Feishu's code and message (never credentials)."""

    def __init__(self, operation: str, code: int | None, msg: str, status: int | None) -> None:
        super().__init__(f"feishu {operation} failed: code={code} status={status} msg={msg}")
        self.code = code
        self.status = status


def message_rate_limiter(per_second: float = 5.0) -> KeyedLimiter:
    """Calls on one message id spaced `1 / per_second` apart, no burst (Feishu: 5 QPS per
    message); each message id has its own leaky bucket (`bot.rate_limits.KeyedLimiter`)."""
    return KeyedLimiter(1, 1.0 / per_second)


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


def forget_tenant_token(app_id: str, own: TokenCache) -> None:
    """Drop one app's tenant token wherever lark-oapi may read it: the sender's own cache and
    the SDK's process-wide one (the last client built installed it; its keys are per app)."""
    own.clear()
    TokenManager.cache.set(f"self_tenant_token:{app_id}", "", 0)


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
        app_id: str = "",
        limiter: KeyedLimiter | None = None,
        max_attempts: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        workers: int = 8,
        meter: PlatformMeter | None = None,
    ) -> None:
        """`meter`: where the calls, throttled answers and failures are counted (by op)."""
        self._client = client
        self._meter = meter
        self._token_cache = token_cache
        self._app_id = app_id
        self._limiter = limiter or message_rate_limiter()
        self._retry = RetryPolicy(attempts=max_attempts, base_s=backoff_s, max_s=max_backoff_s)
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="feishu-api")

    @classmethod
    def for_app(cls, app_id: str, app_secret: str, domain: str, **options: Any) -> FeishuSender:
        """A sender on its own client and token cache (raises ValueError for a bad domain)."""
        cache = TokenCache()
        client = build_client(app_id, app_secret, domain, cache)
        return cls(client, token_cache=cache, app_id=app_id, **options)

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
        """Send a new message to a chat (`chat_id`) or a user (`open_id`); its message id."""
        return (await self.send(receive_id_type, receive_id, msg_type, content))[0]

    async def send(
        self, receive_id_type: str, receive_id: str, msg_type: str, content: dict[str, Any]
    ) -> tuple[str, str]:
        """Like `create`: (message id, chat id), the chat a message to a user landed in."""
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
        return resp.data.message_id, resp.data.chat_id or ""

    async def patch(self, message_id: str, card: dict[str, Any]) -> None:
        """Replace a shared card's content in place."""
        body = PatchMessageRequestBody.builder().content(json.dumps(card, ensure_ascii=False))
        request = (
            PatchMessageRequest.builder().message_id(message_id).request_body(body.build()).build()
        )
        await self._call("patch", message_id, self._client.im.v1.message.patch, request)

    # --- CardKit card entities (the streamed answer) ---------------------------------------

    async def create_card(self, card: dict[str, Any]) -> str:
        """A card entity from card JSON 2.0 (`POST /open-apis/cardkit/v1/cards`); its card_id.
        It is sent once, by `reply` with content `{"type": "card", "data": {"card_id": ...}}`."""
        body = (
            CreateCardRequestBody.builder()
            .type("card_json")
            .data(json.dumps(card, ensure_ascii=False))
            .build()
        )
        request = CreateCardRequest.builder().request_body(body).build()
        resp = await self._call("card.create", "card.create", self._client.cardkit.v1.card.create,
                                request)  # fmt: skip
        return str(resp.data.card_id)

    async def stream_text(self, card_id: str, element_id: str, text: str, sequence: int) -> None:
        """The whole text so far into a card's markdown element (Feishu types out what is new;
        `PUT .../cards/:card_id/elements/:element_id/content`); `sequence` rises per card."""
        body = (
            ContentCardElementRequestBody.builder()
            .content(text)
            .sequence(sequence)
            .uuid(str(uuid.uuid4()))
            .build()
        )
        request = (
            ContentCardElementRequest.builder()
            .card_id(card_id)
            .element_id(element_id)
            .request_body(body)
            .build()
        )
        await self._call("card.content", f"card:{card_id}",
                         self._client.cardkit.v1.card_element.content, request)  # fmt: skip

    async def update_card(self, card_id: str, card: dict[str, Any], sequence: int) -> None:
        """Replace a card entity whole (`PUT /open-apis/cardkit/v1/cards/:card_id`)."""
        entity = Card.builder().type("card_json").data(json.dumps(card, ensure_ascii=False))
        body = (
            UpdateCardRequestBody.builder()
            .card(entity.build())
            .sequence(sequence)
            .uuid(str(uuid.uuid4()))
            .build()
        )
        request = UpdateCardRequest.builder().card_id(card_id).request_body(body).build()
        await self._call("card.update", f"card:{card_id}", self._client.cardkit.v1.card.update,
                         request)  # fmt: skip

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

    async def send_ephemeral(self, chat_id: str, user_id: str, card: dict[str, Any]) -> str:
        """A card in a group chat that only `user_id` sees (`POST /open-apis/ephemeral/v1/send`;
        lark-oapi has no typed request for it); its message id. Feishu refuses it in direct
        chats and topic groups, and for a person who is not in the chat."""
        who = "open_id" if user_id.startswith("ou_") else "user_id"
        body = {"chat_id": chat_id, who: user_id, "msg_type": "interactive", "card": card}
        request = (
            BaseRequest.builder()
            .http_method(HttpMethod.POST)
            .uri("/open-apis/ephemeral/v1/send")
            .token_types({AccessTokenType.TENANT})
            .body(body)
            .build()
        )
        resp = await self._call("ephemeral.send", f"ephemeral:{chat_id}", self._client.request,
                                request)  # fmt: skip
        data = json.loads(resp.raw.content or b"{}").get("data") or {}
        return str(data.get("message_id") or "")

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
        """One Open API call, rate-limited per message; a throttled answer is retried (the
        shared policy: Feishu's reset header, else backoff), a rejected token renewed once."""
        loop = asyncio.get_running_loop()

        async def attempt() -> R:
            await self._limiter.acquire(key)
            try:
                return await loop.run_in_executor(self._executor, fn, request)
            except Exception as exc:  # noqa: BLE001 - network, token or non-JSON answer
                # the type only: SDK messages may quote request details
                raise FeishuAPIError(
                    op, getattr(exc, "code", None), type(exc).__name__, None
                ) from None

        def again(state: RetryCallState) -> bool:
            resp = _response(state)
            if resp is not None and self._meter is not None and _rate_limited(resp):
                self._meter.rate_limited(op)
            return resp is not None and (self._token_rejected(resp, state) or _throttled(resp))

        def hint(state: RetryCallState) -> float | None:
            resp = _response(state)
            if resp is None or self._token_rejected(resp, state):
                return 0.0  # a fresh token is fetched at once
            return hinted_delay(resp.raw.headers if resp.raw is not None else None)

        def before_sleep(state: RetryCallState) -> None:
            resp = _response(state)
            assert resp is not None  # only answers are retried
            if self._token_rejected(resp, state) and self._token_cache is not None:
                logger.info("feishu %s: tenant token rejected (code %s), renewing", op, resp.code)
                forget_tenant_token(self._app_id, self._token_cache)
            else:
                logger.info(
                    "feishu %s throttled (code %s), retrying in %.2fs",
                    op,
                    resp.code,
                    state.upcoming_sleep,
                )

        retrying = self._retry.retrying(retry=again, hint=hint, before_sleep=before_sleep)
        if self._meter is not None:
            self._meter.call(op)
        try:
            resp: R = await retrying(attempt)
        except FeishuAPIError:  # no answer: the network, the token fetch, a non-JSON body
            if self._meter is not None:
                self._meter.error(op, "connection")
            raise
        if resp.success():
            return resp
        status = resp.raw.status_code if resp.raw is not None else None
        if self._meter is not None:
            self._meter.error(op, _error_kind(resp, status))
        raise FeishuAPIError(op, resp.code, resp.msg or "", status)

    def _token_rejected(self, resp: BaseResponse, state: RetryCallState) -> bool:
        """Feishu refused the cached tenant token on the first attempt: renew it, once."""
        return (
            resp.code in TOKEN_CODES and self._token_cache is not None and state.attempt_number == 1
        )


def _response(state: RetryCallState) -> Any:
    """The last attempt's answer (None when it raised)."""
    if state.outcome is None or state.outcome.failed:
        return None
    return state.outcome.result()


def _rate_limited(resp: BaseResponse) -> bool:
    """HTTP 429 or one of Feishu's throttling codes."""
    status = resp.raw.status_code if resp.raw is not None else None
    return not resp.success() and (status == 429 or resp.code in THROTTLE_CODES)


def _error_kind(resp: BaseResponse, status: int | None) -> str:
    """A failed call's kind for the metrics: rate_limited, server (5xx) or api."""
    if _rate_limited(resp):
        return "rate_limited"
    return "server" if status is not None and status >= 500 else "api"


def _throttled(resp: BaseResponse) -> bool:
    """Worth another try: throttled (429, Feishu's throttling codes) or a server error (5xx,
    Feishu's own outage: a burst of them must not fail the run)."""
    status = resp.raw.status_code if resp.raw is not None else None
    busy = status is not None and (status == 429 or status in SERVER_ERRORS)
    return not resp.success() and (busy or resp.code in THROTTLE_CODES)
