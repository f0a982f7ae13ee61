"""Webhook bodies in the senders' published shapes, and the trigger files the tests use.

Alertmanager: the webhook payload of `webhook_config` (version "4"), as in the Prometheus
documentation (alerting/latest/configuration/#webhook_config). PagerDuty: a v3 webhook
`incident.triggered` / `incident.resolved` event (developer.pagerduty.com, "V3 Webhooks":
event envelope, incident data, `X-PagerDuty-Signature: v1=...`).
"""

from __future__ import annotations

import json
from typing import Any

from tests.slack.payloads import CHANNEL

AM_TOKEN = "am-token-for-tests-0123456789"
PD_SECRET = "pd-secret-for-tests-0123456789"
HMAC_SECRET = "hmac-secret-for-tests-0123456789"
FINGERPRINT = "c4e6f6d3a9b1e2f0"
STARTS_AT = "2026-12-04T07:00:00.000Z"


def alertmanager(status: str = "firing", *, service: str = "api") -> dict[str, Any]:
    labels = {
        "alertname": "HighErrorRate",
        "service": service,
        "severity": "critical",
        "instance": "api-1:9100",
    }
    annotations = {"summary": "5xx above 5% for 10 minutes", "runbook": "https://runbooks/api"}
    return {
        "version": "4",
        "groupKey": '{}:{alertname="HighErrorRate"}',
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "chatops",
        "groupLabels": {"alertname": "HighErrorRate"},
        "commonLabels": labels,
        "commonAnnotations": annotations,
        "externalURL": "http://alertmanager.example:9093",
        "alerts": [
            {
                "status": status,
                "labels": labels,
                "annotations": annotations,
                "startsAt": STARTS_AT,
                "endsAt": "2026-12-04T07:30:00.000Z"
                if status == "resolved"
                else "0001-01-01T00:00:00Z",
                "generatorURL": "http://prometheus.example:9090/graph?g0.expr=rate5xx",
                "fingerprint": FINGERPRINT,
            }
        ],
    }


def pagerduty(event_type: str = "incident.triggered", *, event_id: str = "01DEN5B4X1") -> dict:
    status = "resolved" if event_type == "incident.resolved" else "triggered"
    return {
        "event": {
            "id": event_id,
            "event_type": event_type,
            "resource_type": "incident",
            "occurred_at": "2026-12-04T07:10:00.000Z",
            "agent": {
                "html_url": "https://acme.pagerduty.com/users/PLH1HKV",
                "id": "PLH1HKV",
                "self": "https://api.pagerduty.com/users/PLH1HKV",
                "summary": "Tenex Engineer",
                "type": "user_reference",
            },
            "client": {"name": "PagerDuty"},
            "data": {
                "id": "PGR0VU2",
                "type": "incident",
                "self": "https://api.pagerduty.com/incidents/PGR0VU2",
                "html_url": "https://acme.pagerduty.com/incidents/PGR0VU2",
                "number": 2,
                "status": status,
                "incident_key": "d3640fbd41094207a1c11e58e46b1662",
                "created_at": "2026-12-04T07:10:00Z",
                "title": "api is returning 502s",
                "service": {
                    "html_url": "https://acme.pagerduty.com/services/PF9KMXH",
                    "id": "PF9KMXH",
                    "self": "https://api.pagerduty.com/services/PF9KMXH",
                    "summary": "api",
                    "type": "service_reference",
                },
                "assignees": [
                    {
                        "html_url": "https://acme.pagerduty.com/users/PTUXL6G",
                        "id": "PTUXL6G",
                        "self": "https://api.pagerduty.com/users/PTUXL6G",
                        "summary": "User 123",
                        "type": "user_reference",
                    }
                ],
                "escalation_policy": {
                    "html_url": "https://acme.pagerduty.com/escalation_policies/PUS0KTE",
                    "id": "PUS0KTE",
                    "self": "https://api.pagerduty.com/escalation_policies/PUS0KTE",
                    "summary": "Default",
                    "type": "escalation_policy_reference",
                },
                "teams": [],
                "priority": None,
                "urgency": "high",
                "conflicts": [],
                "resolve_reason": None,
            },
        }
    }


def body(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode()


ALERTMANAGER_TRIGGER = f"""\
name: alertmanager
source: alertmanager
secret_env: AM_WEBHOOK_TOKEN
where:
  platform: slack
  channel: {CHANNEL}
request: "restart {{{{ alert.labels.service }}}}: {{{{ alert.labels.alertname }}}} is firing"
connectors: [ops]
on_resolved: stop
"""

PAGERDUTY_TRIGGER = f"""\
name: pagerduty
source: pagerduty
secret_env: PD_WEBHOOK_SECRET
where:
  platform: slack
  channel: {CHANNEL}
request: >-
  restart {{{{ alert.service.summary }}}}: incident {{{{ alert.number }}}} {{{{ alert.title }}}}
requester: group:oncall
"""

HMAC_TRIGGER = f"""\
name: deploys
source: hmac
secret_env: DEPLOY_HOOK_SECRET
replay_window_s: 300
where:
  platform: slack
  channel: {CHANNEL}
request: "restart {{{{ alert.service }}}}"
"""
