"""The approval broker's value types: what a gate asks for and how an approval ended (hooks
import these without the broker's machinery; a click's decision is `bot.chat.decisions`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from bot.statuses import ApprovalStatus

MAX_GRANTEES = 20


@dataclass(frozen=True)
class ApprovalOutcome:
    """How an approval ended, as the waiting gate needs it."""

    approval_id: str
    status: ApprovalStatus  # never pending: how it ended
    decided_by: tuple[str, ...] = ()
    reason: str = ""
    thread_grant: bool = False
    # approved after an edit: the arguments approved (known secrets masked, as the card showed
    # them), the model's as the card showed them, and who edited
    arguments: dict[str, Any] | None = None
    model_arguments: dict[str, Any] | None = None
    edited_by: str = ""


@dataclass(frozen=True, kw_only=True)
class ApprovalRequest:
    """One tool call that needs a human; `arguments` are what the card shows (known secrets
    masked); `requesters` everyone whose messages the run had read when it made the call."""

    run_id: str
    conversation_id: int
    tool_call_id: str
    tool_name: str
    connector: str
    action: str
    arguments: dict
    fingerprint: str
    reason: str
    risk: str
    requester: str
    requesters: tuple[str, ...]
    approvers: tuple[str, ...]
    min_approvals: int
    allow_self_approval: bool
    timeout_s: float | None = None
    grant_fingerprint: str = ""  # empty: "approve for this thread" is not offered
    grant_ttl_s: float = 0.0
    grant_vary: tuple[str, ...] = ()
    policy_rule: str = ""  # the manifest rule that set this policy ('' = the static one)
    policy_reason: str = ""  # the rule's reason, shown on the card
    on_timeout: str = "expire"  # expire | reject
    route: str = "thread"  # thread | channel:<id> | dm
    escalate: tuple[dict, ...] = ()  # the ladder: {after_s, approvers, notify} each
    batch_id: str = ""  # the calls of one model response share one card ('' = alone)

    def row_values(self) -> dict[str, Any]:
        """The approval row's columns this request fills (lists where the row keeps JSON)."""
        values: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            values[field.name] = list(value) if isinstance(value, tuple) else value
        del values["timeout_s"]  # the row keeps the deadline it gives
        values["min_approvals"] = max(1, self.min_approvals)
        return values
