"""Keeping the dedupe table small: `processed_event` rows past the platforms' retry window go.

Slack retries an event for about five minutes, Feishu re-pushes one for about seven hours
(after 15 s, 5 min, 1 h and 6 h): a row older than a day can no longer stop a duplicate, so it
is deleted. Pruning runs on the dispatch path, every `every` dispatches (the first one too),
and deletes at most `batch` rows at a time, so it never holds the table for long.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from bot.clock import utcnow
from bot.storage import queries as queries
from bot.storage.database import Database

log = logging.getLogger(__name__)

DEDUPE_RETENTION = timedelta(hours=24)


class DedupePruner:
    """Counts dispatches and prunes old `processed_event` rows every so many."""

    def __init__(self, db: Database, *, every: int = 200, batch: int = 5_000) -> None:
        self._db = db
        self._every = every
        self._batch = batch
        self._count = 0

    async def after_dispatch(self) -> int:
        """Prune when due; the number of rows deleted (0 when not due)."""
        due = self._count % self._every == 0
        self._count += 1
        if not due:
            return 0
        before = utcnow() - DEDUPE_RETENTION
        pruned = await self._db.run(queries.prune_processed_events, before, self._batch)
        if pruned:
            log.info("pruned %d processed events older than %s", pruned, before.isoformat())
        return pruned
