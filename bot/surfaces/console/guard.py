"""Who may reach the web console: the checks in front of every console route.

The console has no login of its own, so by default it answers only a browser on this machine:
a loopback client, addressing it by a loopback name (a rebound DNS name is refused), and not
through a proxy. A reverse proxy on the same host connects from 127.0.0.1 too, so any request
carrying a proxy's forwarding header (`Forwarded`, `X-Forwarded-*`, `X-Real-IP`) is refused:
it came from somewhere else. A public console (`CHATOPS_CONSOLE_PUBLIC=true`) answers everyone
who presents `CHATOPS_CONSOLE_TOKEN` as `Authorization: Bearer ...` (compared in constant time);
it cannot start without a token, or a way to sign people in (`bot.surfaces.console.signin`:
OpenID Connect or an auth proxy), which then replaces the token. With a token set, a local
console asks for it too. Every API request carries its user (`USER_KEY`): a public console's
request without one is refused (401, with where to sign in). POSTs must be JSON and, when the
browser says where they come from, same-origin (no cross-site clicks).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from aiohttp import web

from bot.config import Settings
from bot.errors import StartupError
from bot.surfaces.console.signin import SIGNIN_PATH, USER_KEY, ConsoleIdentity

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

FORWARDING_HEADERS = ("forwarded", "x-real-ip")
FORWARDING_PREFIX = "x-forwarded-"
NEEDS_TOKEN = (
    "CHATOPS_CONSOLE_PUBLIC=true needs CHATOPS_CONSOLE_TOKEN: a public console without a token "
    "lets anyone who reaches it approve any call (set a long random token, or leave the console "
    "local)"
)


def check_console_settings(settings: Settings, identity: ConsoleIdentity) -> None:
    """Refuse to start a public console that anyone could use (a `StartupError`)."""
    if identity.mode == "token" and settings.chatops_console_token is None:
        raise StartupError(NEEDS_TOKEN)


class ConsoleGuard:
    """Wraps console handlers in the checks of the module docstring."""

    def __init__(self, settings: Settings, identity: ConsoleIdentity) -> None:
        self.public = settings.chatops_console_public
        token = settings.chatops_console_token
        self._token = token.get_secret_value().encode() if token is not None else None
        self._identity = identity

    def page(self, handler: Handler) -> Handler:
        """The page itself: where it may be opened from (it holds no data, so no token)."""
        return self._wrap(handler, api=False)

    def api(self, handler: Handler) -> Handler:
        """A console API route: where it may be reached from, and the token."""
        return self._wrap(handler, api=True)

    def _wrap(self, handler: Handler, *, api: bool) -> Handler:
        async def guarded(request: web.Request) -> web.StreamResponse:
            self._check_origin(request)
            if api:
                self._check_user(request)
            if request.method == "POST":
                if request.content_type != "application/json":
                    raise web.HTTPUnsupportedMediaType(text="send application/json")
                origin = request.headers.get("Origin")
                if origin and urlsplit(origin).netloc != request.host:
                    raise web.HTTPForbidden(text="cross-origin requests are refused")
            return await handler(request)

        return guarded

    def _check_origin(self, request: web.Request) -> None:
        if self.public:
            return
        if not is_loopback(request.remote):
            raise web.HTTPForbidden(
                text="The web console answers local clients only "
                "(CHATOPS_CONSOLE_PUBLIC=true with CHATOPS_CONSOLE_TOKEN opens it)."
            )
        if forwarded(request):
            raise web.HTTPForbidden(
                text="The web console is local: requests through a proxy are refused "
                "(CHATOPS_CONSOLE_PUBLIC=true with CHATOPS_CONSOLE_TOKEN serves it behind one)."
            )
        if not is_local_host(request.host):
            raise web.HTTPForbidden(
                text="Open the console as http://localhost:PORT/ or http://127.0.0.1:PORT/ "
                "(other host names are refused: DNS rebinding)."
            )

    def _check_user(self, request: web.Request) -> None:
        """The token (where it is the credential), then who the user is."""
        if self._identity.mode in ("local", "token"):
            self._check_token(request)
        user = self._identity.user(request)
        if user is None and self._identity.verified:
            signin = SIGNIN_PATH if self._identity.mode == "oidc" else None
            raise web.HTTPUnauthorized(
                text=json.dumps({"error": "sign in to use this console", "signin": signin}),
                content_type="application/json",
            )
        if user is not None:
            request[USER_KEY] = user

    def _check_token(self, request: web.Request) -> None:
        if self._token is None:
            return
        scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            presented.strip().encode(), self._token
        ):
            raise web.HTTPUnauthorized(
                text="This console needs its token: open it with the link "
                "http://HOST:PORT/#token=... (CHATOPS_CONSOLE_TOKEN), or send "
                "Authorization: Bearer ...",
                headers={"WWW-Authenticate": 'Bearer realm="chatops console"'},
            )


def forwarded(request: web.Request) -> bool:
    """The request carries a proxy's forwarding header: it did not start on this machine."""
    return any(
        name.lower() in FORWARDING_HEADERS or name.lower().startswith(FORWARDING_PREFIX)
        for name in request.headers
    )


def is_local_request(request: web.Request) -> bool:
    """From this machine, named by a loopback name, through no proxy (`GET /metrics` asks
    the same of a client when no token opens it)."""
    return is_loopback(request.remote) and not forwarded(request) and is_local_host(request.host)


def is_local_host(host: str) -> bool:
    """The Host header names this machine's loopback (a rebound DNS name would not)."""
    name = urlsplit(f"//{host}").hostname or ""
    return name == "localhost" or name.endswith(".localhost") or is_loopback(name)


def is_loopback(remote: str | None) -> bool:
    """The peer's address is this machine's loopback."""
    if not remote:
        return False
    try:
        return ipaddress.ip_address(remote.split("%")[0]).is_loopback
    except ValueError:
        return False
