"""Audit report renderers: Markdown, CSV, JSON, Slack Block Kit and a Feishu card.

Pure functions of an `AuditReport` (CSV also of a stream of `CallEntry`), so every format is
tested as data. Chat formats stay inside their platform's limits (Slack: 50 blocks, 3,000
characters per section, 12,000 across the blocks; Feishu: a request well under 30 KB) by
listing fewer calls and saying how many were left out, never by cutting a message mid-way.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from bot.audit.report import AuditReport, CallEntry
from bot.storage.models import CALL_STARTED, OUTCOME_UNKNOWN
from bot.surfaces.feishu.limits import CARD_REQUEST_MAX_BYTES, request_bytes, wire_bytes
from bot.surfaces.slack.limits import BLOCKS_TEXT_LIMIT, blocks_text_length, slack_length

SLACK_MAX_BLOCKS = 50
SLACK_SECTION_CHARS = 3000
SLACK_TABLE_CHARS = 1500  # each summary table; four of them leave room for the calls
SLACK_BLOCKS_TEXT = BLOCKS_TEXT_LIMIT - 500  # a margin for what Slack counts that we do not
SLACK_OMITTED_NOTE_CHARS = 80
SLACK_CALL_BLOCKS = 30
FEISHU_MAX_BYTES = CARD_REQUEST_MAX_BYTES  # of the request that sends the card (30 KB limit)
ARGS_CHARS = 200
_FORMULA_STARTS = frozenset("=+-@\t\r\uff1d\uff0b\uff0d\uff20")
CSV_HEADER = [
    "id",
    "at",
    "platform",
    "channel",
    "requester",
    "connector",
    "action",
    "arguments",
    "approval_status",
    "approved_by",
    "rejected_by",
    "result_status",
    "duration_ms",
    "error",
]


def _when(value: datetime) -> str:
    return f"{value:%Y-%m-%d %H:%M}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:g} s"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def args_text(arguments: dict[str, Any], limit: int = ARGS_CHARS) -> str:
    """Arguments as compact JSON (keys sorted), cut to `limit` characters."""
    return _cut(json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str), limit)


def decided_text(entry: CallEntry) -> str:
    parts = []
    if entry.approved_by:
        parts.append("approved by " + ", ".join(entry.approved_by))
    if entry.rejected_by:
        parts.append("rejected by " + ", ".join(entry.rejected_by))
    return "; ".join(parts) or "-"


def outcome_text(entry: CallEntry) -> str:
    if entry.result_status == CALL_STARTED:
        return OUTCOME_UNKNOWN
    return f"{entry.result_status}: {entry.error}" if entry.error else entry.result_status


# ------------------------------------------------------------------ tables as rows


def _action_rows(report: AuditReport) -> tuple[list[str], list[list[str]]]:
    head = ["connector", "action", "calls", "ok", "errors", "blocked", "rejected", "expired"]
    head += ["p50 ms", "p95 ms"]
    rows = [
        [a.connector, a.action, *map(str, (a.calls, a.ok, a.errors, a.blocked, a.rejected))]
        + [str(a.expired), _ms(a.p50_ms), _ms(a.p95_ms)]
        for a in report.actions
    ]
    return head, rows


def _requester_rows(report: AuditReport) -> tuple[list[str], list[list[str]]]:
    head = ["requester", "calls", "ok", "errors", "blocked", "rejected", "expired", "mutating"]
    rows = [
        [r.requester, *map(str, (r.calls, r.ok, r.errors, r.blocked, r.rejected, r.expired))]
        + [str(r.mutating)]
        for r in report.requesters
    ]
    return head, rows


def _approver_rows(report: AuditReport) -> tuple[list[str], list[list[str]]]:
    head = ["approver", "approved", "rejected", "self-approvals"]
    rows = [
        [a.approver, str(a.approved), str(a.rejected), str(a.self_approvals)]
        for a in report.approvers
    ]
    return head, rows


def _error_rows(report: AuditReport) -> tuple[list[str], list[list[str]]]:
    head = ["count", "connector", "action", "error", "last seen"]
    rows = [
        [str(e.count), e.connector, e.action, _cut(e.error, 300), _when(e.last_at)]
        for e in report.errors
    ]
    return head, rows


def _totals_pairs(report: AuditReport) -> list[tuple[str, str]]:
    t = report.totals
    return [
        ("calls", str(t.calls)),
        ("ok", str(t.ok)),
        ("errors", str(t.errors)),
        ("blocked", str(t.blocked)),
        ("rejected", str(t.rejected)),
        ("expired", str(t.expired)),
        *([("outcome unknown", str(t.unknown))] if t.unknown else []),
        ("mutating", str(t.mutating)),
        ("requesters", str(t.requesters)),
    ]


def _approval_pairs(report: AuditReport) -> list[tuple[str, str]]:
    a = report.approvals
    return [
        ("requested", str(a.requested)),
        ("approved", str(a.approved)),
        ("rejected", str(a.rejected)),
        ("expired", str(a.expired)),
        ("cancelled", str(a.cancelled)),
        ("pending", str(a.pending)),
        ("median time to decision", _seconds(a.median_decision_s)),
        ("self-approvals", str(a.self_approvals)),
    ]


def call_line(entry: CallEntry, args_limit: int = ARGS_CHARS) -> str:
    """One mutating call on one line (chat formats)."""
    return (
        f"{_when(entry.at)} {entry.requester} {entry.connector}.{entry.action} "
        f"{args_text(entry.arguments, args_limit)} | {entry.approval_status}, "
        f"{decided_text(entry)} | {outcome_text(entry)}"
    )


def title(report: AuditReport) -> str:
    return f"Audit report: {report.query.describe()}"


# ------------------------------------------------------------------ Markdown


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def markdown(report: AuditReport) -> str:
    """The whole report as Markdown tables (the CLI's default format and the tool's answer)."""
    parts = [f"# {title(report)}", f"Generated {_when(report.generated_at)} UTC."]
    totals = _totals_pairs(report)
    parts += ["## Totals", _md_table([k for k, _ in totals], [[v for _, v in totals]])]
    parts += ["## By connector and action", _md_table(*_action_rows(report))]
    approvals = _approval_pairs(report)
    parts += ["## Approvals", _md_table([k for k, _ in approvals], [[v for _, v in approvals]])]
    parts += ["### Decisions per approver", _md_table(*_approver_rows(report))]
    parts += ["## By requester", _md_table(*_requester_rows(report))]
    head = ["when (UTC)", "requester", "connector", "action", "arguments", "approval"]
    head += ["decided", "outcome"]
    calls = [
        [_when(c.at), c.requester, c.connector, c.action, f"`{args_text(c.arguments)}`"]
        + [c.approval_status, decided_text(c), outcome_text(c)]
        for c in report.mutating_calls
    ]
    parts += [f"## Mutating calls ({report.mutating_calls_total})", _md_table(head, calls)]
    if report.mutating_calls_omitted:
        parts.append(f"{report.mutating_calls_omitted} more not listed.")
    parts += ["## Most frequent errors", _md_table(*_error_rows(report))]
    return "\n\n".join(parts) + "\n"


# ------------------------------------------------------------------ CSV and JSON


def csv_rows(entries: Iterable[CallEntry]) -> Iterator[list[str]]:
    """The header, then one row per call (for spreadsheets); arguments as JSON. Text cells are
    neutralised (`spreadsheet_safe`): errors and arguments come from tools and MCP servers."""
    yield list(CSV_HEADER)
    for c in entries:
        text = [
            c.platform,
            c.channel,
            c.requester,
            c.connector,
            c.action,
            json.dumps(c.arguments, sort_keys=True, default=str, ensure_ascii=False),
            c.approval_status,
            " ".join(c.approved_by),
            " ".join(c.rejected_by),
            c.result_status,
        ]
        yield [
            str(c.id),
            c.at.isoformat(),
            *(spreadsheet_safe(cell) for cell in text),
            f"{c.duration_ms:g}",
            spreadsheet_safe(c.error or ""),
        ]


def spreadsheet_safe(cell: str) -> str:
    """A cell Excel, Sheets and LibreOffice show as text, never run as a formula: one starting
    with `=`, `+`, `-`, `@`, a tab or a carriage return (OWASP's list, full-width forms too)
    gets a leading `'` (`=HYPERLINK(...)` in an MCP error would otherwise be a live link)."""
    return f"'{cell}" if cell[:1] in _FORMULA_STARTS else cell


def csv_text(entries: Iterable[CallEntry]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(csv_rows(entries))
    return out.getvalue()


def json_text(report: AuditReport) -> str:
    return report.model_dump_json(indent=2) + "\n"


# ------------------------------------------------------------------ monospace tables (chat)


def _mono(head: list[str], rows: list[list[str]], limit: int) -> str:
    """An aligned text table, rows dropped (and counted) to stay under `limit` characters."""
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def fmt(row: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()

    lines = [fmt(head)]
    for i, row in enumerate(rows):
        line = fmt(row)
        if sum(len(x) + 1 for x in lines) + len(line) + 40 > limit:
            lines.append(f"… {len(rows) - i} more rows")
            break
        lines.append(line)
    return "\n".join(lines)


def _pairs_line(pairs: list[tuple[str, str]]) -> str:
    return ", ".join(f"{k} {v}" for k, v in pairs)


# ------------------------------------------------------------------ Slack


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": _cut(text, SLACK_SECTION_CHARS)}}


def _slack_code(heading: str, body: str) -> dict[str, Any]:
    budget = SLACK_SECTION_CHARS - len(heading) - 10
    return _slack_section(f"*{heading}*\n```{_slack_escape(_cut(body, budget))}```")


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
            "fields": [{"type": "mrkdwn", "text": f"*{k}*\n{v}"} for k, v in _totals_pairs(report)],
        },
        {"type": "divider"},
        _slack_code("By connector and action", _mono(*_action_rows(report), body)),
        _slack_section("*Approvals*: " + _pairs_line(_approval_pairs(report))),
        _slack_code("Decisions per approver", _mono(*_approver_rows(report), body)),
        _slack_code("By requester", _mono(*_requester_rows(report), body)),
        {"type": "divider"},
    ]
    errors = _slack_code("Most frequent errors", _mono(*_error_rows(report), body))
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
        blocks.append(_slack_context(f"{omitted} more mutating calls: run `chatops audit` for all"))
    blocks.append(errors)
    return blocks[:SLACK_MAX_BLOCKS]


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


def slack_text(report: AuditReport) -> str:
    """The notification fallback `text` that goes with the blocks."""
    t = report.totals
    return (
        f"Audit report {report.query.describe()}: {t.calls} calls, {t.errors} errors, "
        f"{t.mutating} mutating, {report.approvals.requested} approvals"
    )


# ------------------------------------------------------------------ Feishu


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
        _feishu_md("**Totals**: " + _pairs_line(_totals_pairs(report))),
        _feishu_md("**By connector and action**\n" + _fence(_mono(*_action_rows(report), limit))),
        _feishu_md("**Approvals**: " + _pairs_line(_approval_pairs(report))),
        _feishu_md("**Decisions per approver**\n" + _fence(_mono(*_approver_rows(report), limit))),
        _feishu_md("**By requester**\n" + _fence(_mono(*_requester_rows(report), limit))),
        _feishu_md("**Most frequent errors**\n" + _fence(_mono(*_error_rows(report), limit))),
    ]
    card = {
        "schema": "2.0",
        "config": {"summary": {"content": slack_text(report)}},
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
        text += f"\n{omitted} more mutating calls: run `chatops audit` for all"
    elements.insert(6, _feishu_md(text))
    return card
