"""A small OpenID Connect provider on 127.0.0.1 for the console's sign-in tests.

It checks what a real provider checks: the client id and registered redirect URI at
`/authorize`, a PKCE S256 challenge, the client's secret (HTTP Basic) at `/token`, each code
used once, by the same redirect URI, with the verifier matching its challenge. It signs ID
tokens (RS256) with a key it publishes at `/jwks`. `misbehave` makes it lie the way a
compromised or misconfigured provider would (another audience, a stale nonce, an expired token,
a key nobody published), for the tests that the console refuses each.
"""

from __future__ import annotations

import base64
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from aiohttp.test_utils import TestServer
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

CLIENT_ID = "chatops-console"
CLIENT_SECRET = "oidc-client-secret-5e1f"


@dataclass
class _Grant:
    user: str
    challenge: str
    nonce: str
    redirect_uri: str


@dataclass
class FakeOidcProvider:
    redirect_uri: str = ""  # the one registered for CLIENT_ID
    user: str = "alice@example.com"  # who signs in next
    misbehave: dict[str, Any] = field(default_factory=dict)  # claims to override; "key": "other"
    authorize_requests: list[dict[str, str]] = field(default_factory=list)
    token_requests: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._key = RSAKey.generate_key(2048, parameters={"kid": "k1", "alg": "RS256"})
        self._other = RSAKey.generate_key(2048, parameters={"kid": "k1", "alg": "RS256"})
        self._grants: dict[str, _Grant] = {}
        self._server: TestServer | None = None

    @property
    def issuer(self) -> str:
        assert self._server is not None, "start() first"
        return str(self._server.make_url("")).rstrip("/")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/.well-known/openid-configuration", self._discovery)
        app.router.add_get("/authorize", self._authorize)
        app.router.add_post("/token", self._token)
        app.router.add_get("/jwks", self._jwks)
        self._server = TestServer(app, host="127.0.0.1")
        await self._server.start_server()

    async def close(self) -> None:
        if self._server is not None:
            await self._server.close()

    async def _discovery(self, request: web.Request) -> web.Response:
        return web.json_response({
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "jwks_uri": f"{self.issuer}/jwks",
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
            "id_token_signing_alg_values_supported": ["RS256"],
        })  # fmt: skip

    async def _jwks(self, request: web.Request) -> web.Response:
        return web.json_response(KeySet([self._key]).as_dict(private=False))

    async def _authorize(self, request: web.Request) -> web.Response:
        query = dict(request.query)
        self.authorize_requests.append(query)
        if query.get("client_id") != CLIENT_ID or query.get("redirect_uri") != self.redirect_uri:
            return web.json_response({"error": "invalid_request"}, status=400)
        if query.get("response_type") != "code" or query.get("code_challenge_method") != "S256":
            return web.json_response({"error": "invalid_request"}, status=400)
        if not query.get("code_challenge") or "openid" not in query.get("scope", "").split():
            return web.json_response({"error": "invalid_request"}, status=400)
        code = secrets.token_urlsafe(24)
        self._grants[code] = _Grant(
            self.user, query["code_challenge"], query.get("nonce", ""), query["redirect_uri"]
        )
        back = {"code": code, "state": query.get("state", "")}
        raise web.HTTPFound(f"{query['redirect_uri']}?{urlencode(back)}")

    async def _token(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        self.token_requests.append({k: str(v) for k, v in form.items()})
        scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
        expected = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        if scheme != "Basic" or encoded != expected:
            return web.json_response({"error": "invalid_client"}, status=401)
        grant = self._grants.pop(str(form.get("code")), None)  # a code is used once
        if grant is None or form.get("grant_type") != "authorization_code":
            return web.json_response({"error": "invalid_grant"}, status=400)
        if form.get("redirect_uri") != grant.redirect_uri:
            return web.json_response({"error": "invalid_grant"}, status=400)
        if create_s256_code_challenge(str(form.get("code_verifier", ""))) != grant.challenge:
            return web.json_response({"error": "invalid_grant"}, status=400)
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer, "sub": grant.user.split("@")[0], "aud": CLIENT_ID,
            "iat": now, "exp": now + 300, "nonce": grant.nonce, "email": grant.user,
        }  # fmt: skip
        claims.update({k: v for k, v in self.misbehave.items() if k != "key"})
        key = self._other if self.misbehave.get("key") == "other" else self._key
        id_token = jwt.encode({"alg": "RS256", "kid": "k1"}, claims, key)
        return web.json_response(
            {"access_token": secrets.token_urlsafe(16), "token_type": "Bearer",
             "id_token": id_token, "expires_in": 300}
        )  # fmt: skip
