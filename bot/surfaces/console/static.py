"""The console page and its files, served by the app from `static/` (package data: an installed
wheel has them). No build step and no CDN: plain HTML, CSS and JavaScript modules.

The page is the same HTML at every address it routes itself (`/`, `/c/<thread>`, `/approvals`,
`/calls`), so a reload or a shared link opens the same view. Its Content-Security-Policy
allows only this origin's own scripts and styles and no inline script at all: even HTML that
got past the answer's sanitiser could not run. The files are read once, when the app is built.

An address nobody routes, asked for by a browser (a GET that accepts HTML), gets the console's
own "Nothing here" page with status 404 (`not_found`, an app middleware) instead of aiohttp's
bare text; API and webhook clients keep the plain 404.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
API_PREFIX = "/console/api/"
STATIC_DIR = Path(__file__).resolve().parent / "static"
PAGE_ROUTES = ("/", "/c/{root}", "/approvals", "/calls")
CONTENT_TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".ico": "image/x-icon",
    ".svg": "image/svg+xml",
}
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


class StaticFiles:
    """The files of `static/` by name, kept in memory (a few tens of kilobytes)."""

    def __init__(self, directory: Path = STATIC_DIR) -> None:
        self._files = {
            path.name: (path.read_bytes(), CONTENT_TYPES[path.suffix])
            for path in sorted(directory.iterdir())
            if path.is_file() and path.suffix in CONTENT_TYPES
        }

    @property
    def names(self) -> list[str]:
        return list(self._files)

    async def page(self, request: web.Request) -> web.Response:
        return self._html("index.html")

    @web.middleware
    async def not_found(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPNotFound:
            wants_page = "text/html" in request.headers.get("Accept", "")
            if request.method not in ("GET", "HEAD") or request.path.startswith(API_PREFIX):
                raise
            if not wants_page:
                raise
            return self._html("404.html", status=404)

    def _html(self, name: str, *, status: int = 200) -> web.Response:
        body, _ = self._files[name]
        return web.Response(
            body=body,
            status=status,
            content_type="text/html",
            charset="utf-8",
            headers={
                "Cache-Control": "no-store",
                "X-Frame-Options": "DENY",
                "Content-Security-Policy": PAGE_CSP,
                "Referrer-Policy": "no-referrer",
                "X-Content-Type-Options": "nosniff",
            },
        )

    async def file(self, request: web.Request) -> web.Response:
        found = self._files.get(request.match_info["name"])
        if found is None or request.match_info["name"] in ("index.html", "404.html"):
            raise web.HTTPNotFound(text="no such console file")
        body, content_type = found
        return web.Response(
            body=body,
            content_type=content_type,
            charset="utf-8" if content_type.startswith("text/") else None,
            headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
        )

    async def favicon(self, request: web.Request) -> web.Response:
        body, content_type = self._files["favicon.ico"]
        return web.Response(
            body=body, content_type=content_type, headers={"Cache-Control": "max-age=86400"}
        )
