"""A circuit breaker per connector: an API that keeps failing is not called for a while.

Without it every run that touches a dead API waits out each call's timeout and retries, and the
model keeps trying. After `threshold` calls in a row that failed for the connector's own reasons
(a timeout, a dropped connection, an HTTP 5xx; never a 4xx or bad arguments, which are the
caller's), the breaker opens: calls fail at once with an observation that says why and when
calls resume. After `cooldown_s` one trial call goes through (half-open); its success closes the
breaker, its failure opens it for another cool-down. Counted per process, in memory: the
`Breakers` of one `ConnectorSet` (`/readyz` and `chatops manifests list --connect` show them).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.clock import Clock
from bot.config import Settings


class BreakerState(enum.StrEnum):
    CLOSED = "closed"  # calls go through
    OPEN = "open"  # calls fail fast until the cool-down ends
    HALF_OPEN = "half_open"  # one trial call is allowed through


@dataclass(frozen=True, kw_only=True)
class BreakerSettings:
    """`threshold` failures in a row open the breaker (0: never); `cooldown_s` it stays open."""

    threshold: int = 5
    cooldown_s: float = 60.0


class CircuitBreaker:
    """One connector's breaker: `admit()` before a call, `settle()` after it."""

    def __init__(self, connector: str, settings: BreakerSettings, clock: Clock) -> None:
        self.connector = connector
        self._settings = settings
        self._clock = clock
        self.state = BreakerState.CLOSED
        self.errors = 0  # calls in a row that failed for the connector's own reasons
        self.opened_at: datetime | None = None
        self.resumes_at: datetime | None = None
        self._trial = False  # a half-open trial call is in flight

    def admit(self) -> str | None:
        """None: make the call (and `settle` it). Else the observation for a call refused."""
        if self._settings.threshold == 0 or self.state is BreakerState.CLOSED:
            return None
        if self._trial:
            return self.refusal()
        if self.state is BreakerState.OPEN and self._clock.now() < self._resumes():
            return self.refusal()
        self.state = BreakerState.HALF_OPEN
        self._trial = True
        return None

    def settle(self, failed: bool | None) -> None:
        """A call admitted has ended: `failed` for the connector's own reasons, or not; None
        when it gave no verdict (cancelled, refused before sending): a trial may be retried."""
        trial, self._trial = self._trial, False
        if failed is None:
            return
        if not failed:
            self.state = BreakerState.CLOSED
            self.errors = 0
            self.opened_at = self.resumes_at = None
            return
        self.errors += 1
        threshold = self._settings.threshold
        if threshold and (trial or self.errors >= threshold):
            now = self._clock.now()
            if self.state is BreakerState.CLOSED:
                self.opened_at = now
            self.state = BreakerState.OPEN
            self.resumes_at = now + timedelta(seconds=self._settings.cooldown_s)

    def _resumes(self) -> datetime:
        return self.resumes_at or self._clock.now()

    def refusal(self) -> str:
        """What the model reads instead of a call's result while the breaker is open."""
        when = self._resumes().strftime("%H:%M:%S")
        if self.state is BreakerState.HALF_OPEN:
            return (
                f"connector {self.connector} is failing: {self.errors} errors in a row; "
                "a trial call is under way, try again shortly (not called)"
            )
        return (
            f"connector {self.connector} is failing: {self.errors} errors in a row; "
            f"calls resume after {when} UTC (not called)"
        )

    def as_json(self) -> dict[str, object]:
        """For `/readyz` and the CLI: the state, the count, since and until when."""
        return {
            "connector": self.connector,
            "state": self.state.value,
            "errors": self.errors,
            "since": self.opened_at.isoformat() if self.opened_at else None,
            "resumes_at": self.resumes_at.isoformat() if self.resumes_at else None,
        }


class Breakers:
    """The breakers of one connector set, made on first use, one per connector."""

    def __init__(self, settings: BreakerSettings | None = None, clock: Clock | None = None):
        self.settings = settings or BreakerSettings()
        self.clock = clock or Clock()
        self._by_connector: dict[str, CircuitBreaker] = {}

    def of(self, connector: str) -> CircuitBreaker:
        breaker = self._by_connector.get(connector)
        if breaker is None:
            breaker = CircuitBreaker(connector, self.settings, self.clock)
            self._by_connector[connector] = breaker
        return breaker

    def tripped(self) -> list[CircuitBreaker]:
        """The breakers not closed (open, or half-open with a trial to come or under way)."""
        return [b for b in self._by_connector.values() if b.state is not BreakerState.CLOSED]


def breakers_for(settings: Settings, clock: Clock | None = None) -> Breakers:
    """The breakers the settings ask for (`CHATOPS_BREAKER_THRESHOLD`, `..._COOLDOWN_S`)."""
    limits = BreakerSettings(
        threshold=settings.chatops_breaker_threshold,
        cooldown_s=settings.chatops_breaker_cooldown_s,
    )
    return Breakers(limits, clock)
