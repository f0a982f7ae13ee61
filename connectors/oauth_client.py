"""The OAuth 2.0 wire protocol a per-user connector speaks with its provider (RFC 6749, 7636,
7009): the authorize URL with a PKCE S256 challenge, the code and refresh_token grants, and
revocation. The client secret goes in the form body; no token or secret reaches an error
message (the provider's `error` code does, its free text does not).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import aiohttp
from yarl import URL

from bot.clock import utcnow
from connectors.manifest_auth import OAuth2Auth
from connectors.oauth_vault import CredentialError, TokenSet

TIMEOUT = aiohttp.ClientTimeout(total=15)


def pkce_pair() -> tuple[str, str]:
    """(verifier, S256 challenge): 43 url-safe characters of 32 random bytes, and its hash."""
    verifier = secrets.token_urlsafe(32)
    return verifier, pkce_challenge(verifier)


def pkce_challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def authorize_url(
    auth: OAuth2Auth, *, client_id: str, redirect_uri: str, state: str, challenge: str
) -> str:
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    if auth.scopes:
        query["scope"] = " ".join(auth.scopes)
    return str(URL(auth.authorize_url).update_query(query))


class OAuthClient:
    """Token requests for one provider, on the app's shared HTTP session."""

    def __init__(
        self, auth: OAuth2Auth, environ: Mapping[str, str], http: aiohttp.ClientSession
    ) -> None:
        self.auth = auth
        self._environ = environ
        self._http = http

    @property
    def client_id(self) -> str:
        return self._environ.get(self.auth.client_id_env, "")

    def _client_form(self) -> dict[str, str]:
        return {
            "client_id": self.client_id,
            "client_secret": self._environ.get(self.auth.client_secret_env, ""),
        }

    async def exchange(self, code: str, verifier: str, redirect_uri: str) -> TokenSet:
        """The authorization code grant, with the PKCE verifier."""
        form = {
            "grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
            "code_verifier": verifier, **self._client_form(),
        }  # fmt: skip
        return _tokens(await self._post(self.auth.token_url, form), refresh_token="")

    async def refresh(self, refresh_token: str) -> TokenSet:
        """The refresh_token grant; a provider that does not rotate keeps the old one."""
        form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
        answer = await self._post(self.auth.token_url, {**form, **self._client_form()})
        return _tokens(answer, refresh_token=refresh_token)

    async def revoke(self, token: str, hint: str) -> None:
        """RFC 7009 revocation at `revoke_url` (none declared: nothing to do)."""
        if self.auth.revoke_url:
            form = {"token": token, "token_type_hint": hint, **self._client_form()}
            await self._post(self.auth.revoke_url, form, want_json=False)

    async def _post(
        self, url: str, form: Mapping[str, str], *, want_json: bool = True
    ) -> dict[str, Any]:
        try:
            async with self._http.post(
                url, data=dict(form), headers={"Accept": "application/json"}, timeout=TIMEOUT
            ) as response:
                body: Any = None
                if want_json or response.status >= 400:
                    body = await response.json(content_type=None)
                if response.status >= 400 or (isinstance(body, dict) and "error" in body):
                    error = body.get("error") if isinstance(body, dict) else None
                    raise CredentialError(
                        f"the provider refused ({response.status}, {_code(error)})"
                    )
                if want_json and not isinstance(body, dict):
                    raise CredentialError("the provider's token answer is not a JSON object")
                return body or {}
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise CredentialError(
                f"the provider cannot be reached ({type(exc).__name__})"
            ) from None


def _code(error: object) -> str:
    """The provider's error code, if it is a short plain word (never free text)."""
    text = error if isinstance(error, str) else ""
    return text if text.replace("_", "").isalnum() and len(text) <= 40 else "error"


def _tokens(answer: Mapping[str, Any], *, refresh_token: str) -> TokenSet:
    access = answer.get("access_token")
    if not isinstance(access, str) or not access:
        raise CredentialError("the provider's answer has no access_token")
    expires_in = answer.get("expires_in")
    expires_at = None
    if isinstance(expires_in, int | float) and expires_in > 0:
        expires_at = utcnow() + timedelta(seconds=float(expires_in))
    refresh = answer.get("refresh_token")
    return TokenSet(access, refresh if isinstance(refresh, str) and refresh else refresh_token,
                    expires_at)  # fmt: skip
