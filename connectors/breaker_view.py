"""What `chatops manifests list --connect` says of the running bot's circuit breakers.

Breakers count failures in the bot's own process, in memory, so the CLI (another process) asks
the bot: `GET {bot}/readyz`, whose `connectors_failing` lists the connectors whose breaker is
open or half-open. A bot that does not answer is a note, not an error: the listing is still
right, only the breakers are unknown.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import datetime
from typing import Any, TextIO

READYZ_TIMEOUT_S = 3.0


def print_failing(bot: str, out: TextIO, err: TextIO) -> None:
    """One line per failing connector on `out`; a note on `err` when the bot cannot say."""
    url = f"{bot.rstrip('/')}/readyz"
    try:
        failing = _read_failing(url)
    except (OSError, ValueError) as exc:  # URLError is an OSError; bad JSON a ValueError
        reason = getattr(exc, "reason", None) or exc
        print(f"note: no bot answered at {url} ({reason}): circuit breakers unknown", file=err)
        return
    if not failing:
        print(f"circuit breakers: every connector closed (bot at {bot})", file=out)
    for entry in failing:
        print(describe(entry), file=out)


def describe(entry: dict[str, Any]) -> str:
    """`readyz`'s entry as the line the CLI prints."""
    name, errors = entry.get("connector"), entry.get("errors")
    line = f"{name}\tfailing: {errors} errors in a row"
    resumes = entry.get("resumes_at")
    if entry.get("state") == "half_open":
        return f"{line}; a trial call is under way"
    if resumes:
        line += f"; calls resume after {datetime.fromisoformat(resumes):%H:%M:%S} UTC"
    return line


def _read_failing(url: str) -> list[dict[str, Any]]:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=READYZ_TIMEOUT_S) as response:  # noqa: S310
            body = response.read()
    except urllib.error.HTTPError as exc:  # 503 while starting or with the database away
        body = exc.read()
    data = json.loads(body)
    failing = data.get("connectors_failing", []) if isinstance(data, dict) else []
    return [entry for entry in failing if isinstance(entry, dict)]
