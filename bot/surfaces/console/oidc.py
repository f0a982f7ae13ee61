"""OpenID Connect for a public console: the authorization code flow with PKCE.

Authlib makes the flow's secrets (state, nonce, the PKCE verifier and its S256 challenge);
joserfc (Authlib's JOSE library) checks the ID token: its signature against the issuer's
published keys, then issuer, audience, expiry and the nonce this sign-in sent. The issuer's
endpoints come from its discovery document (`/.well-known/openid-configuration`), read on the
first sign-in and kept. HTTP goes through aiohttp like every other client of the bot.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp
from authlib.common.security import generate_token
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from bot.errors import SurfaceError

ID_TOKEN_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA")
CLOCK_LEEWAY_S = 60  # the issuer's clock and ours may disagree this much
TIMEOUT_S = 10.0


class SignInError(SurfaceError):
    """A sign-in that cannot be completed; its text is safe to show the person."""


@dataclass(frozen=True)
class SignInStart:
    """Where to send the browser, and what its callback must match (kept in a cookie)."""

    url: str
    state: str
    nonce: str
    verifier: str


@dataclass(frozen=True)
class OidcConfig:
    issuer: str
    client_id: str
    client_secret: str
    redirect_uri: str  # the console's `/console/signin/callback`, as registered
    user_claim: str = "email"


class OidcClient:
    """One issuer's sign-in for one client (see the module docstring)."""

    def __init__(self, config: OidcConfig) -> None:
        self._config = config
        self._endpoints: dict[str, Any] | None = None
        self._keys: KeySet | None = None

    async def start(self) -> SignInStart:
        """A new sign-in: the authorization URL with fresh state, nonce and PKCE challenge."""
        endpoints = await self._discover()
        state, nonce, verifier = generate_token(32), generate_token(32), generate_token(64)
        query = {
            "response_type": "code",
            "client_id": self._config.client_id,
            "redirect_uri": self._config.redirect_uri,
            "scope": "openid email profile",
            "state": state,
            "nonce": nonce,
            "code_challenge": create_s256_code_challenge(verifier),
            "code_challenge_method": "S256",
        }
        url = f"{endpoints['authorization_endpoint']}?{urlencode(query)}"
        return SignInStart(url=url, state=state, nonce=nonce, verifier=verifier)

    async def finish(self, code: str, *, nonce: str, verifier: str) -> str:
        """Exchange the code for tokens and check the ID token: the signed-in user's id (the
        `user_claim` claim). Raises `SignInError` with what went wrong."""
        endpoints = await self._discover()
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self._config.redirect_uri,
            "code_verifier": verifier,
        }
        auth = aiohttp.encode_basic_auth(self._config.client_id, self._config.client_secret)
        tokens = await self._fetch(
            "POST", endpoints["token_endpoint"], data=form, headers={"Authorization": auth}
        )
        id_token = tokens.get("id_token")
        if not isinstance(id_token, str):
            raise SignInError("the identity provider sent no ID token")
        claims = await self._verified_claims(id_token, nonce)
        user = claims.get(self._config.user_claim)
        if not isinstance(user, str) or not user.strip():
            raise SignInError(f"the ID token has no {self._config.user_claim!r} claim")
        return user.strip()

    async def _verified_claims(self, id_token: str, nonce: str) -> dict[str, Any]:
        registry = jwt.JWTClaimsRegistry(
            leeway=CLOCK_LEEWAY_S,
            iss={"essential": True, "value": self._config.issuer},
            aud={"essential": True, "value": self._config.client_id},
            exp={"essential": True},
            nonce={"essential": True, "value": nonce},
        )
        for refresh in (False, True):  # a key we do not know yet: the issuer rotated its keys
            keys = await self._key_set(refresh=refresh)
            try:
                token = jwt.decode(id_token, keys, algorithms=list(ID_TOKEN_ALGORITHMS))
            except JoseError as exc:
                if refresh:
                    why = f"the ID token's signature does not hold ({exc.error})"
                    raise SignInError(why) from None
                continue
            try:
                registry.validate(token.claims)
            except JoseError as exc:
                why = f"the ID token was refused ({exc.error}: {exc.description})"
                raise SignInError(why) from None
            return dict(token.claims)
        raise AssertionError("not reached")  # pragma: no cover

    async def _discover(self) -> dict[str, Any]:
        if self._endpoints is None:
            url = self._config.issuer.rstrip("/") + "/.well-known/openid-configuration"
            found = await self._fetch("GET", url)
            if found.get("issuer") != self._config.issuer:
                raise SignInError("the identity provider's discovery names another issuer")
            for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
                if not isinstance(found.get(name), str):
                    raise SignInError(f"the identity provider's discovery has no {name}")
            self._endpoints = found
        return self._endpoints

    async def _key_set(self, *, refresh: bool) -> KeySet:
        if self._keys is None or refresh:
            endpoints = await self._discover()
            self._keys = KeySet.import_key_set(await self._fetch("GET", endpoints["jwks_uri"]))
        return self._keys

    async def _fetch(self, method: str, url: str, **kwargs: Any) -> dict[str, Any]:
        """A JSON object from the identity provider, or `SignInError` (never its secrets)."""
        began = time.monotonic()
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as http,
                http.request(method, url, **kwargs) as response,
            ):
                body = await response.json(content_type=None)
                status = response.status
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            took = time.monotonic() - began
            raise SignInError(
                f"the identity provider could not be read ({type(exc).__name__} after {took:.1f} s)"
            ) from None
        if status != 200 or not isinstance(body, dict):
            error = body.get("error") if isinstance(body, dict) else None
            why = f"the identity provider answered HTTP {status} ({error or 'no reason'})"
            raise SignInError(why)
        return body
