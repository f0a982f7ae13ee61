"""Event ids seen lately: a bounded, thread-safe TTL cache, a cheap duplicate check before the
database's (the surfaces' platform retries, the run manager's dispatches)."""

from __future__ import annotations

import threading

from cachetools import TTLCache


class RecentEvents:
    """Ids seen in the last `ttl_s` seconds, at most `max_items` of them (a flood of new ids
    evicts the oldest): a cheap check before the database's, bounded in memory. Owned by the
    run manager and by each surface; thread-safe, as Feishu's SDK calls from worker threads.
    """

    def __init__(self, *, ttl_s: float, max_items: int = 50_000) -> None:
        self._ids: TTLCache[str, bool] = TTLCache(maxsize=max_items, ttl=ttl_s)
        self._lock = threading.Lock()

    def seen(self, event_id: str) -> bool:
        """True if `event_id` was seen within the TTL; otherwise remember it and say False."""
        if not event_id:
            return False
        with self._lock:
            if event_id in self._ids:
                return True
            self._ids[event_id] = True
            return False

    def has(self, key: str) -> bool:
        """True if `key` was remembered within the TTL (remembers nothing)."""
        with self._lock:
            return bool(key) and key in self._ids

    def forget(self, *keys: str) -> None:
        """Drop keys remembered for an event that could not be stored: the platform was not
        acknowledged and will deliver it again, and that delivery must be taken."""
        with self._lock:
            for key in keys:
                self._ids.pop(key, None)

    def add_if_new(self, *keys: str) -> bool:
        """Remember every (non-empty) key afresh; True only if none of them had been seen.
        Feishu may deliver one message under a new event id: both ids are remembered."""
        keys = tuple(k for k in keys if k)
        with self._lock:
            seen = any(k in self._ids for k in keys)
            for key in keys:
                self._ids[key] = True
        return not seen
