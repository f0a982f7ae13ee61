"""Audit report renderers: Markdown, CSV, JSON, and the text pieces chat renderers share.

Pure functions of an `AuditReport` (CSV also of a stream of `CallEntry`), so every format is
tested as data. The chat formats live with their platform (`bot.surfaces.slack.audit_report`,
`bot.surfaces.feishu.audit_report`: a surface renders, the audit feature does not know the
platforms); they build on the tables, pairs and lines here.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from bot.chat.audit_report import AuditReport, CallEntry
from bot.storage.models import CALL_STARTED, OUTCOME_UNKNOWN

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
    "policy_rule",
    "answer_thumbs_up",  # the thumbs on the answer of the run the call was made in
    "answer_thumbs_down",
    "approval_comment",  # what the decider wrote with their approval or rejection
    "workspace",  # the Slack team or Feishu tenant (last: older readers keep their columns)
]


def _when(value: datetime) -> str:
    return f"{value:%Y-%m-%d %H:%M}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:g} s"


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def args_text(arguments: dict[str, Any], limit: int = ARGS_CHARS) -> str:
    """Arguments as compact JSON (keys sorted), cut to `limit` characters."""
    return cut(json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str), limit)


def decided_text(entry: CallEntry) -> str:
    parts = []
    if entry.approved_by:
        parts.append("approved by " + ", ".join(entry.approved_by))
    if entry.rejected_by:
        parts.append("rejected by " + ", ".join(entry.rejected_by))
    said = "; ".join(parts) or "-"
    return f'{said}: "{cut(entry.approval_comment, 300)}"' if entry.approval_comment else said


def outcome_text(entry: CallEntry) -> str:
    if entry.result_status == CALL_STARTED:
        return OUTCOME_UNKNOWN
    return f"{entry.result_status}: {entry.error}" if entry.error else entry.result_status


# ------------------------------------------------------------------ tables as rows


def action_rows(report: AuditReport) -> tuple[list[str], list[list[str]]]:
    head = ["connector", "action", "calls", "ok", "errors", "blocked", "rejected", "expired"]
    head += ["p50 ms", "p95 ms"]
    rows = [
        [a.connector, a.action, *map(str, (a.calls, a.ok, a.errors, a.blocked, a.rejected))]
        + [str(a.expired), _ms(a.p50_ms), _ms(a.p95_ms)]
        for a in report.actions
    ]
    return head, rows


def requester_rows(report: AuditReport) -> tuple[list[str], list[list[str]]]:
    head = ["requester", "calls", "ok", "errors", "blocked", "rejected", "expired", "mutating"]
    rows = [
        [r.requester, *map(str, (r.calls, r.ok, r.errors, r.blocked, r.rejected, r.expired))]
        + [str(r.mutating)]
        for r in report.requesters
    ]
    return head, rows


def approver_rows(report: AuditReport) -> tuple[list[str], list[list[str]]]:
    head = ["approver", "approved", "rejected", "self-approvals"]
    rows = [
        [a.approver, str(a.approved), str(a.rejected), str(a.self_approvals)]
        for a in report.approvers
    ]
    return head, rows


def rule_rows(report: AuditReport) -> tuple[list[str], list[list[str]]]:
    head = ["connector", "action", "rule", "calls", "no approval", "approved", "rejected"]
    head += ["expired", "denied"]
    rows = [
        [r.connector, r.action, r.rule]
        + [str(n) for n in (r.calls, r.not_required, r.approved, r.rejected, r.expired, r.denied)]
        for r in report.rules
    ]
    return head, rows


def error_rows(report: AuditReport) -> tuple[list[str], list[list[str]]]:
    head = ["count", "connector", "action", "error", "last seen"]
    rows = [
        [str(e.count), e.connector, e.action, cut(e.error, 300), _when(e.last_at)]
        for e in report.errors
    ]
    return head, rows


def totals_pairs(report: AuditReport) -> list[tuple[str, str]]:
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


def approval_pairs(report: AuditReport) -> list[tuple[str, str]]:
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


def feedback_pairs(report: AuditReport) -> list[tuple[str, str]]:
    f = report.feedback
    return [("answers rated", str(f.answers_rated)), ("thumbs up", str(f.up)),
            ("thumbs down", str(f.down))]  # fmt: skip


def run_pairs(report: AuditReport) -> list[tuple[str, str]]:
    r = report.runs
    return [
        ("runs", str(r.started)),
        ("done", str(r.done)),
        ("failed", str(r.failed)),
        ("cancelled", str(r.cancelled)),
        *([("waiting for approval", str(r.waiting_approval))] if r.waiting_approval else []),
        *([("running", str(r.running))] if r.running else []),
    ]


def run_error_rows(report: AuditReport) -> tuple[list[str], list[list[str]]]:
    """Why runs failed, most frequent first (a failed model call shows here, not in errors)."""
    head = ["count", "error", "last seen"]
    rows = [[str(e.count), cut(e.error, 300), _when(e.last_at)] for e in report.runs.errors]
    return head, rows


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


def markdown(report: AuditReport, *, more_hint: str = "") -> str:
    """The whole report as Markdown tables (the CLI's default format and the tool's answer);
    `more_hint` follows the count of mutating calls left out (how to see them)."""
    parts = [f"# {title(report)}", f"Generated {_when(report.generated_at)} UTC."]
    totals = totals_pairs(report)
    parts += ["## Totals", _md_table([k for k, _ in totals], [[v for _, v in totals]])]
    runs = run_pairs(report)
    parts += ["## Runs", _md_table([k for k, _ in runs], [[v for _, v in runs]])]
    if report.runs.errors:
        parts += ["### Why runs failed", _md_table(*run_error_rows(report))]
    parts += ["## By connector and action", _md_table(*action_rows(report))]
    approvals = approval_pairs(report)
    parts += ["## Approvals", _md_table([k for k, _ in approvals], [[v for _, v in approvals]])]
    parts += ["### Decisions per approver", _md_table(*approver_rows(report))]
    parts += ["### Approvals by rule", _md_table(*rule_rows(report))]
    feedback = feedback_pairs(report)
    parts += ["### Feedback on answers", _md_table([k for k, _ in feedback],
                                                   [[v for _, v in feedback]])]  # fmt: skip
    parts += ["## By requester", _md_table(*requester_rows(report))]
    head = ["when (UTC)", "requester", "connector", "action", "arguments", "approval"]
    head += ["decided", "outcome"]
    calls = [
        [_when(c.at), c.requester, c.connector, c.action, f"`{args_text(c.arguments)}`"]
        + [c.approval_status, decided_text(c), outcome_text(c)]
        for c in report.mutating_calls
    ]
    parts += [f"## Mutating calls ({report.mutating_calls_total})", _md_table(head, calls)]
    if report.mutating_calls_omitted:
        more = f"{report.mutating_calls_omitted} more not listed"
        parts.append(f"{more} ({more_hint})." if more_hint else f"{more}.")
    parts += ["## Most frequent errors", _md_table(*error_rows(report))]
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
            spreadsheet_safe(c.policy_rule),
            str(c.feedback_up),
            str(c.feedback_down),
            spreadsheet_safe(c.approval_comment),
            spreadsheet_safe(c.workspace),
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
    """The report model as JSON, plus `mutating_calls_omitted` (those the cap left out)."""
    data = report.model_dump(mode="json")
    data["mutating_calls_omitted"] = report.mutating_calls_omitted
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


# ------------------------------------------------------------------ monospace tables (chat)


def mono_table(head: list[str], rows: list[list[str]], limit: int) -> str:
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


def pairs_line(pairs: list[tuple[str, str]]) -> str:
    return ", ".join(f"{k} {v}" for k, v in pairs)


def summary_line(report: AuditReport) -> str:
    """The report in one line (a chat message's notification text)."""
    t = report.totals
    return (
        f"Audit report {report.query.describe()}: {report.runs.started} runs, "
        f"{report.runs.failed} failed, {t.calls} calls, {t.errors} errors, "
        f"{t.mutating} mutating, {report.approvals.requested} approvals, "
        f"{report.feedback.up} thumbs up, {report.feedback.down} down"
    )


# ------------------------------------------------------------------ streamed exports


def csv_chunks(entries: Iterable[CallEntry], rows_per_chunk: int = 500) -> Iterator[str]:
    """`csv_text`, in pieces of `rows_per_chunk` rows (a download streams them)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for n, row in enumerate(csv_rows(entries), 1):
        writer.writerow(row)
        if n % rows_per_chunk == 0:
            yield out.getvalue()
            out.seek(0)
            out.truncate()
    if out.getvalue():
        yield out.getvalue()


def json_chunks(entries: Iterable[CallEntry], rows_per_chunk: int = 500) -> Iterator[str]:
    """The calls as one JSON array of `CallEntry` objects, in pieces (a download streams them)."""
    parts: list[str] = []
    first = True
    for entry in entries:
        parts.append(("[\n" if first else ",\n") + entry.model_dump_json())
        first = False
        if len(parts) == rows_per_chunk:
            yield "".join(parts)
            parts = []
    yield "".join(parts) + ("[]\n" if first else "\n]\n")
