"""The OAuth routes on the bot's server: `GET /oauth/<connector>/start?link=...` (a person's
connect link) and `GET /oauth/<connector>/callback` (where the provider sends the browser back).

Each answers with a small HTML page a person can read; a refused link or callback says why and
stores nothing (`OAuthService`). The browser secret travels in an HttpOnly cookie scoped to the
connector's OAuth path, SameSite=Lax so the provider's top-level redirect brings it back.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable

from aiohttp import web

from connectors.oauth_service import LinkRefused, OAuthService
from connectors.oauth_vault import CredentialError

log = logging.getLogger(__name__)

COOKIE = "chatops_oauth"
NO_OAUTH = "No connector here acts on behalf of people (none uses auth type oauth2)."


def _page(title: str, text: str, *, status: int = 200) -> web.Response:
    title, text = html.escape(title), html.escape(text)
    body = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
        f"<body><h1>{title}</h1><p>{text}</p></body></html>"
    )
    return web.Response(
        status=status,
        text=body,
        content_type="text/html",
        headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
    )


def setup_oauth_routes(app: web.Application, service: Callable[[], OAuthService | None]) -> None:
    """Add the two routes; `service`: the runtime's (None when no connector uses OAuth)."""

    async def start(request: web.Request) -> web.StreamResponse:
        oauth = service()
        if oauth is None:
            return _page("Not available", NO_OAUTH, status=404)
        connector = request.match_info["connector"]
        try:
            flow = await oauth.start(connector, request.query.get("link", ""))
        except LinkRefused as exc:
            return _page("Link not valid", str(exc), status=400)
        response = web.HTTPFound(flow.redirect, headers={"Cache-Control": "no-store"})
        response.set_cookie(
            COOKIE, flow.browser_secret, path=f"/oauth/{connector}/", httponly=True,
            samesite="Lax", secure=request.secure, max_age=3600,
        )  # fmt: skip
        raise response

    async def callback(request: web.Request) -> web.StreamResponse:
        oauth = service()
        if oauth is None:
            return _page("Not available", NO_OAUTH, status=404)
        connector = request.match_info["connector"]
        if "error" in request.query:
            return _page("Not connected", "The sign-in was cancelled or refused.", status=400)
        try:
            person = await oauth.finish(
                connector,
                request.query.get("state", ""),
                request.query.get("code", ""),
                request.cookies.get(COOKIE, ""),
            )
        except (LinkRefused, CredentialError) as exc:
            log.warning("OAuth callback for %s refused: %s", connector, exc)
            return _page("Not connected", str(exc), status=400)
        response = _page(
            "Connected",
            f"Your {connector} account is connected for {person.user_id}. You can close this "
            "tab and go back to the chat.",
        )
        response.del_cookie(COOKIE, path=f"/oauth/{connector}/")
        return response

    app.router.add_get("/oauth/{connector}/start", start)
    app.router.add_get("/oauth/{connector}/callback", callback)
