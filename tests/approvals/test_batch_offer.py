"""When is Approve all offered on a batch card? Only when somebody could approve every waiting
call: the calls' approvers (anyone, when none are named) meet in someone who is not a
requester under four-eyes. Pure: the rows as the broker reads them, and the Slack card."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.approvals.authority import Approvers
from bot.approvals.batches import approve_all_offered, batch_view
from bot.statuses import ApprovalStatus
from bot.storage.models import Approval
from bot.surfaces.slack.batch_card import APPROVE_ALL_ACTION, REJECT_ALL_ACTION, render_card

GROUPS = {"leads": ["U0LEAD", "U0LEAD2"]}


def people(row: Approval) -> Approvers:
    """Every row's workspace has these groups and no approvers list of its own."""
    return Approvers(GROUPS)


def row(name: str, approvers: list[str], *, four_eyes: bool = False, **extra: object) -> Approval:
    now = datetime.now(UTC)
    return Approval(
        id=f"{name:0<32}"[:32], run_id="r", conversation_id=1, tool_call_id=name,
        tool_name="ops__restart", arguments={"name": name}, fingerprint=name, batch_id="r:1",
        approvers=approvers, requester="U0DEV", requesters=["U0DEV"],
        allow_self_approval=not four_eyes, created_at=now, expires_at=now + timedelta(hours=1),
        **extra,
    )  # fmt: skip


def test_offered_when_the_approvers_meet() -> None:
    assert approve_all_offered([row("a", ["U0LEAD"]), row("b", ["leads"])], people)
    assert approve_all_offered([row("a", []), row("b", [])], people)  # anyone may
    assert approve_all_offered([row("a", []), row("b", ["U0LEAD2"])], people)


def test_not_offered_when_nobody_may_approve_every_call() -> None:
    assert not approve_all_offered([row("a", ["U0LEAD"]), row("b", ["U0OTHER"])], people)
    # four-eyes: the only common approver asked for the calls
    assert not approve_all_offered(
        [row("a", ["U0DEV", "U0LEAD"], four_eyes=True), row("b", ["U0DEV"])], people
    )


def test_decided_calls_do_not_count_and_the_card_hides_the_button() -> None:
    rows = [row("a", ["U0LEAD"]), row("b", ["U0OTHER"]),
            row("c", ["U0OTHER"], status=ApprovalStatus.APPROVED)]  # fmt: skip
    view = batch_view([(r, 0) for r in rows], people)
    assert not view.approve_all_offered
    actions = [e["action_id"] for b in render_card(view).blocks if b.get("type") == "actions"
               for e in b["elements"]]  # fmt: skip
    assert APPROVE_ALL_ACTION not in actions and REJECT_ALL_ACTION in actions
    assert approve_all_offered([rows[0], rows[2]], people)  # one call waiting: its approver


def test_the_workspace_approvers_narrow_the_offer() -> None:
    """A workspace listing only U0LEAD2: calls naming U0LEAD meet nobody who may decide them
    there; calls naming nobody are decided by U0LEAD2 alone, who may not decide one naming
    U0DEV."""

    def narrowed(row: Approval) -> Approvers:
        return Approvers(GROUPS, ("U0LEAD2",))

    assert not approve_all_offered([row("a", ["U0LEAD"]), row("b", ["leads"])], narrowed)
    assert approve_all_offered([row("a", ["leads"]), row("b", [])], narrowed)
    assert not approve_all_offered([row("a", ["U0DEV"]), row("b", [])], narrowed)
