"""Who is using the console: the identity every console request, approval and Stop carries.

- A local console (the default: this machine's browser only) has one user at a time, who
  names themselves in the "you are" box; nothing else could check it, and nobody else reaches
  the console.
- A public console never takes a name from the page. People sign in with OpenID Connect
  (`bot.surfaces.console.oidc`; the session is a sealed cookie, `bot.surfaces.console.sessions`),
  or an auth proxy in front names them in a header (`CHATOPS_CONSOLE_PROXY_USER_HEADER`),
  believed only from the proxies' own addresses (`CHATOPS_CONSOLE_TRUSTED_PROXIES`): the
  same header from anywhere else is refused. A public console with its token only has one
  shared identity (`TOKEN_USER`) that no approver list names by accident.

The identity is the id approver lists name: the ID token's `CHATOPS_CONSOLE_USER_CLAIM`
(e.g. email), or the proxy's header as sent.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from typing import Literal

from aiohttp import web

from bot.config import Settings
from bot.errors import StartupError
from bot.surfaces.console.oidc import OidcClient, OidcConfig, SignInError
from bot.surfaces.console.sessions import SessionCookies

log = logging.getLogger(__name__)

Mode = Literal["local", "oidc", "proxy", "token"]
USER_KEY = web.RequestKey("console_user", str)  # the request's user, set by the guard
TOKEN_USER = "console-token"  # everyone holding a public console's shared token
USER_CHARS = 128
SIGNIN_PATH = "/console/signin"
CALLBACK_PATH = "/console/signin/callback"
SIGNOUT_PATH = "/console/signout"
SIGNIN_TTL_S = 600  # a sign-in started and not finished within this is started again
NEEDS_SECRET = (
    "CHATOPS_CONSOLE_OIDC_ISSUER needs CHATOPS_CONSOLE_OIDC_CLIENT_ID, "
    "CHATOPS_CONSOLE_OIDC_CLIENT_SECRET, CHATOPS_CONSOLE_SESSION_SECRET (a long random "
    "string, the same in every process) and CHATOPS_CONSOLE_URL (the console's public "
    "address, as registered with the identity provider)"
)
NEEDS_PROXIES = (
    "CHATOPS_CONSOLE_PROXY_USER_HEADER needs CHATOPS_CONSOLE_TRUSTED_PROXIES: the addresses "
    "of the proxies allowed to name the user (anyone else could send the header)"
)


def sign_in_mode(settings: Settings) -> Mode:
    """How the console knows who its user is (`StartupError` for a half-configured way)."""
    if settings.chatops_console_oidc_issuer:
        if not (
            settings.chatops_console_oidc_client_id
            and settings.chatops_console_oidc_client_secret
            and settings.chatops_console_session_secret
            and settings.chatops_console_url
        ):
            raise StartupError(NEEDS_SECRET)
        return "oidc"
    if settings.chatops_console_proxy_user_header:
        if not settings.console_trusted_proxies:
            raise StartupError(NEEDS_PROXIES)
        return "proxy"
    return "token" if settings.chatops_console_public else "local"


class ConsoleIdentity:
    """Finds the user of a console request, and serves the OpenID Connect sign-in routes."""

    def __init__(self, settings: Settings) -> None:
        self.mode = sign_in_mode(settings)
        self._header = settings.chatops_console_proxy_user_header
        self._proxies = [_network(p) for p in settings.console_trusted_proxies]
        self._oidc: OidcClient | None = None
        self._sessions: SessionCookies | None = None
        self._pending: SessionCookies | None = None
        if self.mode == "oidc":
            secret = settings.chatops_console_session_secret
            client_secret = settings.chatops_console_oidc_client_secret
            assert secret is not None and client_secret is not None  # sign_in_mode checked
            base = settings.chatops_console_url.rstrip("/")
            secure = base.startswith("https://")
            self._oidc = OidcClient(
                OidcConfig(
                    issuer=settings.chatops_console_oidc_issuer,
                    client_id=settings.chatops_console_oidc_client_id,
                    client_secret=client_secret.get_secret_value(),
                    redirect_uri=base + CALLBACK_PATH,
                    user_claim=settings.chatops_console_user_claim,
                )
            )
            hours = settings.chatops_console_session_hours
            self._sessions = SessionCookies(
                secret.get_secret_value(), name="chatops_session",
                max_age_s=int(hours * 3600), secure=secure,
            )  # fmt: skip
            self._pending = SessionCookies(
                secret.get_secret_value(), name="chatops_signin",
                max_age_s=SIGNIN_TTL_S, secure=secure,
            )  # fmt: skip

    @property
    def verified(self) -> bool:
        """Whether the identity is established by the server (else the page names it)."""
        return self.mode != "local"

    def user(self, request: web.Request) -> str | None:
        """The request's user, or None when it has none (not signed in; a local console,
        whose page names its user). A user header from an untrusted address is refused."""
        if self.mode == "token":
            return TOKEN_USER
        if self.mode == "proxy":
            named = request.headers.get(self._header)
            if not self._from_proxy(request.remote):
                if named is not None:
                    log.warning("console: %s sent by %s, not a trusted proxy: refused",
                                self._header, request.remote)  # fmt: skip
                    refused = f"{self._header} is accepted from the auth proxy only"
                    raise web.HTTPForbidden(text=refused + " (CHATOPS_CONSOLE_TRUSTED_PROXIES)")
                return None
            return _clean(named)
        if self.mode == "oidc":
            assert self._sessions is not None
            session = self._sessions.open(request)
            return _clean(session.get("user")) if session else None
        return None

    def _from_proxy(self, remote: str | None) -> bool:
        try:
            address = ipaddress.ip_address((remote or "").split("%")[0])
        except ValueError:
            return False
        return any(address in network for network in self._proxies)

    # --- OpenID Connect routes ------------------------------------------------------------

    async def sign_in(self, request: web.Request) -> web.StreamResponse:
        """Off to the identity provider; what the way back must match goes in a cookie."""
        assert self._oidc is not None and self._pending is not None
        try:
            start = await self._oidc.start()
        except SignInError as exc:
            return _sign_in_failed(str(exc))
        response = web.Response(status=302, headers={"Location": start.url})
        self._pending.seal(
            response, {"state": start.state, "nonce": start.nonce, "verifier": start.verifier}
        )
        return response

    async def callback(self, request: web.Request) -> web.StreamResponse:
        """Back from the identity provider: the state must be this browser's own sign-in's,
        the code is exchanged (with the PKCE verifier), the ID token checked."""
        assert self._oidc is not None and self._pending is not None
        assert self._sessions is not None
        pending = self._pending.open(request)
        state = request.query.get("state", "")
        if pending is None or not hmac.compare_digest(
            state.encode(), str(pending.get("state", "")).encode()
        ):
            log.warning("console sign-in refused: its state is not this browser's sign-in")
            return _sign_in_failed("this sign-in was not started here, or took too long")
        if "error" in request.query:
            why = request.query.get("error_description") or request.query["error"]
            return _sign_in_failed(f"the identity provider refused: {why[:200]}")
        try:
            user = await self._oidc.finish(
                request.query.get("code", ""),
                nonce=str(pending.get("nonce", "")),
                verifier=str(pending.get("verifier", "")),
            )
        except SignInError as exc:
            log.warning("console sign-in refused: %s", exc)
            return _sign_in_failed(str(exc))
        log.info("console: %s signed in", user)
        response = web.Response(status=302, headers={"Location": "/"})
        self._pending.clear(response)
        self._sessions.seal(response, {"user": user})
        return response

    async def sign_out(self, request: web.Request) -> web.StreamResponse:
        assert self._sessions is not None
        response = web.json_response({"status": "signed out"})
        self._sessions.clear(response)
        return response


def _clean(value: object) -> str | None:
    text = str(value or "").strip()[:USER_CHARS]
    return text or None


def _network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    try:
        return ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        raise StartupError(
            f"CHATOPS_CONSOLE_TRUSTED_PROXIES: {text!r} is not an address or a network"
        ) from None


def _sign_in_failed(reason: str) -> web.Response:
    return web.Response(
        status=401, content_type="text/plain",
        text=f"Sign-in failed: {reason}.\nTry again: {SIGNIN_PATH}",
    )  # fmt: skip
