"""Is a webhook delivery from who the trigger says? Checked over the raw body, before parsing.

Three shapes, each the sender's own:
- `alertmanager`: Prometheus Alertmanager's `http_config.authorization` (`Authorization: Bearer
  <token>`); Alertmanager does not sign bodies, so a replay is caught by the alert dedupe.
- `pagerduty`: PagerDuty v3 webhooks' `X-PagerDuty-Signature: v1=<hex>` (HMAC-SHA256 of the body
  with the subscription's secret; several comma-separated while a secret is rotated).
- `hmac`: `X-Chatops-Timestamp: <unix seconds>` and `X-Chatops-Signature: v1=<hex>`, the
  HMAC-SHA256 of `<timestamp>.<body>`; a timestamp outside the replay window is refused.
Every comparison is constant-time; no secret and no presented credential is ever in a reason.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from bot.errors import TriggerError
from bot.triggers.schema import Source

TIMESTAMP_HEADER = "X-Chatops-Timestamp"
SIGNATURE_HEADER = "X-Chatops-Signature"
PAGERDUTY_HEADER = "X-PagerDuty-Signature"


class DeliveryRefused(TriggerError):
    """A delivery answered with a 4xx: `status` and the reason the sender is told."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def sign_hmac(secret: str, timestamp: int, body: bytes) -> str:
    """The `X-Chatops-Signature` value of a body sent at `timestamp` (senders and tests)."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"v1={digest.hexdigest()}"


def sign_pagerduty(secret: str, body: bytes) -> str:
    """The `X-PagerDuty-Signature` value PagerDuty sends for `body`."""
    return f"v1={hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()}"


def verify(
    source: Source,
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: float,
    replay_window_s: int,
) -> None:
    """Return when the delivery is authentic; else `DeliveryRefused` (401) saying why."""
    if source == "alertmanager":
        scheme, _, token = headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not _same(token.strip(), secret):
            raise DeliveryRefused(401, "missing or wrong bearer token")
        return
    if source == "pagerduty":
        expected = sign_pagerduty(secret, body)
        presented = [s.strip() for s in headers.get(PAGERDUTY_HEADER, "").split(",")]
        if not any(_same(s, expected) for s in presented):
            raise DeliveryRefused(401, f"missing or wrong {PAGERDUTY_HEADER}")
        return
    stamp = headers.get(TIMESTAMP_HEADER, "").strip()
    if not stamp.isdigit():
        raise DeliveryRefused(401, f"missing or malformed {TIMESTAMP_HEADER} (unix seconds)")
    if abs(now - int(stamp)) > replay_window_s:
        raise DeliveryRefused(
            401, f"{TIMESTAMP_HEADER} is outside the {replay_window_s} s replay window"
        )
    if not _same(headers.get(SIGNATURE_HEADER, "").strip(), sign_hmac(secret, int(stamp), body)):
        raise DeliveryRefused(401, f"missing or wrong {SIGNATURE_HEADER}")


def _same(presented: str, expected: str) -> bool:
    return hmac.compare_digest(presented.encode("utf-8", "replace"), expected.encode())
