"""The built-in read-only tool `audit__report`: the agent answers "who approved restarts last
week?" from the call log on every surface.

The observation is the Markdown report. Reports are for `CHATOPS_AUDIT_VIEWERS` only, in chat
as on the direct command: `AuditViewerHook` (a PreToolUse hook for `audit__report`) blocks the
call unless every requester of the run is a viewer, so the model never sees the data. The answer
is posted in the run's thread, so the report covers what may be shown there (`scoped`): in a
channel, that channel's calls (unless every requester may see all channels) and no direct
message's arguments; where the deployment serves several workspaces of the run's platform
(Slack OAuth installs, a Feishu apps file), the run's workspace's calls only, in a direct
message too. Register the tool, `tools.register(audit_report_tool(db, settings))`;
`hooks.chain.serve_chain` puts the hook in its place in the chain.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.approvals.schema import ApprovalPolicy, policy_metadata
from bot.audit.command import Place, can_view, scoped
from bot.audit.render import markdown
from bot.audit.report import AuditQuery, report_for
from bot.chat.workspaces import WorkspacePolicies
from bot.config import Settings
from bot.engine.hooks import HookResult, PreToolUseContext
from bot.engine.tools import Audience, Tool, ToolResult
from bot.storage.database import Database

AUDIT_TOOL_NAME = "audit__report"
TOOL_MAX_CALLS = 50
_TEXT = {"type": "string"}
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "since": {
            **_TEXT,
            "description": "window start: a duration ago (30m, 12h, 7d, 4w) or an ISO time; "
            "default 7d",
        },
        "until": {**_TEXT, "description": "window end: a duration ago or an ISO time; default now"},
        "connector": {**_TEXT, "description": "only this connector, e.g. pagerduty"},
        "action": {**_TEXT, "description": "only this action of the connector, e.g. restart"},
        "user": {**_TEXT, "description": "only calls this user id requested or approved"},
    },
    "additionalProperties": False,
}
DESCRIPTION = (
    "Audit report from the call log: who ran which tool calls, who approved or rejected them, "
    "what failed, per connector and action, for a time window. Use it to answer questions "
    "such as 'who approved restarts last week?'."
)


def _text_arg(args: dict[str, Any], name: str) -> str | None:
    value = args.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string")
    return value.strip() or None


def audit_report_tool(db: Database, settings: Settings) -> Tool:
    """The `audit__report` tool over the bot's database (never needs approval: read-only)."""

    async def invoke_for(audience: Audience, args: dict[str, Any]) -> ToolResult:
        """The answer is posted where the run is: it covers what may be shown there."""
        try:
            query = AuditQuery.window(
                _text_arg(args, "since") or "7d",
                _text_arg(args, "until"),
                connector=_text_arg(args, "connector"),
                action=_text_arg(args, "action"),
                user=_text_arg(args, "user"),
                max_calls=TOOL_MAX_CALLS,
            )
        except ValueError as exc:
            return ToolResult.error(f"Bad arguments for {AUDIT_TOOL_NAME}: {exc}")
        place = Place(
            audience.platform,
            audience.channel,
            direct=audience.direct,
            workspace=audience.workspace,
        )
        query = scoped(query, settings, audience.requesters, place)
        report = await report_for(db, query)
        return ToolResult(content=markdown(report))

    async def invoke(args: dict[str, Any]) -> ToolResult:
        return ToolResult.error(f"{AUDIT_TOOL_NAME} answers only within a run (who asks, where)")

    return Tool(
        name=AUDIT_TOOL_NAME,
        description=DESCRIPTION,
        parameters=PARAMETERS,
        invoke=invoke,
        invoke_for=invoke_for,
        connector="audit",
        action="report",
        metadata=policy_metadata(ApprovalPolicy(approval="never", mutating=False, risk="low")),
    )


class AuditViewerHook:
    """PreToolUse: only `CHATOPS_AUDIT_VIEWERS` (or the run's workspace's `audit_viewers`) may
    have the agent read the audit report."""

    def __init__(
        self,
        settings: Settings,
        *,
        workspaces: WorkspacePolicies | None = None,
        place_of: Callable[[PreToolUseContext[Any]], tuple[str, str] | None] = lambda ctx: None,
    ) -> None:
        """`place_of`: the (platform, workspace) a call's run is in (None: not known, the
        process-wide list applies); the hooks' wiring reads it from the run's deps."""
        self._settings = settings
        self._workspaces = workspaces
        self._place_of = place_of

    async def __call__(self, ctx: PreToolUseContext[Any]) -> HookResult:
        if ctx.tool.name != AUDIT_TOOL_NAME:
            return HookResult.allow()
        # everyone whose message the model has read may have asked for the report: all of them
        # must be viewers (nobody known: nobody is)
        place = self._place_of(ctx)
        if ctx.requesters and all(
            can_view(self._settings, who, place=place, workspaces=self._workspaces)
            for who in ctx.requesters
        ):
            return HookResult.allow()
        return HookResult.block(
            "Someone in this request is not allowed to see audit reports "
            "(CHATOPS_AUDIT_VIEWERS). Tell them so; do not try other tools to get the same "
            "information."
        )
