"""`POST /console/api/threads/{root}/rename` and `.../delete`: the sidebar's own controls.

Both sit behind the console guard like every other POST (same-origin JSON, the token of a
public console). Deleting only hides the conversation from the console: its items, its runs
and the call-log rows of its tool calls stay, since the audit trail is not the console's to
erase. Every page open is told at once (a `thread` event), so its sidebar follows.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from bot.surfaces.console.surface import APPROVALS_ROOT, ConsoleSurface, thread_json

MAX_TITLE_CHARS = 80


class ThreadControls:
    """Rename and delete, on the console's store; each change is broadcast to the pages."""

    def __init__(self, surface: ConsoleSurface) -> None:
        self.surface = surface

    async def rename(self, request: web.Request) -> web.Response:
        body = await _body(request)
        title = " ".join(str(body.get("title") or "").split())
        if not title:
            return _error(400, "a title is needed")
        if len(title) > MAX_TITLE_CHARS:
            return _error(400, f"a title is at most {MAX_TITLE_CHARS} characters")
        root = request.match_info["root"]
        if root == APPROVALS_ROOT:
            return _error(404, "no such conversation")
        thread = await self.surface.store.rename(root, title)
        if thread is None:
            return _error(404, "no such conversation")
        self.surface.thread_changed(thread)
        return web.json_response({"thread": thread_json(thread)})

    async def delete(self, request: web.Request) -> web.Response:
        await _body(request)  # a JSON POST like the others (the guard checked its origin)
        root = request.match_info["root"]
        if root == APPROVALS_ROOT:
            return _error(404, "no such conversation")
        thread = await self.surface.store.hide(root)
        if thread is None:
            return _error(404, "no such conversation")
        self.surface.thread_changed(thread)
        return web.json_response({"thread": thread_json(thread)})


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = json.loads((await request.read()).decode("utf-8") or "{}")
    except (ValueError, RecursionError):
        raise web.HTTPBadRequest(text="the body is not valid UTF-8 JSON") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="the body must be a JSON object")
    return body


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)
