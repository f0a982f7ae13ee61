"""The console's two views beside its conversations: approvals and the call log.

Approvals: the console's cards still pending, split into those the viewer may decide now (the
broker's own `refusal` check, as a click would be judged; "Waiting for you", each with its age
and expiry) and those waiting for someone else,
and the latest decisions. Only cards the console posted are listed: they are the only ones it
can decide, and no other platform's (a direct message's above all) is shown here.

The call log: the audit's query and renderers (`AuditQuery`, `chatops audit`'s CSV), filtered
by window, connector, action, user and outcome, newest first, with CSV and JSON downloads. A
direct message's calls are listed with their arguments and errors hidden (as in a report shown
in a channel, docs/audit.md): the console is not that conversation.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from aiohttp import web

from bot.chat.audit_report import OUTCOMES, AuditQuery
from bot.chat.ports import SurfacePorts
from bot.errors import SurfaceError
from bot.statuses import ApprovalStatus
from bot.surfaces.console.ports import ConsolePorts, Item
from bot.surfaces.console.surface import DEFAULT_USER, PLATFORM, item_json

PENDING_LIMIT = 100
RECENT_LIMIT = 30
CALLS_LIMIT = 100
MAX_CALLS_LIMIT = 500
MAX_FILTER_CHARS = 200
EXPORTS = {
    "csv": ("text/csv", "chatops-calls.csv"),
    "json": ("application/json", "chatops-calls.json"),
}


class BadFilter(SurfaceError, ValueError):
    """A filter of the call log view that cannot be used (said to the browser, 400)."""


class BrowseRoutes:
    """`GET /console/api/approvals` and `GET /console/api/calls`."""

    def __init__(self, ports: SurfacePorts, console: ConsolePorts) -> None:
        self.ports = ports
        self.console = console

    async def approvals(self, request: web.Request) -> web.Response:
        user = request.query.get("user", "").strip()[:64] or DEFAULT_USER
        mine: list[dict[str, Any]] = []
        others: list[dict[str, Any]] = []
        for item in _one_per_approval(
            await self.console.items.approvals(pending=True, limit=PENDING_LIMIT), pending=True
        ):
            refused = await self.ports.decisions.refusal(
                str(item.data.get("approval_id")), user, "approve", platform=PLATFORM
            )
            if refused is None:
                mine.append(item_json(item))
            elif refused.status not in ("already_decided", "not_found"):
                others.append({**item_json(item), "refusal": refused.message})
        # each of mine with its age and expiry, in the broker's time ("asked 5 min ago ·
        # expires in 55 min"), as every platform's inbox says it
        ages = {
            entry.card.approval_id: entry.age_and_expiry()
            for entry in await self.ports.decisions.waiting_for(user, platform=PLATFORM)
        }
        for entry in mine:
            entry["waiting"] = ages.get(str(entry["data"].get("approval_id")), "")
        recent = _one_per_approval(
            await self.console.items.approvals(pending=False, limit=RECENT_LIMIT), pending=False
        )
        return web.json_response(
            {
                "user": user,
                "mine": mine,
                "others": others,
                "recent": [item_json(item) for item in recent],
            }
        )

    async def calls(self, request: web.Request) -> web.StreamResponse:
        try:
            query = call_query(request.query)
            fmt = request.query.get("format", "")
            if fmt and fmt not in EXPORTS:
                raise BadFilter(f"format must be one of {', '.join(EXPORTS)}")
            limit = _number(request.query.get("limit"), CALLS_LIMIT, "limit")
            before = request.query.get("before")
            before_id = _number(before, 0, "before") if before else None
        except BadFilter as exc:
            return web.json_response({"error": str(exc)}, status=400)
        if fmt:
            return await self._export(request, query, fmt)
        limit = max(1, min(limit, MAX_CALLS_LIMIT))
        calls = await self.console.calls.recent(query, limit=limit + 1, before_id=before_id)
        roots: dict[str, str | None] = {}  # run id -> its console conversation (one look-up)
        for call in calls[:limit]:
            if call.platform == PLATFORM and call.run_id and call.run_id not in roots:
                roots[call.run_id] = await self.console.items.run_root(call.run_id)
        return web.json_response(
            {
                "query": query.describe(),
                "calls": [
                    {**call.model_dump(mode="json"), "thread": roots.get(call.run_id)}
                    for call in calls[:limit]
                ],
                "more": len(calls) > limit,
            }
        )

    async def _export(
        self, request: web.Request, query: AuditQuery, fmt: str
    ) -> web.StreamResponse:
        content_type, name = EXPORTS[fmt]
        response = web.StreamResponse(
            headers={
                "Content-Type": f"{content_type}; charset=utf-8",
                "Content-Disposition": f'attachment; filename="{name}"',
                "Cache-Control": "no-store",
                "X-Content-Type-Options": "nosniff",
            }
        )
        await response.prepare(request)
        async for chunk in self.console.calls.export(query, "csv" if fmt == "csv" else "json"):
            await response.write(chunk.encode())
        await response.write_eof()
        return response


def call_query(params: Any) -> AuditQuery:
    """The call log view's filters as the audit's query (direct messages' details hidden);
    `platform` and `workspace` (a Slack team, a Feishu tenant) narrow it to one workspace."""
    filters: dict[str, str | None] = {}
    for name in ("connector", "action", "user", "outcome", "platform", "workspace"):
        value = str(params.get(name, "")).strip()
        if len(value) > MAX_FILTER_CHARS:
            raise BadFilter(f"{name} is at most {MAX_FILTER_CHARS} characters")
        filters[name] = value or None
    if filters["outcome"] is not None and filters["outcome"] not in OUTCOMES:
        raise BadFilter(f"outcome must be one of {', '.join(OUTCOMES)}")
    since = str(params.get("since", "")).strip() or "7d"
    until = str(params.get("until", "")).strip() or None
    try:
        return AuditQuery.window(
            since,
            until,
            hide_direct=True,
            max_calls=None,
            **filters,  # type: ignore[arg-type]
        )
    except ValueError as exc:
        raise BadFilter(str(exc).splitlines()[0]) from None


def _number(value: str | None, default: int, name: str) -> int:
    if value is None or value == "":
        return default
    if not value.isdigit() or len(value) > 12:
        raise BadFilter(f"{name} must be a whole number")
    return int(value)


def _one_per_approval(items: list[Item], *, pending: bool) -> list[Item]:
    """One card per approval (a card routed to several approvers has a copy for each); a
    batch card is its calls, each listed as its own card (those waiting, or those decided)."""
    seen: set[str] = set()
    kept = []
    for item in _calls(items, pending=pending):
        key = str(item.data.get("approval_id") or item.id)
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return kept


def _calls(items: list[Item], *, pending: bool) -> list[Item]:
    """Items with each batch card replaced by its calls (waiting ones, or decided ones), each
    shaped as one call's card (`approval`), in the batch's thread."""
    out: list[Item] = []
    for item in items:
        if item.kind != "approval_batch" or not dataclasses.is_dataclass(item):
            out.append(item)
            continue
        for number, call in enumerate(item.data.get("items") or ()):
            if (call.get("state") == ApprovalStatus.PENDING) != pending:
                continue
            out.append(dataclasses.replace(
                item, id=f"{item.id}.{number}", kind="approval", state=call.get("state"),
                data=call,
            ))  # fmt: skip
    return out
