"""Block Kit renderers (pure): status, approval card, reject modal, answer, notice."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from bot.surfaces.base import ApprovalCardView, StatusStep, StatusView
from bot.surfaces.slack_render import (
    render_answer,
    render_approval_card,
    render_notice,
    render_reject_modal,
    render_status,
)


def card(**overrides) -> ApprovalCardView:
    values = dict(
        approval_id="ap-9",
        tool_name="ops__restart",
        connector="ops",
        action="restart",
        risk="high",
        requester="U0DEV",
        reason="api <is> wedged",
        arguments='{"id": "api"}',
        approvers=("U0LEAD", "oncall-leads"),
    )
    values.update(overrides)
    return ApprovalCardView(**values)


def all_text(blocks: list[dict]) -> str:
    return json.dumps(blocks)


def test_pending_card_shows_everything_and_three_buttons():
    message = render_approval_card(card())
    text = all_text(message.blocks)
    assert "Approval needed: ops.restart" in text
    assert ":red_circle: high" in text
    assert "<@U0DEV>" in text
    assert "<@U0LEAD>, oncall-leads" in text
    assert "api &lt;is&gt; wedged" in text
    assert '```\\n{\\"id\\": \\"api\\"}\\n```' in text
    [actions] = [b for b in message.blocks if b["type"] == "actions"]
    assert [(e["action_id"], e["value"]) for e in actions["elements"]] == [
        ("chatops_approve", "ap-9"),
        ("chatops_reject", "ap-9"),
        ("chatops_approve_thread", "ap-9"),
    ]
    assert [e["text"]["text"] for e in actions["elements"]] == [
        "Approve",
        "Reject",
        "Approve for this thread",
    ]


def test_huge_arguments_are_cut_under_the_section_limit():
    message = render_approval_card(card(arguments="<&>" * 5000))
    for block in message.blocks:
        if block["type"] == "section" and "text" in block:
            assert len(block["text"]["text"]) <= 3000
    args = next(b for b in message.blocks if "Arguments" in b.get("text", {}).get("text", ""))
    assert "(cut; full arguments in the call log)" in args["text"]["text"]
    assert args["text"]["text"].endswith("```")


def test_decided_card_has_no_buttons_and_shows_outcome():
    message = render_approval_card(
        card(state="rejected", decided_by=("U0LEAD",), decision_reason="wrong env")
    )
    assert not [b for b in message.blocks if b["type"] == "actions"]
    text = all_text(message.blocks)
    assert "Rejected by <@U0LEAD>" in text
    assert "wrong env" in text


def test_expired_card():
    text = all_text(render_approval_card(card(state="expired")).blocks)
    assert "Expired" in text


def test_quorum_and_expiry_shown_while_pending():
    expires = datetime(2026, 11, 29, 15, 0, tzinfo=UTC)
    text = all_text(
        render_approval_card(card(min_approvals=2, approvals_so_far=1, expires_at=expires)).blocks
    )
    assert "1 of 2 approvals" in text
    assert f"<!date^{int(expires.timestamp())}^" in text


def test_status_checklist():
    view = StatusView(
        state="waiting_approval",
        steps=(
            StatusStep("ops__status", "done", 0.42),
            StatusStep("ops__restart", "waiting_approval"),
        ),
        headline="Restarting api",
        totals="2 tools \u00b7 1.2s",
    )
    message = render_status(view)
    text = all_text(message.blocks)
    assert "Waiting for approval" in message.text
    assert ":white_check_mark: `ops__status` (0.4s)" in text
    assert ":raised_hand: `ops__restart`" in text
    assert message.blocks[-1]["type"] == "context"


def test_status_with_many_steps_stays_under_limit():
    steps = tuple(StatusStep(f"tool_{i}__" + "x" * 60, "done", 1.0) for i in range(200))
    message = render_status(StatusView(state="done", steps=steps))
    assert all(len(b["text"]["text"]) <= 3000 for b in message.blocks if "text" in b)
    assert "earlier steps" in all_text(message.blocks)
    assert "tool_199__" in all_text(message.blocks)  # the newest step is shown


def test_reject_modal_carries_the_approval_and_origin():
    view = render_reject_modal(
        "ap-9", {"team": "T", "channel": "C", "thread_ts": "1.2"}, "Approval needed: ops.restart"
    )
    assert view["type"] == "modal"
    assert json.loads(view["private_metadata"]) == {
        "approval_id": "ap-9",
        "team": "T",
        "channel": "C",
        "thread_ts": "1.2",
    }
    assert view["blocks"][1]["optional"] is True


def test_answer_is_split_under_slack_limits():
    markdown = "\n\n".join(f"## Part {i}\n" + ("word " * 400) for i in range(120))
    messages = render_answer(markdown)
    assert len(messages) > 1
    for message in messages:
        assert len(message.blocks) <= 50
        assert len(message.text) <= 40_000
        assert all(len(b["text"]["text"]) <= 3000 for b in message.blocks)
    assert "*Part 0*" in messages[0].blocks[0]["text"]["text"]


def test_notice_mentions_first():
    message = render_notice("approval waiting", mention=["U1", "U2"])
    assert message.text == "<@U1> <@U2> approval waiting"
