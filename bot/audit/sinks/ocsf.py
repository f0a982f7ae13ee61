"""One outbox row as an OCSF event: class API Activity (6003), category Application Activity.

A SIEM that maps OCSF maps these without a custom parser: the standard attributes carry who
(`actor.user`), what (`api.operation`, `api.service`), from where (`src_endpoint`: the chat
platform and channel), to where (`dst_endpoint`: the connector), when (`time`, epoch ms), how it
ended (`status_id`, `status`, `status_detail`) and how long it took (`duration`, ms). What OCSF
has no attribute for (fingerprint, rule, approvers, decision, outcome) is under `unmapped`,
the place OCSF gives such fields. docs/audit.md has the table.

Built from the row's snapshot (`bot.storage.outbox`), which never holds the call's arguments
or the tool's output: what goes out is what was redacted into the call log, less those.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.storage.models import AuditOutbox

OCSF_VERSION = "1.3.0"
CATEGORY_APPLICATION = 6
CLASS_API_ACTIVITY = 6003
# activity_id: 1 Create, 2 Read, 3 Update, 4 Delete, 99 Other
ACTIVITY_READ, ACTIVITY_UPDATE, ACTIVITY_OTHER = 2, 3, 99
# status_id: 0 Unknown, 1 Success, 2 Failure
STATUS_UNKNOWN, STATUS_SUCCESS, STATUS_FAILURE = 0, 1, 2

# a call's result_status -> (status_id, status)
_CALL_STATUS: dict[str, tuple[int, str]] = {
    "ok": (STATUS_SUCCESS, "Success"),
    "error": (STATUS_FAILURE, "Failure"),
    "blocked": (STATUS_FAILURE, "Failure"),
    "rejected": (STATUS_FAILURE, "Failure"),
    "expired": (STATUS_FAILURE, "Failure"),
    "lost": (STATUS_FAILURE, "Failure"),
    "started": (STATUS_UNKNOWN, "Unknown"),
    "unknown": (STATUS_UNKNOWN, "Unknown"),
}
# an approval's status -> (status_id, status)
_APPROVAL_STATUS: dict[str, tuple[int, str]] = {
    "pending": (STATUS_UNKNOWN, "Unknown"),
    "approved": (STATUS_SUCCESS, "Success"),
}
_OUTCOME_WORDS = {"started": "in progress", "unknown": "outcome unknown"}


def _epoch_ms(iso: str | None) -> int | None:
    return round(datetime.fromisoformat(iso).timestamp() * 1000) if iso else None


def _base(
    row: AuditOutbox, *, activity_id: int, activity_name: str, at: str | None
) -> dict[str, Any]:
    snap = row.snapshot
    return {
        "category_uid": CATEGORY_APPLICATION,
        "category_name": "Application Activity",
        "class_uid": CLASS_API_ACTIVITY,
        "class_name": "API Activity",
        "activity_id": activity_id,
        "activity_name": activity_name,
        "type_uid": CLASS_API_ACTIVITY * 100 + activity_id,
        "severity_id": 1,
        "severity": "Informational",
        "time": _epoch_ms(at),
        "metadata": {
            "version": OCSF_VERSION,
            "uid": row.event_uid,
            "correlation_uid": snap.get("run_id", ""),
            "log_name": "chatops.audit",
            "product": {"name": "chatops", "vendor_name": "chatops"},
        },
        "src_endpoint": {"svc_name": snap.get("platform", ""), "name": snap.get("channel", "")},
        "dst_endpoint": {"svc_name": snap.get("connector", "")},
    }


def _user(uid: str) -> dict[str, Any]:
    return {"uid": uid, "name": uid}


def call_event(row: AuditOutbox) -> dict[str, Any]:
    """A tool call attempt: started, then its outcome (or, later, `outcome unknown`)."""
    snap = row.snapshot
    outcome = str(snap.get("result_status", ""))
    status_id, status = _CALL_STATUS.get(outcome, (STATUS_FAILURE, "Failure"))
    event = _base(
        row,
        activity_id=ACTIVITY_UPDATE if snap.get("mutating") else ACTIVITY_READ,
        activity_name="Update" if snap.get("mutating") else "Read",
        at=snap.get("at"),
    )
    event.update(
        {
            "actor": {"user": _user(snap.get("requester", "")), "app_name": "chatops"},
            "api": {
                "operation": snap.get("tool_name", ""),
                "service": {"name": snap.get("connector", "")},
                "request": {"uid": snap.get("tool_call_id", "")},
            },
            "status_id": status_id,
            "status": status,
            "status_detail": snap.get("error") or _OUTCOME_WORDS.get(outcome, outcome),
            "duration": round(float(snap.get("duration_ms") or 0.0)),
            "start_time": _epoch_ms(snap.get("started_at")),
            "unmapped": {
                "event_kind": "tool_call",
                "call_id": snap.get("call_id"),
                "action": snap.get("action", ""),
                "mutating": bool(snap.get("mutating")),
                "fingerprint": snap.get("fingerprint", ""),
                "policy_rule": snap.get("policy_rule", ""),
                "approval_id": snap.get("approval_id"),
                "decision": snap.get("approval_status", ""),
                "grant_id": snap.get("grant_id"),
                "approvers": list(snap.get("approvers") or []),
                "edited_by": snap.get("edited_by", ""),
                "requesters": list(snap.get("requesters") or []),
                "latency_ms": snap.get("duration_ms"),
                "outcome": _OUTCOME_WORDS.get(outcome, outcome),
            },
        }
    )
    return event


def approval_event(row: AuditOutbox) -> dict[str, Any]:
    """An approval: requested, perhaps edited by an approver (the call's arguments changed:
    a new fingerprint, the model's own in `model_fingerprint`), then how it ended (approved,
    rejected, expired, cancelled, changes requested)."""
    snap = row.snapshot
    decision = str(snap.get("status", ""))
    status_id, status = _APPROVAL_STATUS.get(decision, (STATUS_FAILURE, "Failure"))
    edited = bool(snap.get("edited"))
    requested = decision == "pending" and not edited
    decided_by = list(snap.get("decided_by") or [])
    if edited:
        name, actor = "Approval Edited", snap.get("edited_by", "")
    elif requested:
        name, actor = "Approval Requested", snap.get("requester", "")
    else:
        name, actor = "Approval Decided", decided_by[0] if decided_by else ""
    event = _base(row, activity_id=ACTIVITY_OTHER, activity_name=name, at=snap.get("at"))
    event.update(
        {
            "actor": {"user": _user(actor), "app_name": "chatops"},
            "api": {
                "operation": snap.get("tool_name", ""),
                "service": {"name": snap.get("connector", "")},
                "request": {"uid": snap.get("tool_call_id", "")},
            },
            "status_id": status_id,
            "status": status,
            "status_detail": decision
            + (f": {snap['decision_reason']}" if snap.get("decision_reason") else ""),
            "duration": round(snap["waited_ms"]) if snap.get("waited_ms") is not None else None,
            "start_time": _epoch_ms(snap.get("created_at")),
            "unmapped": {
                "event_kind": "approval",
                "approval_id": snap.get("approval_id", ""),
                "action": snap.get("action", ""),
                "fingerprint": snap.get("fingerprint", ""),
                "policy_rule": snap.get("policy_rule", ""),
                "risk": snap.get("risk", ""),
                "decision": decision,
                "approvers": decided_by,
                "eligible_approvers": list(snap.get("approvers") or []),
                "min_approvals": snap.get("min_approvals"),
                "requester": snap.get("requester", ""),
                "requesters": list(snap.get("requesters") or []),
                "thread_grant": bool(snap.get("thread_grant")),
                "latency_ms": snap.get("waited_ms"),
                "expires_at": snap.get("expires_at"),
                "edited_by": snap.get("edited_by", ""),
                "model_fingerprint": snap.get("model_fingerprint", ""),
                "outcome": "edited" if edited else decision,
            },
        }
    )
    return event


def ocsf_event(row: AuditOutbox) -> dict[str, Any]:
    """The event an outbox row stands for."""
    return approval_event(row) if row.kind == "approval" else call_event(row)
