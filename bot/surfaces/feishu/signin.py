"""Feishu/Lark proves the app's credentials at start-up: a tenant access token for
FEISHU_APP_ID and FEISHU_APP_SECRET (`POST /open-apis/auth/v3/tenant_access_token/internal`,
what lark-oapi asks before its first call, and what the long connection's handshake starts
from).

Feishu answers a wrong id or secret with a non-zero `code` and a `msg` ("app secret invalid"):
Feishu is then down for this process, said once with the code and the variables to check
(`bot.chat.signin.SignIn`); a network failure or a 5xx is retried in the background. While
Feishu is down its webhook answers a short 503 (Feishu pushes again later), and the long
connection is not opened (the SDK would reconnect forever, failing each time).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web

from bot.appkeys import PLATFORM_HTTP_KEY
from bot.chat.health import SurfaceHealth
from bot.chat.signin import CredentialsRefused, PlatformUnreachable, SignIn, short_reason
from bot.surfaces.feishu.apps import FeishuApp

NAME = "feishu"
TOKEN_PATH = "/open-apis/auth/v3/tenant_access_token/internal"
TIMEOUT_S = 10.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class FeishuCredentials:
    """The check as a cleanup_ctx (on the app's HTTP session) and its outcome."""

    def __init__(self, app: FeishuApp, health: SurfaceHealth) -> None:
        """`app`: whose credentials; its health name (`feishu`, `feishu/<name>`) is where an
        outcome shows in `/readyz`."""
        self._app = app
        self._http: aiohttp.ClientSession | None = None
        self.sign_in = SignIn(app.health_name, self._attempt, health, what=app.variables)

    async def context(self, app: web.Application) -> AsyncIterator[None]:
        self._http = app[PLATFORM_HTTP_KEY]
        self.sign_in.start()
        try:
            yield
        finally:
            await self.sign_in.close()

    async def accepted(self) -> bool:
        """Wait for the check's answer: True when Feishu accepted the credentials."""
        return await self.sign_in.outcome()

    async def _attempt(self) -> None:
        app = self._app
        payload = {"app_id": app.app_id, "app_secret": app.app_secret}
        assert self._http is not None  # set before the check starts
        try:
            async with self._http.post(
                app.domain.rstrip("/") + TOKEN_PATH,
                json=payload,
                timeout=aiohttp.ClientTimeout(total=TIMEOUT_S),
            ) as response:
                if response.status >= 500 or response.status == 429:
                    raise PlatformUnreachable(f"HTTP {response.status}", "FEISHU_DOMAIN")
                body: Any = await response.json(content_type=None)
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
            raise PlatformUnreachable(short_reason(exc), "FEISHU_DOMAIN") from None
        code = body.get("code") if isinstance(body, dict) else None
        if code != 0:
            msg = str(body.get("msg") or "refused") if isinstance(body, dict) else "refused"
            raise CredentialsRefused(app.variables, f"{msg} (code {code})")


def unless_down(health: SurfaceHealth, handle: Handler, name: str = NAME) -> Handler:
    """The webhook, or a short 503 while Feishu (this app, `name`) is down: Feishu pushes the
    event again later. The reason is in `/readyz`, not in this answer to a request not yet
    verified."""

    async def feishu_events(request: web.Request) -> web.StreamResponse:
        if health.refused(name) is not None:
            return web.json_response({"error": "feishu is down (see /readyz)"}, status=503)
        return await handle(request)

    return feishu_events
