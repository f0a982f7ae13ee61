"""ApprovalGateHook (PreToolUse): a risky tool call waits here until a human decides.

The policy is data on the tool (`policy_of(tool)`); its manifest rules pick the policy of each call
(`bot.approvals.rules.resolve_for`; a `deny` blocks at once, nobody is asked). The gate records
the approval (unless a thread grant covers the call: same rule, the granter still one of its
approvers, `bot.approvals.grants`), has the broker post the card, and waits on the broker's
future; rules read the broker's clock as `time`. Then it allows the
call (with an `ApprovalNote` the call log records) or blocks it with an observation the model
can act on. It finds the run's thread and event stream in `RunContext.deps` (`RunDeps`).
Anything it cannot do (no thread, no surface) blocks: the gate fails closed.
"""

from __future__ import annotations

from dataclasses import replace

from opentelemetry.trace import NoOpTracer, Tracer

from bot.approvals.broker import ApprovalBroker, ApprovalOutcome, ApprovalRequest
from bot.approvals.edits import describe_edit, unmask
from bot.approvals.rules import changes_requested, denial, rejection, resolve_for
from bot.approvals.schema import ApprovalPolicy
from bot.chat.events import ApprovalEnded, ApprovalLimited, ApprovalWaiting
from bot.engine.events import emit_safely
from bot.engine.hooks import HookResult, PostToolUseContext, PreToolUseContext
from bot.engine.notes import ApprovalNote
from bot.engine.tools import fingerprint
from bot.observability.tracing import (
    ACTION,
    APPROVAL_ID,
    APPROVAL_RULE,
    CONNECTOR,
    DECISION,
    SPAN_APPROVAL,
)
from bot.redaction import Redactor, mask_known
from bot.runs.deps import RunDeps, run_deps
from bot.statuses import ApprovalStatus
from bot.storage.limits import PersonalLimitReached
from hooks.call_log import known_secrets


class ApprovalGateHook:
    """Ask a human before a call whose policy requires approval; fail closed."""

    name = "approval_gate"

    def __init__(
        self,
        *,
        broker: ApprovalBroker,
        redactor: Redactor | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        """`broker`: records approvals, posts cards and wakes this gate when someone decides;
        `redactor`: every secret the process knows, masked on cards besides the tool's;
        `tracer`: an "approval.wait" span per wait (tracing on)."""
        self._broker = broker
        self._redactor = redactor
        self._tracer = tracer if tracer is not None else NoOpTracer()

    async def __call__(self, ctx: PreToolUseContext[RunDeps]) -> HookResult:
        policy = resolve_for(ctx, self._broker.timezone, now=self._broker.now()).policy
        rule = policy.rule
        if policy.denied:
            note = ApprovalNote(status="denied", policy_rule=rule)
            return HookResult.block(denial(ctx.tool.name, policy), note=note)
        if not policy.requires_approval:
            return HookResult.allow(note=ApprovalNote(status="not_required", policy_rule=rule))
        return await self._ask(ctx, policy)

    async def _ask(self, ctx: PreToolUseContext[RunDeps], policy: ApprovalPolicy) -> HookResult:
        """Find or open the approval (or a grant covering the call) and wait for it."""
        rule = policy.rule
        deps = run_deps(ctx.run)
        conversation_id = ctx.run.conversation_id
        if deps is None or not ctx.run.run_id or conversation_id is None:
            return HookResult.block(
                f"`{ctx.tool.name}` needs a human approval, but this run has no chat thread to "
                "ask in, so the call did not run.",
                note=ApprovalNote(status="blocked", policy_rule=rule),
            )
        grant_fp = ""
        if policy.grants_allowed:
            grant_fp = policy.grant_fingerprint(ctx.tool.name, ctx.args)
        existing, grant = await self._broker.lookup(
            ctx.run.run_id,
            ctx.tool_call_id,
            conversation_id,
            ctx.tool.name,
            policy=policy,
            grant_fingerprint=grant_fp,
            requesters=ctx.requesters,
            thread=deps.thread,
        )
        if existing is None:
            if grant is not None:  # bound like an approval: a later rewrite blocks the call
                return HookResult.allow(
                    note=ApprovalNote(
                        status="thread_grant",
                        approval_id=grant.approval_id,
                        grant_id=grant.id,
                        approvers=(grant.granted_by,),
                        policy_rule=rule,
                        bound_fingerprint=ctx.fingerprint,
                    )
                )
        elif (existing.model_fingerprint or existing.fingerprint) != ctx.fingerprint:
            return HookResult.block(
                f"The arguments of `{ctx.tool.name}` differ from the ones submitted for approval, "
                "so the call did not run.",
                note=ApprovalNote(status="blocked", approval_id=existing.id, policy_rule=rule),
            )
        request = self._request(ctx, policy, conversation_id, grant_fp)
        # from the card on, the time is a person's: the run's time budget does not count it
        span_attributes = {
            CONNECTOR: ctx.tool.connector, ACTION: ctx.tool.action or ctx.tool.name,
            APPROVAL_RULE: rule or "", DECISION: "pending",
        }  # fmt: skip
        with ctx.waiting_for_human(), self._tracer.start_as_current_span(
            SPAN_APPROVAL, attributes=span_attributes,
            record_exception=False, set_status_on_exception=False,
        ) as span:  # fmt: skip
            try:
                approval = await self._broker.open(request, deps.thread)
            except PersonalLimitReached as full:
                await emit_safely(
                    deps.emit, ApprovalLimited(ctx.tool.name, full.person, full.limit)
                )
                return HookResult.block(
                    approval_limit_observation(ctx.tool.name, full.limit),
                    note=ApprovalNote(status="blocked", policy_rule=rule),
                )
            waiting = ApprovalWaiting(ctx.tool_call_id, ctx.tool.name, approval.id)
            await emit_safely(deps.emit, waiting)
            span.set_attribute(APPROVAL_ID, approval.id)
            outcome = await self._broker.wait(approval)
            span.set_attribute(DECISION, str(outcome.status))
        await emit_safely(
            deps.emit,
            ApprovalEnded(
                ctx.tool_call_id, ctx.tool.name, approval.id, outcome.status, outcome.decided_by
            ),
        )
        timeout_s = self._broker.timeout_for(policy.timeout_s)
        result = gate_result(ctx.tool.name, outcome, timeout_s=timeout_s)
        note = result.note if isinstance(result.note, ApprovalNote) else None
        if note is not None:
            note = replace(note, policy_rule=rule)
            if result.allowed and outcome.arguments is not None:
                return edited_call(ctx, outcome, note)
            if result.allowed:  # approved for these arguments only: a later rewrite blocks
                note = replace(note, bound_fingerprint=ctx.fingerprint)
        return replace(result, note=note)

    def _request(
        self,
        ctx: PreToolUseContext[RunDeps],
        policy: ApprovalPolicy,
        conversation_id: int,
        grant_fp: str,
    ) -> ApprovalRequest:
        """What the card shows: the exact arguments with only known secrets masked (a value
        that merely looks secret is shown, and the card marks it)."""
        secrets = known_secrets(ctx.tool, self._redactor)
        return ApprovalRequest(
            run_id=ctx.run.run_id,
            conversation_id=conversation_id,
            tool_call_id=ctx.tool_call_id,
            tool_name=ctx.tool.name,
            connector=ctx.tool.connector,
            action=ctx.tool.action or ctx.tool.name,
            arguments=mask_known(dict(ctx.args), secrets),
            fingerprint=ctx.fingerprint,
            reason=mask_known(ctx.reasoning, secrets),
            risk=policy.risk,
            requester=ctx.run.requester or (ctx.requesters[0] if ctx.requesters else ""),
            requesters=ctx.requesters,
            approvers=tuple(policy.approvers),
            min_approvals=policy.min_approvals,
            allow_self_approval=policy.allow_self_approval,
            timeout_s=policy.timeout_s,
            grant_fingerprint=grant_fp,
            grant_ttl_s=policy.grant_ttl_s if grant_fp else 0.0,
            grant_vary=policy.grant_vary if grant_fp else (),
            policy_rule=policy.rule,
            policy_reason=policy.reason,
            on_timeout=policy.on_timeout,
            route=policy.route,
            escalate=tuple(
                {"after_s": t.after_s, "approvers": list(t.approvers), "notify": t.notify}
                for t in policy.escalate
            ),
            batch_id=ctx.batch,
        )


def edited_call(
    ctx: PreToolUseContext[RunDeps], outcome: ApprovalOutcome, note: ApprovalNote
) -> HookResult:
    """An approver edited the call and approved the edit: the edited call runs (the secrets
    the card hid put back where the edit kept them), bound to its own fingerprint, and the
    note carries what changed, for the call log and the model."""
    shown = outcome.model_arguments or {}
    edited = outcome.arguments or {}
    arguments = unmask(edited, shown, dict(ctx.args))
    note = replace(
        note,
        bound_fingerprint=fingerprint(ctx.tool.name, arguments),
        edited_by=outcome.edited_by,
        model_arguments=dict(ctx.args),
        edit_diff=describe_edit(shown, edited),
    )
    return HookResult.rewrite(args=arguments, note=note)


class EditNoticeHook:
    """PostToolUse: the model reads that its call was edited, and how, before the result (so
    it does not "correct" the call back)."""

    name = "edit_notice"

    async def __call__(self, ctx: PostToolUseContext[object]) -> HookResult:
        note = ctx.notes.get(ApprovalNote)
        if note is None or not note.edited_by or ctx.outcome == "blocked":
            return HookResult.allow()
        notice = edit_notice(ctx.tool.name, note.edited_by, note.edit_diff)
        return HookResult.rewrite(
            result=replace(ctx.result, content=f"{notice}\n\n{ctx.result.content}")
        )


def edit_notice(tool_name: str, by: str, diff: str) -> str:
    """What the model is told about a call an approver edited before approving it."""
    return (
        f"Note: approver {by} EDITED your call to `{tool_name}` before approving it; it ran "
        f"with the edited arguments, not yours. Changes:\n{diff or '(none)'}\nThe result "
        "below is of the edited call. Do not change the arguments back."
    )


def approval_limit_observation(tool_name: str, limit: int) -> str:
    """What the model reads when the requester's pending approvals are at the cap."""
    return (
        f"`{tool_name}` needs a human approval, but the person who asked already has {limit} "
        "approvals waiting (the most one person may have at once), so it was NOT sent for "
        "approval and did not run. Do not retry it now; tell the user that it needs the "
        "waiting approvals to be decided first, and that they can then ask again."
    )


def gate_result(tool_name: str, outcome: ApprovalOutcome, *, timeout_s: float | None) -> HookResult:
    """Map how the approval ended to allow / block, with the observation the model reads."""
    decided = outcome.status in (
        ApprovalStatus.APPROVED,
        ApprovalStatus.REJECTED,
        ApprovalStatus.CHANGES_REQUESTED,
    )
    note = ApprovalNote(
        status=outcome.status, approval_id=outcome.approval_id,
        approvers=tuple(outcome.decided_by),
        # a person's words only: a timeout's or a cancellation's reason is the bot's
        comment=outcome.reason if decided and outcome.decided_by else "",
    )  # fmt: skip
    who = ", ".join(outcome.decided_by) or "an approver"
    if outcome.status == ApprovalStatus.APPROVED:
        return HookResult.allow(note=note)
    if outcome.status == ApprovalStatus.REJECTED and not outcome.decided_by:
        return HookResult.block(
            f"The approval request for `{tool_name}` TIMED OUT and its policy treats a timeout "
            "as a rejection (on_timeout: reject). It did not run; tell the user it needs an "
            "approver's decision.",
            note=note,
        )
    if outcome.status == ApprovalStatus.REJECTED:
        return HookResult.block(rejection(tool_name, by=who, reason=outcome.reason), note=note)
    if outcome.status == ApprovalStatus.CHANGES_REQUESTED:
        return HookResult.block(
            changes_requested(tool_name, by=who, guidance=outcome.reason), note=note
        )
    if outcome.status == ApprovalStatus.EXPIRED:
        waited = f" after {timeout_s:g} s" if timeout_s else ""
        return HookResult.block(
            f"The approval request for `{tool_name}` TIMED OUT{waited}: nobody answered. This is "
            "not a rejection. The call did not run; tell the user it needs an approver's "
            "decision and can be requested again.",
            note=note,
        )
    return HookResult.block(
        f"The approval request for `{tool_name}` was {outcome.status}; the call did not run.",
        note=note,
    )
