"""Approvals end to end: dispatch() -> real engine on FakeOpenAI -> gate -> broker -> surface."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import update
from sqlmodel import Session

from bot.approvals.schema import ApprovalPolicy
from bot.chat.threads import MessageRef
from bot.chat.views import ApprovalCardView
from bot.clock import utcnow
from bot.engine.hooks import HookResult, PreToolUseContext
from bot.storage.models import Approval, ApprovalDecision
from tests.fakes.openai_server import answer, tool_call, tool_calls
from tests.fakes.recording import RecordingSurface
from tests.runs.conftest import SECRET, Harness, all_text


async def test_mention_status_card_approve_runs_once_and_answers(harness: Harness) -> None:
    harness.fake.script(
        tool_call("ops__restart", {"service": "api"}, id="call_1"),
        answer("Restarted api."),
        answer("The api service was restarted."),
    )
    app = await harness.app()
    outcome = await app.manager.dispatch(harness.message("restart api please"))
    assert outcome.kind == "started"

    card = await app.surface.wait_for_card()
    assert card.tool_name == "ops__restart" and card.state == "pending"
    assert card.requester == "U_DEV" and card.risk == "high"
    assert '"service": "api"' in card.arguments
    assert harness.tools["ops__restart"].calls == []
    assert [r.status for r in harness.runs()] == ["waiting_approval"]
    await app.surface.wait_for(
        lambda: any(
            c.payload.state == "waiting_approval"
            and [s.state for s in c.payload.steps] == ["waiting_approval"]
            for c in app.surface.of("update_status")
        )
    )

    result = await app.broker.decide(card.approval_id, "U_LEAD", "approve", platform="test")
    assert result.status == "decided"
    assert result.view is not None and result.view.state == "approved"
    assert result.view.decided_by == ("U_LEAD",)

    text = await app.surface.wait_for_answer()
    await app.manager.wait_idle(10)
    assert text == "The api service was restarted."
    assert harness.tools["ops__restart"].calls == [{"service": "api"}]
    final = app.surface.cards()[0]
    assert final.state == "approved" and final.decided_by == ("U_LEAD",)

    # one status message, created then edited in place, ending with a totals line
    assert len(app.surface.of("post_status")) == 1
    status_id = app.surface.of("post_status")[0].message_id
    edits = app.surface.of("update_status")
    assert edits and all(c.message_id == status_id for c in edits)
    last = app.surface.status_of()[0]
    assert last.state == "done" and "1 tool call" in last.totals
    assert [(s.label, s.state) for s in last.steps] == [("ops__restart", "done")]

    run = harness.runs()[0]
    assert run.status == "done" and run.answer == text and run.checkpoint is not None
    assert run.prompt_tokens > 0
    harness.fake.assert_complete()


async def test_reject_with_reason_reaches_the_model_and_tool_never_runs(harness: Harness) -> None:
    harness.fake.script(
        tool_call("ops__restart", {"service": "db"}, id="call_r"),
        answer("I will not restart it."),
        answer("Not restarted: the lead rejected it."),
    )
    app = await harness.app()
    await app.manager.dispatch(harness.message("restart db"))
    card = await app.surface.wait_for_card()
    result = await app.broker.decide(
        card.approval_id, "U_LEAD", "reject", "peak traffic now", platform="test"
    )
    assert result.status == "decided"
    await app.surface.wait_for_answer()
    await app.manager.wait_idle(10)

    assert harness.tools["ops__restart"].calls == []
    seen = [t for t in all_text(harness.fake, lambda m: m.get("role") == "tool")]
    assert any("REJECTED by U_LEAD" in t and "peak traffic now" in t for t in seen)
    assert any("Do not retry the same call" in t for t in seen)
    card = app.surface.cards()[0]
    assert card.state == "rejected" and card.decision_reason == "peak traffic now"
    status = app.surface.status_of()[0]
    assert [(s.label, s.state) for s in status.steps] == [("ops__restart", "blocked")]


async def test_unauthorised_user_changes_nothing(harness: Harness) -> None:
    harness.tools["ops__restart"].policy = ApprovalPolicy(
        approval="required", approvers=("oncall-leads",), risk="high"
    )
    harness.fake.script(
        tool_call("ops__restart", {"service": "api"}), answer("done"), answer("Restarted.")
    )
    app = await harness.app(chatops_approver_groups={"oncall-leads": ["U_LEAD"]})
    await app.manager.dispatch(harness.message("restart api"))
    card = await app.surface.wait_for_card()
    updates_before = len(app.surface.of("update_approval_card"))

    denied = await app.broker.decide(card.approval_id, "U_RANDOM", "approve", platform="test")
    assert denied.status == "unauthorized"
    denied = await app.broker.decide(card.approval_id, "U_RANDOM", "reject", "no", platform="test")
    assert denied.status == "unauthorized"
    assert [a.status for a in harness.approvals()] == ["pending"]
    assert len(app.surface.of("update_approval_card")) == updates_before
    assert harness.tools["ops__restart"].calls == []
    assert not harness.rows(ApprovalDecision)

    ok = await app.broker.decide(card.approval_id, "U_LEAD", "approve", platform="test")
    assert ok.status == "decided"
    await app.surface.wait_for_answer()
    assert len(harness.tools["ops__restart"].calls) == 1


async def test_two_calls_in_one_response_share_one_card(harness: Harness) -> None:
    harness.fake.script(
        tool_calls(("ops__restart", {"service": "api"}), ("ops__restart", {"service": "web"})),
        answer("both done"),
        answer("Restarted api and web."),
    )
    app = await harness.app()
    await app.manager.dispatch(harness.message("restart api and web"))
    await app.surface.wait_for(lambda: len(app.surface.cards()) == 2)
    assert len(app.surface.batch_cards()) == 1  # one card lists both calls (a batch)
    cards = app.surface.cards()
    assert {c.arguments.split('"service": ')[1].split('"')[1] for c in cards} == {"api", "web"}
    assert len({c.approval_id for c in cards}) == 2

    first = await app.broker.decide(cards[0].approval_id, "U_LEAD", "approve", platform="test")
    assert first.status == "decided"
    # the run keeps waiting for the second one
    assert [r.status for r in harness.runs()] == ["waiting_approval"]
    await app.broker.decide(cards[1].approval_id, "U_LEAD", "approve", platform="test")
    await app.surface.wait_for_answer()
    assert sorted(c["service"] for c in harness.tools["ops__restart"].calls) == ["api", "web"]


@pytest.mark.both_databases  # a conditional update: one decision wins
async def test_double_decide_makes_one_decision(harness: Harness) -> None:
    harness.fake.script(tool_call("ops__restart", {"service": "api"}), answer("ok"), answer("ok"))
    app = await harness.app()
    await app.manager.dispatch(harness.message("restart api"))
    card = await app.surface.wait_for_card()

    results = await asyncio.gather(
        app.broker.decide(card.approval_id, "U_A", "approve", platform="test"),
        app.broker.decide(card.approval_id, "U_B", "reject", "wait", platform="test"),
        app.broker.decide(card.approval_id, "U_A", "approve", platform="test"),
    )
    statuses = sorted(r.status for r in results)
    assert statuses.count("decided") == 1, statuses
    assert set(statuses) <= {"decided", "already_decided", "recorded"}
    approval = harness.approvals()[0]
    assert approval.status in ("approved", "rejected")
    late = await app.broker.decide(card.approval_id, "U_C", "approve", platform="test")
    assert late.status == "already_decided" and "Already" in late.message
    await app.surface.wait_for_answer()
    assert len(harness.tools["ops__restart"].calls) == (1 if approval.status == "approved" else 0)


async def test_self_approval_refused_under_four_eyes(harness: Harness) -> None:
    harness.tools["ops__restart"].policy = ApprovalPolicy(
        approval="required", allow_self_approval=False
    )
    harness.fake.script(tool_call("ops__restart", {"service": "api"}), answer("ok"), answer("ok"))
    app = await harness.app()
    await app.manager.dispatch(harness.message("restart api", user="U_DEV"))
    card = await app.surface.wait_for_card()
    refused = await app.broker.decide(card.approval_id, "U_DEV", "approve", platform="test")
    assert refused.status == "self_approval_refused"
    assert harness.approvals()[0].status == "pending"
    assert (
        await app.broker.decide(card.approval_id, "U_LEAD", "approve", platform="test")
    ).status == "decided"
    await app.surface.wait_for_answer()
    assert len(harness.tools["ops__restart"].calls) == 1


@pytest.mark.both_databases  # votes counted by conditional updates
async def test_quorum_of_two_needs_two_different_people(harness: Harness) -> None:
    harness.tools["ops__restart"].policy = ApprovalPolicy(approval="required", min_approvals=2)
    harness.fake.script(tool_call("ops__restart", {"service": "api"}), answer("ok"), answer("ok"))
    app = await harness.app()
    await app.manager.dispatch(harness.message("restart api"))
    card = await app.surface.wait_for_card()

    first = await app.broker.decide(card.approval_id, "U_A", "approve", platform="test")
    assert first.status == "recorded" and "1 more" in first.message
    again = await app.broker.decide(card.approval_id, "U_A", "approve", platform="test")
    assert again.status == "recorded" and "already approved" in again.message
    assert harness.approvals()[0].status == "pending"
    assert app.surface.cards()[0].approvals_so_far == 1
    assert harness.tools["ops__restart"].calls == []

    second = await app.broker.decide(card.approval_id, "U_B", "approve", platform="test")
    assert second.status == "decided"
    await app.surface.wait_for_answer()
    approval = harness.approvals()[0]
    assert approval.status == "approved" and approval.decided_by == ["U_A", "U_B"]
    assert len(harness.tools["ops__restart"].calls) == 1


async def test_timeout_expires_card_and_tells_the_model(harness: Harness) -> None:
    harness.tools["ops__restart"].policy = ApprovalPolicy(approval="required", timeout_s=0.2)
    harness.fake.script(
        tool_call("ops__restart", {"service": "api"}),
        answer("timed out"),
        answer("Nobody approved."),
    )
    app = await harness.app()
    await app.manager.dispatch(harness.message("restart api"))
    card = await app.surface.wait_for_card()
    expired = await app.surface.wait_for_card_state(card.approval_id, "expired")
    assert expired.decided_by == ()
    await app.surface.wait_for_answer()
    seen = all_text(harness.fake, lambda m: m.get("role") == "tool")
    assert any("TIMED OUT" in t and "not a rejection" in t for t in seen)
    assert harness.tools["ops__restart"].calls == []
    late = await app.broker.decide(card.approval_id, "U_LEAD", "approve", platform="test")
    assert late.status == "already_decided" and "expired" in late.message


async def test_escalation_reminder_mentions_the_approvers(harness: Harness) -> None:
    harness.tools["ops__restart"].policy = ApprovalPolicy(
        approval="required", approvers=("leads", "U_CTO")
    )
    harness.fake.script(tool_call("ops__restart", {"service": "api"}), answer("ok"), answer("ok"))
    app = await harness.app(
        chatops_approval_escalate_after_s=0.05, chatops_approver_groups={"leads": ["U_L1", "U_L2"]}
    )
    await app.manager.dispatch(harness.message("restart api"))
    card = await app.surface.wait_for_card()
    notice = await app.surface.wait_for_notice()
    assert set(notice.extra["mention"]) == {"U_L1", "U_L2", "U_CTO"}
    assert "ops__restart" in notice.payload
    assert (
        await app.broker.decide(card.approval_id, "U_L2", "approve", platform="test")
    ).status == "decided"
    await app.surface.wait_for_answer()
    assert harness.approvals()[0].escalated


async def test_approve_for_thread_skips_the_next_ask_for_the_same_call(harness: Harness) -> None:
    harness.fake.script(
        tool_call("ops__restart", {"service": "api"}),
        answer("ok"),
        answer("Restarted api."),
        tool_call("ops__restart", {"service": "api"}),
        answer("ok"),
        answer("Restarted api again."),
    )
    app = await harness.app()
    await app.manager.dispatch(harness.message("restart api"))
    card = await app.surface.wait_for_card()
    assert card.grant_ttl_s == 900
    assert (
        await app.broker.decide(card.approval_id, "U_LEAD", "approve_thread", platform="test")
    ).status == ("decided")
    await app.surface.wait_for_answer()
    await app.manager.wait_idle(10)
    await app.manager.dispatch(harness.message("once more", mentions_bot=False))
    await app.surface.wait_for_answer(count=2)
    assert len(app.surface.cards()) == 1
    assert [c["service"] for c in harness.tools["ops__restart"].calls] == ["api", "api"]
    rows = harness.calls(tool_name="ops__restart")
    assert [r.approval_status for r in rows] == ["approved", "thread_grant"]
    assert rows[1].approvers == ["U_LEAD"] and rows[1].approval_id == card.approval_id
    assert rows[1].grant_id


async def test_tool_results_never_keep_the_secret(harness: Harness) -> None:
    harness.fake.script(tool_call("ops__status", {"service": "api"}), answer("ok"), answer("ok"))
    app = await harness.app()
    await app.manager.dispatch(harness.message("status"))
    await app.surface.wait_for_answer()
    rows = harness.calls()
    assert [r.result_status for r in rows] == ["ok"]
    assert SECRET not in rows[0].observation and "[REDACTED]" in rows[0].observation


async def test_a_card_that_cannot_be_posted_blocks_the_call(harness: Harness) -> None:
    harness.fake.script(
        tool_call("ops__restart", {"service": "api"}), answer("no card"), answer("Could not ask.")
    )
    app = await harness.app()
    app.surface.fail_next("post_approval_card")
    await app.manager.dispatch(harness.message("restart api"))
    assert await app.surface.wait_for_answer() == "Could not ask."
    await app.manager.wait_idle(10)
    assert harness.tools["ops__restart"].calls == []
    assert [a.status for a in harness.approvals()] == ["cancelled"]
    (row,) = harness.calls()
    assert row.result_status == "blocked" and "approval_gate" in (row.error or "")
    assert [r.status for r in harness.runs()] == ["done"]


async def test_unknown_approval_is_not_found(harness: Harness) -> None:
    app = await harness.app()
    result = await app.broker.decide("no-such-approval", "U_LEAD", "approve", platform="test")
    assert result.status == "not_found" and result.view is None


@pytest.mark.both_databases  # a stored deadline read back (timezones)
async def test_a_resumed_approval_keeps_its_original_deadline(harness: Harness) -> None:
    harness.tools["ops__restart"].policy = ApprovalPolicy(approval="required", timeout_s=0.3)
    harness.fake.script(
        tool_call("ops__restart", {"service": "api"}), answer("expired"), answer("Timed out.")
    )
    first = await harness.app()
    await first.manager.dispatch(harness.message("restart api"))
    card = await first.surface.wait_for_card()
    await first.close()  # the resumed run waits only what is left of the deadline
    second = await harness.app()
    await second.surface.wait_for_answer()
    late = await second.broker.decide(card.approval_id, "U_LEAD", "approve", platform="test")
    assert late.status == "already_decided" and harness.approvals()[0].status == "expired"
    assert harness.tools["ops__restart"].calls == []


async def test_arguments_rewritten_after_the_approval_do_not_run(harness: Harness) -> None:
    """The approval binds the exact arguments: a later hook's rewrite blocks the call."""

    async def widen(ctx: PreToolUseContext) -> HookResult:
        return HookResult.rewrite(args={**ctx.args, "service": "db"})

    harness.fake.script(
        tool_call("ops__restart", {"service": "api"}), answer("blocked"), answer("Not run.")
    )
    app = await harness.app(extra_pre=[widen])
    await app.manager.dispatch(harness.message("restart api"))
    card = await app.surface.wait_for_card()
    assert '"service": "api"' in card.arguments
    assert (
        await app.broker.decide(card.approval_id, "U_LEAD", "approve", platform="test")
    ).status == "decided"
    await app.surface.wait_for_answer()
    await app.manager.wait_idle(10)
    assert harness.tools["ops__restart"].calls == []
    (row,) = harness.calls()
    assert row.result_status == "blocked" and row.approval_id == card.approval_id
    assert "after they were approved" in (row.error or "")
    seen = all_text(harness.fake, lambda m: m.get("role") == "tool")
    assert any("after they were approved" in t for t in seen)


class HeldCardSurface(RecordingSurface):
    """The first card edit hangs until `gate` is set (a slow or rate-limited `chat.update`)."""

    def __init__(self) -> None:
        super().__init__("test")
        self.gate = asyncio.Event()
        self.held = 0

    async def update_approval_card(self, ref: MessageRef, view: ApprovalCardView) -> None:
        self.held += 1
        if self.held == 1:
            await self._record("card_edit_held", ref.thread, view, message_id=ref.message_id)
            await self.gate.wait()
        await super().update_approval_card(ref, view)


async def test_a_slow_progress_edit_never_lands_after_the_outcome(harness: Harness) -> None:
    """Quorum: the "1 of 2" edit is slow, the second approval decides; the card ends approved."""
    harness.tools["ops__restart"].policy = ApprovalPolicy(approval="required", min_approvals=2)
    harness.fake.script(tool_call("ops__restart", {"service": "api"}), answer("ok"), answer("ok"))
    app = await harness.app()
    surface = HeldCardSurface()
    app.manager.register_surface(surface)
    await app.manager.dispatch(harness.message("restart api"))
    card = await surface.wait_for_card()

    first = asyncio.create_task(
        app.broker.decide(card.approval_id, "U_A", "approve", platform="test")
    )
    await surface.wait_for(lambda: surface.of("card_edit_held"))  # "1 of 2" edit in flight
    second = asyncio.create_task(
        app.broker.decide(card.approval_id, "U_B", "approve", platform="test")
    )
    await surface.wait_for_answer()  # decided: the run went on while the slow edit hangs
    surface.gate.set()
    assert (await first).status == "recorded" and (await second).status == "decided"
    final = surface.cards()[0]
    assert final.state == "approved" and final.decided_by == ("U_A", "U_B")
    assert surface.of("update_approval_card")[-1].payload.state == "approved"


@pytest.mark.both_databases  # stored times compared at restart
async def test_an_approval_that_expired_while_the_bot_was_down_sends_no_reminder(
    harness: Harness,
) -> None:
    harness.fake.script(
        tool_call("ops__restart", {"service": "api"}), answer("expired"), answer("Timed out.")
    )
    first = await harness.app(chatops_approval_escalate_after_s=600)
    await first.manager.dispatch(harness.message("restart api"))
    card = await first.surface.wait_for_card()
    await first.close()
    # the bot was down past both the reminder and the deadline
    long_ago = utcnow() - timedelta(hours=2)
    with Session(harness.engine) as session:
        session.exec(  # type: ignore[call-overload]
            update(Approval)
            .where(Approval.id == card.approval_id)  # type: ignore[arg-type]
            .values(created_at=long_ago, expires_at=long_ago + timedelta(hours=1))
        )
        session.commit()

    second = await harness.app(chatops_approval_escalate_after_s=600)
    await second.surface.wait_for_answer()
    await second.manager.wait_idle(10)
    assert harness.approvals()[0].status == "expired"
    assert second.surface.notices() == []  # nobody is pinged about a request already over
    assert second.surface.of("update_approval_card")[-1].payload.state == "expired"


async def test_the_brokers_card_map_is_bounded_and_decisions_still_find_their_cards(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker remembers a card posted but not yet recorded in memory, bounded (an LRU
    cache): with room for 2, four pending cards leave at most 2 entries, and each approval is
    still decided on its card (the row records where it is)."""
    import bot.approvals.routing

    monkeypatch.setattr(bot.approvals.routing, "MAX_CARD_REFS", 2)
    harness.fake.respond_with(
        lambda body: tool_call("ops__restart", {"service": "api"})
        if not any(m["role"] == "tool" for m in body["messages"]) else answer("done")
    )  # fmt: skip
    app = await harness.app()
    for i in range(4):
        await app.manager.dispatch(harness.message(f"restart {i}", root=f"200{i}.1"))
    await app.surface.wait_for_card(count=4)
    assert len(app.broker._cards._refs) <= 2
    for card in app.surface.cards():
        result = await app.broker.decide(card.approval_id, "U_LEAD", "approve", platform="test")
        assert result.status == "decided"
