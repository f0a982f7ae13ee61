"""Rate limits by key on aiolimiter's leaky bucket: the tool-call guards (a conversation, a
user, the whole process) refuse past them; Feishu's sender waits for its slot (one message).

One `aiolimiter.AsyncLimiter` per key, made on first use. A bucket that has drained completely
remembers nothing a new one would not, so buckets are dropped once drained and unused (checked
every few hundred uses): memory follows the keys active in the last period, not every key
ever seen.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiolimiter import AsyncLimiter

PRUNE_EVERY = 256


@dataclass(frozen=True)
class ToolRateLimits:
    """Calls of one tool allowed per minute: in one conversation, by one user, in the process.

    Scoped so that many conversations at once do not starve each other: a runaway loop hits
    its conversation's limit, a user's many threads hit theirs, and the process-wide ceiling
    (sized for a team) protects the target system.
    """

    per_conversation: int = 60
    per_user: int = 120
    total: int = 1200


class KeyedLimiter:
    """At most `max_rate` uses per `period_s` for each key (a burst of `max_rate` allowed)."""

    def __init__(self, max_rate: float, period_s: float = 60.0) -> None:
        self.max_rate = max_rate
        self.period_s = period_s
        self._buckets: dict[str, AsyncLimiter] = {}
        self._waiting: dict[str, int] = {}  # keys with an `acquire` in progress: never dropped
        self._uses = 0

    def __len__(self) -> int:
        return len(self._buckets)

    def has_capacity(self, key: str) -> bool:
        bucket = self._buckets.get(key)
        return bucket is None or bucket.has_capacity()

    async def take(self, key: str) -> bool:
        """Use one unit of `key`'s budget now if there is one; False (nothing used) if not.
        Never waits: with capacity there, `acquire()` returns without suspending."""
        bucket = self._bucket(key)
        if not bucket.has_capacity():
            return False
        await bucket.acquire()
        self._used()
        return True

    async def acquire(self, key: str) -> None:
        """Use one unit of `key`'s budget, waiting (in arrival order) until there is one."""
        bucket = self._bucket(key)
        self._waiting[key] = self._waiting.get(key, 0) + 1
        try:
            await bucket.acquire()
        finally:
            self._waiting[key] -= 1
            if not self._waiting[key]:
                del self._waiting[key]
        self._used()

    def _bucket(self, key: str) -> AsyncLimiter:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = AsyncLimiter(self.max_rate, self.period_s)
        return bucket

    def _used(self) -> None:
        self._uses += 1
        if self._uses % PRUNE_EVERY == 0:
            self._prune()

    def _prune(self) -> None:
        drained = [
            k
            for k, b in self._buckets.items()
            if k not in self._waiting and b.has_capacity(self.max_rate)
        ]
        for key in drained:
            del self._buckets[key]
