"""A request that starts no run: the process is full, or its author has as many runs as one
person may. Either way the thread is told why and what to do, and nothing else changes.

The refused message is not kept as the thread's history and its inbox row goes (it was
answered: with the refusal); asking again later starts normally. Other people's requests are
unaffected.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Literal

from bot.chat.ports import DispatchOutcome
from bot.chat.surface import Surface
from bot.chat.threads import InboundMessage
from bot.storage import queries as queries
from bot.storage.database import Database

log = logging.getLogger(__name__)

BUSY_NOTICE = (
    "I am busy with many other requests right now, so I did not start on this one. "
    "Please try again in a minute."
)


def runs_limit_notice(limit: int) -> str:
    """The per-person cap (`CHATOPS_MAX_ACTIVE_RUNS_PER_USER`), in words, with what to do."""
    runs = "request" if limit == 1 else "requests"
    return (
        f"you already have {limit} {runs} in progress (working or waiting for an approval), "
        "which is as many as one person may have at once, so I did not start on this one. "
        "Wait for one to finish, or press Stop on one you no longer need, then ask again."
    )


class Refusals:
    """Tells a thread that its request was not started (one per run manager)."""

    def __init__(self, db: Database, surfaces: Mapping[str, Surface]) -> None:
        """`surfaces`: the run manager's own (live) collection, by platform."""
        self._db = db
        self._surfaces = surfaces

    async def refuse(
        self,
        message: InboundMessage,
        inbox_id: int | None,
        notice: str,
        *,
        kind: Literal["busy", "limited"],
        mention: tuple[str, ...] = (),
    ) -> DispatchOutcome:
        """Drop the inbox row, say `notice` in the thread (naming `mention`), start nothing."""
        if inbox_id is not None:
            await self._db.run(queries.delete_inbox_event, inbox_id)
        surface = self._surfaces.get(message.thread.platform)
        if surface is not None:
            try:
                await surface.post_notice(message.thread, notice, mention=mention)
            except Exception:  # noqa: BLE001 - the refusal stands even if it cannot be told
                log.exception("could not tell %s why its request was not started", message.thread)
        return DispatchOutcome(kind)
