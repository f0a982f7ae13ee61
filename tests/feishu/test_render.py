"""Card JSON 2.0 rendering, tested as data (no HTTP)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from bot.chat.views import ApprovalCardView, StatusStep, StatusView
from bot.surfaces.feishu.limits import CARD_REQUEST_MAX_BYTES, request_bytes
from bot.surfaces.feishu.render import (
    answer_cards,
    approval_card,
    split_markdown,
    status_card,
    text_content,
)


def _view(**kw) -> ApprovalCardView:
    base = dict(
        approval_id="ap_1",
        tool_name="ops__restart",
        connector="ops",
        action="restart",
        risk="high",
        requester="ou_dev",
        reason="The API is down",
        arguments='{"id": "api"}',
    )
    base.update(kw)
    return ApprovalCardView(**base)


def _walk(node):
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def _text(card) -> str:
    return "\n".join(n["content"] for n in _walk(card) if n.get("tag") == "markdown")


def _plain(card) -> str:
    """Untrusted text: the plain_text divs (Feishu renders no markdown in them)."""
    divs = [n["text"] for n in _walk(card) if n.get("tag") == "div"]
    return "\n".join(d["content"] for d in divs if d.get("tag") == "plain_text")


def test_status_card_is_a_shared_v2_card_with_steps():
    view = StatusView(
        state="running",
        steps=(StatusStep("ops__status", "done", 1.25), StatusStep("ops__restart", "running")),
        headline="Restarting api",
        totals="2 tools · 3.1s",
    )
    card = status_card(view)
    assert card["schema"] == "2.0"
    assert card["config"]["update_multi"] is True
    assert card["header"]["template"] == "blue"
    text = _text(card)
    assert "✅ ops__status (1.2s)" in text or "✅ ops__status (1.3s)" in text
    assert "⏳ ops__restart" in text
    assert "Restarting api" in text and "2 tools" in text


def test_status_card_colour_follows_the_run_state():
    assert status_card(StatusView(state="done"))["header"]["template"] == "green"
    assert status_card(StatusView(state="failed"))["header"]["template"] == "red"
    assert status_card(StatusView(state="waiting_approval"))["header"]["template"] == "orange"


def test_status_card_keeps_the_last_steps_of_a_long_run():
    steps = tuple(StatusStep(f"tool_{i}", "done", 0.1) for i in range(60))
    card = status_card(StatusView(state="running", steps=steps))
    text = _text(card)
    assert "tool_59" in text and "tool_0 " not in text and "35 earlier steps" in text
    assert request_bytes(card) < CARD_REQUEST_MAX_BYTES


def test_approval_card_header_colour_by_risk():
    assert approval_card(_view(risk="low"))["header"]["template"] == "green"
    assert approval_card(_view(risk="medium"))["header"]["template"] == "orange"
    assert approval_card(_view(risk="high"))["header"]["template"] == "red"


def test_pending_approval_card_has_form_with_reason_input_and_five_named_buttons():
    expires = datetime(2026, 11, 29, 15, 0, tzinfo=UTC)
    card = approval_card(_view(expires_at=expires, grant_ttl_s=1800.0))
    text = _text(card)
    assert "`ops__restart`" in text and "<at id=ou_dev></at>" in text
    assert "The API is down" not in text  # untrusted: never in markdown
    assert "The API is down" in _plain(card) and '{"id": "api"}' in _plain(card)
    assert "Expires 2026-11-29 15:00 UTC" in text
    assert "for 30 min, ops__restart with these same arguments" in _plain(card)
    forms = [n for n in _walk(card) if n.get("tag") == "form"]
    assert len(forms) == 1
    inputs = [n for n in _walk(forms[0]) if n.get("tag") == "input"]
    assert [i["name"] for i in inputs] == ["reject_reason"]
    buttons = [n for n in _walk(forms[0]) if n.get("tag") == "button"]
    assert [b["text"]["content"] for b in buttons] == [
        "Approve",
        "Edit, then approve",
        "Request changes",
        "Reject",
        "Approve for this thread (30 min)",
    ]
    decisions = ["approve", "edit", "request_changes", "reject", "approve_thread"]
    for button, decision in zip(buttons, decisions, strict=True):
        assert button["name"] == f"{decision}__ap_1"
        assert button["form_action_type"] == "submit"
        assert button["behaviors"] == [
            {"type": "callback", "value": {"approval_id": "ap_1", "decision": decision}}
        ]


def test_decided_approval_card_shows_outcome_and_deciders_without_buttons():
    card = approval_card(
        _view(state="rejected", decided_by=("ou_lead",), decision_reason="not during peak")
    )
    assert card["header"]["template"] == "red"
    assert card["header"]["title"]["content"].startswith("Rejected")
    text = _text(card)
    assert "**Rejected** by <at id=ou_lead></at>" in text and "not during peak" in _plain(card)
    assert not [n for n in _walk(card) if n.get("tag") in ("button", "form")]
    approved = approval_card(_view(state="approved", decided_by=("ou_a", "ou_b")))
    assert approved["header"]["template"] == "green"
    assert "<at id=ou_a></at> <at id=ou_b></at>" in _text(approved)
    assert approval_card(_view(state="expired"))["header"]["template"] == "grey"


def test_approval_card_arguments_are_plain_text_and_cut_with_a_warning():
    args = "```" + "x" * 20_000
    card = approval_card(_view(arguments=args))
    assert "```" not in _text(card)  # the arguments never reach markdown
    assert "CUT: only the first 15,800 of 20,003 characters are shown" in _plain(card)
    assert request_bytes(card) < CARD_REQUEST_MAX_BYTES
    quoted = approval_card(_view(arguments='"' * 20_000, reason='"' * 5_000))  # 4 bytes each
    assert "CUT: only the first" in _plain(quoted)
    assert request_bytes(quoted) < CARD_REQUEST_MAX_BYTES


def test_no_thread_button_when_a_grant_is_not_allowed():
    card = approval_card(_view(grant_ttl_s=None))
    buttons = [n["text"]["content"] for n in _walk(card) if n.get("tag") == "button"]
    assert buttons == ["Approve", "Edit, then approve", "Request changes", "Reject"]


def test_quorum_progress_is_shown():
    text = _text(approval_card(_view(min_approvals=2, approvals_so_far=1)))
    assert "1 of 2" in text


def test_answer_split_under_card_limit_keeps_code_fences_balanced():
    block = "```python\n" + "\n".join(f"print({i})  # 漢字漢字漢字" for i in range(2000)) + "\n```"
    markdown = "# Result\n\n" + "word " * 3000 + "\n\n" + block + "\n\nDone."
    cards = answer_cards(markdown)
    assert len(cards) > 2
    for card in cards:
        assert request_bytes(card) < CARD_REQUEST_MAX_BYTES
        body = card["body"]["elements"][0]["content"]
        assert body.count("```") % 2 == 0
    joined = "".join(c["body"]["elements"][0]["content"] for c in cards)
    assert "print(1999)" in joined and "Done." in joined and "# Result" in joined
    assert "Part 1 of" in json.dumps(cards[0], ensure_ascii=False)


def test_short_answer_is_one_card():
    cards = answer_cards("**Restarted** `api`.")
    assert len(cards) == 1
    assert cards[0]["body"]["elements"] == [{"tag": "markdown", "content": "**Restarted** `api`."}]


def test_a_single_huge_line_is_hard_split():
    parts = split_markdown("y" * 100_000, limit=10_000)
    assert len(parts) >= 10 and all(len(p.encode()) <= 10_000 for p in parts)
    assert "".join(parts) == "y" * 100_000


def test_text_content_mentions_with_user_id_attribute():
    assert text_content("approval waiting", ["ou_a", "ou_b"]) == {
        "text": '<at user_id="ou_a"></at> <at user_id="ou_b"></at> approval waiting'
    }
    assert text_content("plain") == {"text": "plain"}


def test_mention_tags_from_the_model_or_tools_are_defused():
    evil = 'Done. <at id=all></at> and <AT user_id="all"></AT>'
    answer = answer_cards(evil)[0]["body"]["elements"][0]["content"]
    assert "<at" not in answer.lower() and "Done." in answer and "\u200b" in answer
    assert "<at" not in text_content(evil)["text"].lower()
    card = approval_card(_view(reason=evil, arguments=evil))
    text = _text(card)
    assert text.count("<at id=") == 1  # only the requester mention the bot made
    status = status_card(StatusView(state="running", headline=evil))
    assert "<at" not in _text(status).lower()
    assert text_content(evil, ["ou_lead"])["text"].startswith('<at user_id="ou_lead"></at> ')


def test_a_step_detail_goes_indented_below_defused_and_cut():
    detail = "<at id=all></at> " + "x" * 400
    view = StatusView(state="failed", steps=(StatusStep("ops__restart", "failed", 2.0, detail),))
    [steps] = [e["content"] for e in status_card(view)["body"]["elements"] if "❌" in e["content"]]
    label, below = steps.split("\n")
    assert label == "❌ ops__restart (2.0s)"
    assert below.startswith("    <\u200bat id=all>") and below.endswith("… (truncated)")
    assert below.replace("\u200b", "") == "    " + detail[:286] + "… (truncated)"
