"""An OAuth 2.0 provider and the API it guards, on 127.0.0.1 (what a per-user connector acts on).

It checks what a real provider checks: at `/authorize` the client id and the registered redirect
URI and an S256 challenge; at `/token` the client secret, each code used once with the same
redirect URI and a verifier matching its challenge (`authorization_code`), and a live refresh
token (`refresh_token`, rotated on each use); `/revoke` (RFC 7009) ends a token. The API (`/api`)
answers only a live access token and records whose token each request carried (`api_calls`),
so a test sees whose credentials the bot used. `login` is who signs in at `/authorize` next.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import aiohttp
from aiohttp import web

CLIENT_ID = "gh-client-id"
CLIENT_SECRET = "gh-client-secret-7c2d"  # noqa: S105 - a test value
BOT_TOKEN = "gh-bot-token-41aa"  # noqa: S105 - the bot's own token, accepted by the API


def s256(verifier: str) -> str:
    return (
        base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    )


@dataclass
class _Code:
    login: str
    challenge: str
    redirect_uri: str


@dataclass
class _Access:
    login: str
    expires: float


@dataclass
class FakeOAuthProvider:
    redirect_uri: str = ""  # the one registered for CLIENT_ID (set before a sign-in)
    login: str = "octo-dev"  # who signs in at /authorize next
    expires_in: int = 3600  # lifetime of the access tokens it issues
    token_requests: list[dict[str, str]] = field(default_factory=list)
    revoked: list[str] = field(default_factory=list)
    api_calls: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, login)
    api_tokens: list[str] = field(default_factory=list)  # the token each API call carried

    def __post_init__(self) -> None:
        self._codes: dict[str, _Code] = {}
        self._access: dict[str, _Access] = {}
        self._refresh: dict[str, str] = {}  # refresh token -> login
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/authorize", self._authorize)
        app.router.add_post("/token", self._token)
        app.router.add_post("/revoke", self._revoke)
        app.router.add_route("*", "/api/{tail:.*}", self._api)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def expire_access_tokens(self) -> None:
        """Every access token stops working now (the provider's clock, not the bot's)."""
        for access in self._access.values():
            access.expires = 0.0

    def live_tokens(self) -> list[str]:
        return [t for t, a in self._access.items() if a.expires > time.time()]

    def tokens_of(self, login: str) -> list[str]:
        """Every access and refresh token ever issued to `login`."""
        access = [t for t, a in self._access.items() if a.login == login]
        return access + [t for t, who in self._refresh.items() if who == login]

    async def _authorize(self, request: web.Request) -> web.Response:
        q = request.query
        if q.get("client_id") != CLIENT_ID or q.get("redirect_uri") != self.redirect_uri:
            return web.Response(status=400, text="unknown client or redirect_uri")
        if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return web.Response(status=400, text="PKCE S256 required")
        code = secrets.token_urlsafe(16)
        self._codes[code] = _Code(self.login, q["code_challenge"], q["redirect_uri"])
        target = f"{q['redirect_uri']}?{urlencode({'code': code, 'state': q.get('state', '')})}"
        raise web.HTTPFound(target)

    def _issue(self, login: str) -> dict[str, Any]:
        access, refresh = f"gho_{secrets.token_hex(12)}", f"ghr_{secrets.token_hex(12)}"
        self._access[access] = _Access(login, time.time() + self.expires_in)
        self._refresh[refresh] = login
        return {
            "access_token": access, "refresh_token": refresh, "token_type": "bearer",
            "expires_in": self.expires_in, "scope": "repo",
        }  # fmt: skip

    async def _token(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        self.token_requests.append({k: str(v) for k, v in form.items()})
        if form.get("client_id") != CLIENT_ID or form.get("client_secret") != CLIENT_SECRET:
            return web.json_response({"error": "invalid_client"}, status=401)
        if form.get("grant_type") == "authorization_code":
            code = self._codes.pop(str(form.get("code", "")), None)
            if code is None or code.redirect_uri != form.get("redirect_uri"):
                return web.json_response({"error": "invalid_grant"}, status=400)
            if s256(str(form.get("code_verifier", ""))) != code.challenge:
                return web.json_response({"error": "invalid_grant"}, status=400)
            return web.json_response(self._issue(code.login))
        if form.get("grant_type") == "refresh_token":
            login = self._refresh.pop(str(form.get("refresh_token", "")), None)
            if login is None:
                return web.json_response({"error": "invalid_grant"}, status=400)
            return web.json_response(self._issue(login))
        return web.json_response({"error": "unsupported_grant_type"}, status=400)

    async def _revoke(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        if form.get("client_id") != CLIENT_ID or form.get("client_secret") != CLIENT_SECRET:
            return web.json_response({"error": "invalid_client"}, status=401)
        token = str(form.get("token", ""))
        self.revoked.append(token)
        self._access.pop(token, None)
        self._refresh.pop(token, None)
        return web.Response(status=200)

    async def _api(self, request: web.Request) -> web.Response:
        header = request.headers.get("Authorization", "")
        token = header.removeprefix("Bearer ") if header.startswith("Bearer ") else ""
        if token == BOT_TOKEN:
            login = "chatops-bot"
        else:
            access = self._access.get(token)
            if access is None or access.expires <= time.time():
                return web.json_response({"message": "Bad credentials"}, status=401)
            login = access.login
        self.api_calls.append((request.method, request.path, login))
        self.api_tokens.append(token)
        return web.json_response({"login": login, "path": request.path})


# --- a connector on this provider, and a browser to connect with -------------------------------

_MANIFEST = """\
name: gh
description: Code hosting, as the person
base_url: {url}/api
auth:
  type: oauth2
  authorize_url: {url}/authorize
  token_url: {url}/token
  revoke_url: {url}/revoke
  scopes: [repo]
  client_id_env: GH_CLIENT_ID
  client_secret_env: GH_CLIENT_SECRET
  bot_token_env: GH_BOT_TOKEN
  pkce: true
actions:
  - name: whoami
    description: Who the caller is
    method: GET
    path: /user
  - name: deploy
    description: Deploy one service
    method: POST
    path: /deploy/{{name}}
    parameters: {{type: object, properties: {{name: {{type: string}}}}, required: [name]}}
    approvers: [U0LEAD]
    on_behalf_of: approver
    risk: high
  - name: status
    description: Status of the service, as the bot when the person has not connected
    method: GET
    path: /status
    fallback: bot
"""


def gh_manifest(url: str) -> str:
    """A per-user OAuth connector `gh` on the provider at `url`: `whoami` as the requester,
    `deploy` as its approver (U0LEAD), `status` as the bot when the person has not connected."""
    return _MANIFEST.format(url=url)


def browser() -> aiohttp.ClientSession:
    """A browser: keeps cookies (also for 127.0.0.1) and follows redirects."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


async def open_link(link: str, session: aiohttp.ClientSession | None = None) -> tuple[int, str]:
    """Open a connect link and follow it through the provider back to the bot's callback."""
    if session is not None:
        async with session.get(link) as response:
            return response.status, await response.text()
    async with browser() as fresh, fresh.get(link) as response:
        return response.status, await response.text()


async def callback_url(session: aiohttp.ClientSession, link: str) -> str:
    """Go as far as the provider's redirect to the callback, and return that URL unopened."""
    async with session.get(link, allow_redirects=False) as start:
        assert start.status == 302, await start.text()
        authorize = start.headers["Location"]
    async with session.get(authorize, allow_redirects=False) as provider:
        assert provider.status == 302, await provider.text()
        return provider.headers["Location"]
