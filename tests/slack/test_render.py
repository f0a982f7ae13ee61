"""Block Kit renderers (pure): status, approval card, reject modal, answer, notice."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from bot.chat.views import ApprovalCardView, StatusStep, StatusView
from bot.surfaces.slack.cards import render_approval_card, render_reject_modal
from bot.surfaces.slack.limits import BLOCKS_TEXT_LIMIT, blocks_text_length
from bot.surfaces.slack.render import (
    render_answer,
    render_notice,
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


def rich_texts(blocks: list[dict]) -> list[str]:
    """The text of every rich_text element (plain: Slack parses no mrkdwn there)."""
    return [
        leaf["text"]
        for block in blocks
        if block["type"] == "rich_text"
        for element in block["elements"]
        for leaf in element["elements"]
    ]


def test_pending_card_shows_everything_and_five_buttons():
    message = render_approval_card(card(grant_ttl_s=900.0))
    text = all_text(message.blocks)
    assert "Approval needed: ops.restart" in text
    assert ":red_circle: high" in text
    assert "<@U0DEV>" in text
    assert "<@U0LEAD>, oncall-leads" in text
    shown = rich_texts(message.blocks)
    assert "\napi <is> wedged" in shown  # plain text: shown as written, nothing to escape
    assert '{"id": "api"}' in shown
    [actions] = [b for b in message.blocks if b["type"] == "actions"]
    assert [(e["action_id"], e["value"]) for e in actions["elements"]] == [
        ("chatops_approve", "ap-9"),
        ("chatops_edit", "ap-9"),
        ("chatops_request_changes", "ap-9"),
        ("chatops_reject", "ap-9"),
        ("chatops_approve_comment", "ap-9"),
        ("chatops_approve_thread", "ap-9"),
    ]
    assert [e["text"]["text"] for e in actions["elements"]] == [
        "Approve",
        "Edit, then approve",
        "Request changes",
        "Reject",
        "Approve with comment",
        "Approve for this thread (15 min)",
    ]
    assert "for 15 min, ops__restart with these same arguments" in text


def test_no_thread_button_when_a_grant_is_not_allowed():
    message = render_approval_card(card(grant_ttl_s=None))
    [actions] = [b for b in message.blocks if b["type"] == "actions"]
    assert [e["action_id"] for e in actions["elements"]] == [
        "chatops_approve", "chatops_edit", "chatops_request_changes", "chatops_reject",
        "chatops_approve_comment",
    ]  # fmt: skip
    assert "Approve for this thread" not in all_text(message.blocks)


def test_huge_arguments_are_cut_with_a_warning():
    message = render_approval_card(card(arguments="<&>" * 5000))
    for block in message.blocks:
        if block["type"] == "section" and "text" in block:
            assert len(block["text"]["text"]) <= 3000
    shown = rich_texts(message.blocks)
    assert all(len(text) <= 3100 for text in shown)
    assert "".join(shown).count("<&>") == 7_200 // 3
    assert "CUT: only the first 7,200 of 15,000 characters are shown" in shown[-1]


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


def test_the_biggest_card_stays_under_the_blocks_text_limit():
    """Long arguments, a long reason, many secret-looking names, a long rejection reason: the
    card still fits Slack's limit on the text of a message's blocks (else it is refused)."""
    args = json.dumps({f"token_{i}": "x" * 300 for i in range(60)}, indent=2)
    many = tuple(f"token_{i}" for i in range(60))
    for state, extra in (("pending", {}), ("rejected", {"decision_reason": "no " * 2000})):
        view = card(
            arguments=args, reason="r" * 9000, secret_looking=many, state=state,
            requesters=tuple(f"U0{i:05d}" for i in range(20)), grant_ttl_s=900.0, **extra,
        )  # fmt: skip
        message = render_approval_card(view)
        assert blocks_text_length(message.blocks) <= BLOCKS_TEXT_LIMIT


def test_a_step_detail_follows_a_dash_escaped_and_cut():
    detail = "<!channel> " + "x" * 300
    view = StatusView(state="failed", steps=(StatusStep("ops__restart", "failed", 2.0, detail),))
    line = render_status(view).blocks[1]["text"]["text"]
    # cut to 200 characters before escaping: 11 of the mention and space, 188 x, the marker
    assert line == ":x: `ops__restart` (2.0s) \u2014 &lt;!channel&gt; " + "x" * 188 + "\u2026"
