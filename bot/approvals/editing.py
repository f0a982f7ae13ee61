"""The broker's desk for edits: the form of a pending approval, a submission checked, an edit
applied, and a request for changes.

An edit is checked twice: when the approver submits the form (a surface shows the problems
inside it, nothing is decided) and again when the stored decision is applied (the call may have
changed meanwhile). Checked means: the arguments parse, the tool's schema accepts them, no
hidden secret was edited in part, the call still is the one the approver edited, and the
policy resolved on the edited arguments lets this approver approve them
(`bot.approvals.edits.policy_refusal`), with the approver groups and approvers of the card's
workspace, as a click there is judged. Applying it makes the approval name the edited call
(its own fingerprint: a quorum's earlier approvals no longer count) and records the editor's
approval of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bot.approvals import authority
from bot.approvals.cards import card_view, requesters_of
from bot.approvals.edits import masked_edits, policy_refusal
from bot.approvals.forms import form_fields, parse_edit, schema_problems
from bot.approvals.routing import CardKeeper
from bot.approvals.schema import CallFacts
from bot.approvals.settling import Settler
from bot.chat.decisions import DecisionResult
from bot.chat.forms import GENERAL, EditCheck, EditForm
from bot.clock import Clock
from bot.config import Settings
from bot.engine.tools import Tool, fingerprint
from bot.storage import approval_edits
from bot.storage.database import Database
from bot.storage.models import Approval, ApprovalDecision

ToolLookup = Callable[[str], Tool | None]
OUTDATED = (
    "The arguments of this call were changed by someone else while you edited them; open the "
    "form again to edit the call as it stands."
)


def _refused(message: str) -> DecisionResult:
    return DecisionResult("edit_refused", message)


class EditDesk:
    """Owned by the broker; shares its database, settings, clock, settler and cards."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        *,
        tools: ToolLookup,
        clock: Clock,
        settler: Settler,
        cards: CardKeeper,
        approvers_of: authority.ApproversOf,
    ) -> None:
        """`tools`: the tool of a name (its schema and policy), None when this process has
        none by that name (then nothing can be edited); `approvers_of`: who may decide in an
        approval's workspace (an edit is judged with its groups and approvers, as a click)."""
        self._db = db
        self._settings = settings
        self._tools = tools
        self._clock = clock
        self._settler = settler
        self._cards = cards
        self._approvers_of = approvers_of

    def form(self, row: Approval) -> EditForm | DecisionResult:
        """The form over the call as it stands, or why it cannot be edited here."""
        tool = self._tools(row.tool_name)
        if tool is None:
            return _refused(f"`{row.tool_name}` is not loaded here, so its call cannot be edited.")
        more = row.min_approvals - 1
        note = "Your approval counts for the edited call."
        if more > 0:
            note += (
                f" It needs {more} more approval(s) of the edited call: earlier ones no "
                "longer count."
            )
        return EditForm(
            approval_id=row.id,
            tool_name=row.tool_name,
            fields=form_fields(tool.argument_schema, row.arguments),
            fingerprint=row.fingerprint,
            title=f"Edit, then approve: {row.connector}.{row.action}" if row.connector
            else f"Edit, then approve: {row.tool_name}",
            note=note,
        )  # fmt: skip

    async def check(
        self, row: Approval, user_id: str, values: Mapping[str, str | None], base: str
    ) -> EditCheck:
        """A form's submission (text per field) parsed and judged."""
        tool = self._tools(row.tool_name)
        if tool is None:
            return EditCheck(errors={GENERAL: "this tool is not loaded here"})
        parsed = parse_edit(tool.argument_schema, row.arguments, values)
        if not parsed.ok or parsed.arguments is None:
            return parsed
        return await self.judge(row, user_id, dict(parsed.arguments), base)

    async def judge(
        self, row: Approval, user_id: str, arguments: dict[str, Any], base: str
    ) -> EditCheck:
        """Whether `user_id` may approve the call with `arguments` (see the module docstring)."""
        tool = self._tools(row.tool_name)
        if tool is None:
            return EditCheck(errors={GENERAL: "this tool is not loaded here"})
        if base != row.fingerprint:
            return EditCheck(errors={GENERAL: OUTDATED})
        problems = schema_problems(tool.argument_schema, arguments)
        for name in masked_edits(arguments, row.arguments):
            problems.setdefault(
                name, "a hidden secret cannot be edited in part: keep it as shown or replace it"
            )
        if problems:
            return EditCheck(errors=problems)
        conversation = await self._db.run(approval_edits.conversation_of, row.conversation_id)
        facts = CallFacts(
            args=arguments,
            requesters=tuple(requesters_of(row)),
            channel=conversation.channel if conversation is not None else "",
            platform=conversation.platform if conversation is not None else "",
            now=self._clock.now(),
            zone=self._settings.chatops_timezone,
        )
        approvers = self._approvers_of(row)
        refused = policy_refusal(row, tool, arguments, user_id, facts=facts,
                                 groups=approvers.groups, within=approvers.within)  # fmt: skip
        if refused:
            return EditCheck(errors={GENERAL: refused})
        return EditCheck(arguments=arguments)

    async def approve_edited(
        self, row: Approval, user_id: str, reason: str, arguments: dict[str, Any], base: str
    ) -> DecisionResult:
        """Apply a stored edit: judged again, then the approval names the edited call and the
        editor's approval of it is counted."""
        checked = await self.judge(row, user_id, arguments, base)
        if not checked.ok:
            return _refused("Your edit was not applied: " + checked.message())
        decision = ApprovalDecision(
            approval_id=row.id, user_id=user_id, decision="approve", reason=reason,
            fingerprint=fingerprint(row.tool_name, arguments),
        )  # fmt: skip
        edited, won, approvers, fresh = await self._db.run(
            approval_edits.approve_edited, decision, base_fingerprint=base, arguments=arguments
        )
        fresh = fresh or row
        if not edited:
            if fresh.status != row.status:
                return authority.already(fresh)
            return _refused(OUTDATED)
        if len(approvers) < fresh.min_approvals:
            view = card_view(fresh, approvals_so_far=len(approvers))
            await self._cards.update(fresh, view=view)
            more = fresh.min_approvals - len(approvers)
            return DecisionResult(
                "recorded",
                f"Your edit is recorded and you approved it; {more} more approval(s) of the "
                "edited call needed.",
                view,
            )
        if not won:
            return authority.already(fresh)
        await self._settler.finish(row.id, changed=True, row=fresh)
        return DecisionResult(
            "decided", "Approved as you edited it. The edited call will run now.", card_view(fresh)
        )

    async def request_changes(self, row: Approval, user_id: str, guidance: str) -> DecisionResult:
        """The call does not run; the agent reads `guidance` and may propose another call."""
        if not guidance.strip():
            return _refused("Write what the agent should do instead.")
        won, fresh = await self._db.run(
            approval_edits.request_changes, row.id, user_id, guidance.strip()
        )
        fresh = fresh or row
        if not won:
            return authority.already(fresh)
        await self._settler.finish(row.id, changed=True, row=fresh)
        return DecisionResult(
            "decided", "Changes requested. The agent will read what you wrote.", card_view(fresh)
        )
