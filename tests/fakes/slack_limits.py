"""Slack's per-workspace Web API rate limits, as FakeSlack enforces them when asked
(`FakeSlack.enforce_limits`): each method's tier is a budget per workspace per minute, and
`chat.postMessage` is also held to about one message a second per channel. Slack's limits
are windows it does not publish exactly; a token bucket (the tier's rate, a burst of it) is
the usual model of them and what the bot's own `UpdateLimiter` paces itself to.

Tiers (api.slack.com/apis/rate-limits): Tier 1 1+/min, Tier 2 20+/min, Tier 3 50+/min,
Tier 4 100+/min; chat.update is Tier 3, chat.postMessage "special" (1 a second per channel,
short bursts allowed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

TIER_PER_MINUTE = {1: 1.0, 2: 20.0, 3: 50.0, 4: 100.0}
METHOD_TIERS = {
    "chat.update": 3,
    "chat.delete": 3,
    "chat.postEphemeral": 4,  # Slack's "special": generous; Tier 4 is close enough
    "chat.getPermalink": 4,
    "conversations.replies": 3,
    "conversations.open": 3,
    "users.info": 4,
    "views.open": 4,
    "views.publish": 4,
    "auth.test": 4,
    "chat.appendStream": 4,
    "assistant.threads.setStatus": 3,
}
PER_CHANNEL_PER_S = {"chat.postMessage": 1.0}
CHANNEL_BURST = 3.0  # Slack lets a short burst through before it answers 429


@dataclass
class _Bucket:
    rate_s: float  # tokens a second
    burst: float
    tokens: float
    at: float

    def take(self, now: float) -> float | None:
        """None if a call may go now (it takes a token), else the seconds until one may."""
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate_s)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return None
        return (1.0 - self.tokens) / self.rate_s


@dataclass
class TierLimits:
    """The budgets, per (workspace, method) and per (workspace, channel) for
    chat.postMessage; `scale` multiplies every rate (a reduced-scale bench keeps Slack's
    ratios at a shorter time)."""

    tiers: dict[str, int] = field(default_factory=lambda: dict(METHOD_TIERS))
    per_channel_per_s: dict[str, float] = field(default_factory=lambda: dict(PER_CHANNEL_PER_S))
    scale: float = 1.0
    # how many seconds of a tier's rate may go at once (Slack does not say; 60 s: a minute's
    # worth, the loosest reading; less holds the bot to a stricter window)
    burst_s: float = 60.0
    _buckets: dict[tuple[str, str, str], _Bucket] = field(default_factory=dict, repr=False)

    def take(self, method: str, where: tuple[str, str], now: float) -> float | None:
        """None if `method` may be called now by workspace `where[0]` (in channel
        `where[1]`), else the seconds to wait (what Retry-After says)."""
        team, channel = where
        if method in self.per_channel_per_s:
            rate = self.per_channel_per_s[method] * self.scale
            return self._bucket((team, method, channel), rate, CHANNEL_BURST, now).take(now)
        tier = self.tiers.get(method)
        if tier is None:
            return None
        per_minute = TIER_PER_MINUTE[tier] * self.scale
        burst = per_minute * self.burst_s / 60.0
        return self._bucket((team, method, ""), per_minute / 60.0, burst, now).take(now)

    def _bucket(
        self, key: tuple[str, str, str], rate_s: float, burst: float, now: float
    ) -> _Bucket:
        found = self._buckets.get(key)
        if found is None:
            found = self._buckets[key] = _Bucket(rate_s, max(1.0, burst), max(1.0, burst), now)
        return found
