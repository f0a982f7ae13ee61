"""An audit report as a Feishu card (schema 2.0), its request kept under Feishu's size limit.

Fewer calls are listed (and the rest counted) rather than a card cut mid-way. A pure function of
the report (`bot.chat.audit_report.AuditReport`).
"""

from __future__ import annotations

from typing import Any

from bot.audit.render import (
    action_rows,
    approval_pairs,
    approver_rows,
    call_line,
    error_rows,
    feedback_pairs,
    mono_table,
    pairs_line,
    requester_rows,
    rule_rows,
    run_error_rows,
    run_pairs,
    summary_line,
    totals_pairs,
)
from bot.chat.audit_report import AuditReport
from bot.surfaces.feishu.limits import CARD_REQUEST_MAX_BYTES, request_bytes, wire_bytes

FEISHU_MAX_BYTES = CARD_REQUEST_MAX_BYTES  # of the request that sends the card (30 KB limit)


def _feishu_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _fence(text: str) -> str:
    """A code block the content can neither break out of nor use for markup (`<at ...>`)."""
    return "```\n" + _feishu_escape(text).replace("```", "`\u200b``") + "\n```"


def _feishu_md(text: str) -> dict[str, Any]:
    return {"tag": "markdown", "content": text}


def feishu_card(report: AuditReport) -> dict[str, Any]:
    """A card (schema 2.0) for the report, its request kept under 28 KB (measured as Feishu
    does: the card escaped twice inside the request body) by listing fewer calls."""
    limit = 2500
    elements: list[dict[str, Any]] = [
        _feishu_md(_feishu_escape(report.query.describe())),
        _feishu_md("**Totals**: " + pairs_line(totals_pairs(report))),
        _feishu_md("**Runs**: " + pairs_line(run_pairs(report))),
        _feishu_md(
            "**By connector and action**\n" + _fence(mono_table(*action_rows(report), limit))
        ),
        _feishu_md("**Approvals**: " + pairs_line(approval_pairs(report))),
        _feishu_md("**Feedback on answers**: " + pairs_line(feedback_pairs(report))),
        _feishu_md(
            "**Decisions per approver**\n" + _fence(mono_table(*approver_rows(report), limit))
        ),
        _feishu_md("**Approvals by rule**\n" + _fence(mono_table(*rule_rows(report), limit))),
        _feishu_md("**By requester**\n" + _fence(mono_table(*requester_rows(report), limit))),
        _feishu_md("**Most frequent errors**\n" + _fence(mono_table(*error_rows(report), limit))),
    ]
    if report.runs.errors:  # a refused model key shows here: it makes no call
        table = _fence(mono_table(*run_error_rows(report), limit))
        elements.insert(3, _feishu_md("**Why runs failed**\n" + table))
    card = {
        "schema": "2.0",
        "config": {"summary": {"content": summary_line(report)}},
        "header": {"title": {"tag": "plain_text", "content": "Audit report"}, "template": "blue"},
        "body": {"elements": elements},
    }
    size = request_bytes(card)
    lines: list[str] = []
    for entry in report.mutating_calls:
        line = call_line(entry)
        cost = wire_bytes(f"- {_feishu_escape(line)}\n")
        if size + cost + 300 > FEISHU_MAX_BYTES:
            break
        lines.append(line)
        size += cost
    heading = f"**Mutating calls ({report.mutating_calls_total})**\n"
    # a code block: arguments and errors (which tools and MCP servers write) can carry Markdown
    # links, emphasis or mention tags, and none of it may render
    text = heading + (_fence("\n".join(f"- {line}" for line in lines)) if lines else "none")
    omitted = report.mutating_calls_total - len(lines)
    if omitted:
        text += f"\n{omitted} more mutating calls: `chatops audit --format csv` lists them all"
    elements.insert(len(elements) - 1, _feishu_md(text))  # before the errors
    return card
