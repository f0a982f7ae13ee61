"""The documents attached to console answers: kept in memory (the most recent ones), served at
`GET /console/api/files/{file_id}`.

A document comes from a tool (an HTML report may carry scripts), and the console's origin holds
the browser's token: it is served sandboxed (CSP `sandbox`: no script runs, no request leaves,
an origin of its own), never sniffed, never cached.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from typing import Any

from aiohttp import web

from bot.chat.views import AnswerFile

FILE_CSP = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:"
ROUTE = "/console/api/files/{file_id}"


class ConsoleFiles:
    """At most `max_items` documents, oldest dropped first."""

    def __init__(self, *, max_items: int = 500) -> None:
        self._files: OrderedDict[str, AnswerFile] = OrderedDict()
        self._max_items = max_items

    def keep(self, file: AnswerFile) -> dict[str, Any]:
        """Keep `file`; the link the answer item carries (name, type, size, url)."""
        file_id = uuid.uuid4().hex
        self._files[file_id] = file
        while len(self._files) > self._max_items:
            self._files.popitem(last=False)
        return {
            "name": file.name,
            "content_type": file.content_type,
            "size": len(file.data),
            "url": ROUTE.format(file_id=file_id),
        }

    async def serve(self, request: web.Request) -> web.Response:
        file = self._files.get(request.match_info["file_id"])
        if file is None:
            return web.json_response(
                {"error": "no such document (the console keeps the most recent ones)"}, status=404
            )
        return web.Response(
            body=file.data,
            content_type=file.content_type,
            charset="utf-8",
            headers={
                "Content-Security-Policy": FILE_CSP,
                "X-Content-Type-Options": "nosniff",
                "Content-Disposition": f'inline; filename="{file.name}"',
                "Cache-Control": "no-store",
            },
        )
