"""The status words stored on runs, approvals and call-log rows, each said once.

`StrEnum`s: a member is the very string stored in the database and shown to clients, so rows
written before these enums existed read unchanged and no migration is needed. They sit at the
bottom of `bot/` (no imports) so storage, services and the surfaces' view models share them.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """Where a run is: live (its task works on it, or waits for a human), `answering` (the
    answer is stored and being posted), or ended."""

    RUNNING = "running"
    WAITING_APPROVAL = "waiting_approval"
    ANSWERING = "answering"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


# a live run's task works on it or waits for a human; an unfinished run is live or answering
LIVE_RUN_STATES = (RunStatus.RUNNING, RunStatus.WAITING_APPROVAL)
UNFINISHED_RUN_STATES = (*LIVE_RUN_STATES, RunStatus.ANSWERING)


class ApprovalStatus(StrEnum):
    """An approval row: `pending` until it is decided, expires or its run is cancelled; the
    first conclusion wins. `changes_requested`: an approver did not let the call run and told
    the agent what to do instead (guidance, where a rejection says "do not retry")."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    CHANGES_REQUESTED = "changes_requested"
