"""An audit report as Slack Block Kit, inside Slack's limits.

At most 50 blocks, 3,000 characters per section and 12,000 across the blocks: the tables are
capped and the mutating calls listed while they fit, the rest counted; never a message cut
mid-way. A pure function of the report (`bot.chat.audit_report.AuditReport`).
"""

from __future__ import annotations

from typing import Any

from bot.audit.render import (
    action_rows,
    approval_pairs,
    approver_rows,
    call_line,
    cut,
    error_rows,
    feedback_pairs,
    mono_table,
    pairs_line,
    requester_rows,
    rule_rows,
    run_error_rows,
    run_pairs,
    totals_pairs,
)
from bot.chat.audit_report import AuditReport
from bot.surfaces.slack.limits import BLOCKS_TEXT_LIMIT, blocks_text_length, slack_length

SLACK_MAX_BLOCKS = 50
SLACK_SECTION_CHARS = 3000
SLACK_TABLE_CHARS = 1500  # each summary table; four of them leave room for the calls
SLACK_BLOCKS_TEXT = BLOCKS_TEXT_LIMIT - 500  # a margin for what Slack counts that we do not
SLACK_OMITTED_NOTE_CHARS = 80
SLACK_CALL_BLOCKS = 30


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": cut(text, SLACK_SECTION_CHARS)}}


def _slack_code(heading: str, body: str) -> dict[str, Any]:
    budget = SLACK_SECTION_CHARS - len(heading) - 10
    return _slack_section(f"*{heading}*\n```{_slack_escape(cut(body, budget))}```")


def _chunks(lines: list[str], limit: int) -> list[list[str]]:
    chunks: list[list[str]] = [[]]
    size = 0
    for line in lines:
        if chunks[-1] and size + len(line) + 1 > limit:
            chunks.append([])
            size = 0
        chunks[-1].append(line)
        size += len(line) + 1
    return [c for c in chunks if c]


def slack_blocks(report: AuditReport) -> list[dict[str, Any]]:
    """Block Kit for the report: at most 50 blocks, every section text under 3,000 chars, and
    under 12,000 characters of text in all (`msg_blocks_too_long`): the tables are capped and
    the mutating calls listed while they fit, the rest counted."""
    body = SLACK_TABLE_CHARS
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": "Audit report"}},
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": _slack_escape(report.query.describe())}],
        },
        {
            "type": "section",
            "fields": [{"type": "mrkdwn", "text": f"*{k}*\n{v}"} for k, v in totals_pairs(report)],
        },
        _slack_section("*Runs*: " + pairs_line(run_pairs(report))),
        *_run_errors(report),
        {"type": "divider"},
        _slack_code("By connector and action", mono_table(*action_rows(report), body)),
        _slack_section("*Approvals*: " + pairs_line(approval_pairs(report))),
        _slack_section("*Feedback on answers*: " + pairs_line(feedback_pairs(report))),
        _slack_code("Decisions per approver", mono_table(*approver_rows(report), body)),
        _slack_code("Approvals by rule", mono_table(*rule_rows(report), body)),
        _slack_code("By requester", mono_table(*requester_rows(report), body)),
        {"type": "divider"},
    ]
    errors = _slack_code("Most frequent errors", mono_table(*error_rows(report), body))
    room = SLACK_BLOCKS_TEXT - blocks_text_length([*blocks, errors]) - SLACK_OMITTED_NOTE_CHARS
    lines = [_slack_escape(call_line(c)) for c in report.mutating_calls]
    heading = f"*Mutating calls ({report.mutating_calls_total})*\n"
    listed = 0
    for i, chunk in enumerate(_chunks(lines, SLACK_SECTION_CHARS - 300)[:SLACK_CALL_BLOCKS]):
        fitting = _fitting_lines(chunk, room - (len(heading) if i == 0 else 0))
        if not fitting:
            break
        text = (heading if i == 0 else "") + "\n".join(fitting)
        blocks.append(_slack_section(text))
        room -= slack_length(text)
        listed += len(fitting)
        if len(fitting) < len(chunk):
            break
    if not listed:
        blocks.append(_slack_section(heading + ("none" if not lines else "(too many to list)")))
    omitted = report.mutating_calls_total - listed
    if omitted:
        more = f"{omitted} more mutating calls: `chatops audit --format csv` lists them all"
        blocks.append(_slack_context(more))
    blocks.append(errors)
    return blocks[:SLACK_MAX_BLOCKS]


def _run_errors(report: AuditReport) -> list[dict[str, Any]]:
    """Why runs failed, when some did (a refused model key shows here: it makes no call)."""
    if not report.runs.errors:
        return []
    return [_slack_code("Why runs failed", mono_table(*run_error_rows(report), SLACK_TABLE_CHARS))]


def _fitting_lines(lines: list[str], room: int) -> list[str]:
    """The first lines that fit in `room` characters (as Slack counts them), newlines included."""
    fitting: list[str] = []
    for line in lines:
        room -= slack_length(line) + 1
        if room < 0:
            break
        fitting.append(line)
    return fitting


def _slack_context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}
