"""Webhook bodies -> alerts: the key that deduplicates them, firing or resolved, and what the
templates see.

- Alertmanager (webhook payload `version: "4"`): one alert per entry of `alerts`, keyed by its
  `fingerprint` and `startsAt` (the same alert firing again after it resolved is a new one).
- PagerDuty v3 (`{"event": {...}}`): `incident.triggered` fires and `incident.resolved`
  resolves, keyed by the incident's id; other event types are acknowledged and ignored.
- hmac: any JSON object; `id` (else the `X-Chatops-Delivery` header, else the body's SHA-256)
  is the key, `"status": "resolved"` resolves it.
Templates see `alert` (the Alertmanager alert, the PagerDuty incident, the hmac body) and
`payload` (the whole body); PagerDuty's also `event`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.triggers.auth import DeliveryRefused
from bot.triggers.schema import Source

DELIVERY_HEADER = "X-Chatops-Delivery"
MAX_KEY_CHARS = 200
PAGERDUTY_FIRING = "incident.triggered"
PAGERDUTY_RESOLVED = "incident.resolved"


@dataclass(frozen=True)
class Alert:
    """One alert of a delivery: `key` dedupes it, `summary` opens its thread by default."""

    key: str
    resolved: bool
    summary: str
    context: Mapping[str, Any] = field(default_factory=dict)


def parse_body(body: bytes) -> dict[str, Any]:
    """The JSON object of a body; `DeliveryRefused` (400) when it is not one."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise DeliveryRefused(400, f"body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise DeliveryRefused(400, "body is not a JSON object")
    return data


def alerts_of(
    source: Source, data: dict[str, Any], headers: Mapping[str, str], body: bytes
) -> list[Alert]:
    """The alerts of a verified delivery; `DeliveryRefused` (400) for a malformed one."""
    if source == "alertmanager":
        return _alertmanager(data)
    if source == "pagerduty":
        return _pagerduty(data)
    return [_generic(data, headers, body)]


def _alertmanager(data: dict[str, Any]) -> list[Alert]:
    if str(data.get("version")) != "4":
        raise DeliveryRefused(400, 'not an Alertmanager webhook payload (version "4")')
    alerts = data.get("alerts")
    if not isinstance(alerts, list) or not alerts:
        raise DeliveryRefused(400, "`alerts` is not a non-empty list")
    parsed = []
    for index, alert in enumerate(alerts):
        if not isinstance(alert, dict):
            raise DeliveryRefused(400, f"alerts[{index}] is not an object")
        fingerprint, status = alert.get("fingerprint"), alert.get("status")
        labels = alert.get("labels")
        if not isinstance(fingerprint, str) or not fingerprint:
            raise DeliveryRefused(400, f"alerts[{index}].fingerprint is missing")
        if status not in ("firing", "resolved"):
            raise DeliveryRefused(400, f"alerts[{index}].status is not firing or resolved")
        if not isinstance(labels, dict):
            raise DeliveryRefused(400, f"alerts[{index}].labels is not an object")
        annotations = alert.get("annotations") if isinstance(alert.get("annotations"), dict) else {}
        name = str(labels.get("alertname") or "alert")
        text = annotations.get("summary") or annotations.get("description") or ""
        where = f" on {labels['service']}" if labels.get("service") else ""
        summary = f"[{status.upper()}] {name}{where}" + (f": {text}" if text else "")
        if alert.get("generatorURL"):
            summary += f"\n{alert['generatorURL']}"
        key = f"{fingerprint}@{alert.get('startsAt') or ''}"[:MAX_KEY_CHARS]
        context = {"alert": alert, "payload": data}
        parsed.append(Alert(key, status == "resolved", summary, context))
    return parsed


def _pagerduty(data: dict[str, Any]) -> list[Alert]:
    event = data.get("event")
    if not isinstance(event, dict) or not isinstance(event.get("event_type"), str):
        raise DeliveryRefused(400, "not a PagerDuty v3 webhook payload (no event.event_type)")
    kind = event["event_type"]
    if kind not in (PAGERDUTY_FIRING, PAGERDUTY_RESOLVED):
        return []  # acknowledged, annotated, ...: nothing to open or close
    incident = event.get("data")
    if not isinstance(incident, dict) or not isinstance(incident.get("id"), str):
        raise DeliveryRefused(400, "event.data.id (the incident) is missing")
    title = incident.get("title") or "incident"
    number = f" #{incident['number']}" if incident.get("number") else ""
    urgency = f" ({incident['urgency']} urgency)" if incident.get("urgency") else ""
    summary = f"PagerDuty incident{number}: {title}{urgency}"
    if incident.get("html_url"):
        summary += f"\n{incident['html_url']}"
    context = {"alert": incident, "event": event, "payload": data}
    key = incident["id"][:MAX_KEY_CHARS]
    return [Alert(key, kind == PAGERDUTY_RESOLVED, summary, context)]


def _generic(data: dict[str, Any], headers: Mapping[str, str], body: bytes) -> Alert:
    key = data.get("id")
    if not isinstance(key, str | int) or isinstance(key, bool) or str(key) == "":
        key = headers.get(DELIVERY_HEADER, "").strip() or hashlib.sha256(body).hexdigest()
    summary = str(data.get("summary") or data.get("title") or "Webhook alert")
    context = {"alert": data, "payload": data}
    return Alert(str(key)[:MAX_KEY_CHARS], data.get("status") == "resolved", summary, context)
