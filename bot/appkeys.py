"""The typed `web.AppKey`s that modules below the server read from the aiohttp app.

They live here, not in `bot/server.py`, so that a surface can read the app's shared client
session without importing the server (nothing imports the server or the CLI; see
`[tool.importlinter]` in pyproject.toml). Keys only the server reads stay in the server.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web

from bot.config import Settings

HTTP_KEY = web.AppKey("http_session", aiohttp.ClientSession)  # connectors', the model probe's
# the chat platforms' own: apart from the connectors' pool, which APIs that stall can fill
PLATFORM_HTTP_KEY = web.AppKey("platform_http_session", aiohttp.ClientSession)
SETTINGS_KEY = web.AppKey("settings", Settings)
