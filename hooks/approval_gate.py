"""ApprovalGateHook (PreToolUse): a risky tool call waits here until a human decides.

The policy is data on the tool (`tool.policy`); its manifest rules pick the policy of each call
(`bot.approvals.rules.resolve_for`; a `deny` blocks at once, nobody is asked). The gate records
the approval, has the broker post the card, and waits on the broker's future. Then it allows the
call (with an `ApprovalNote` the call log records) or blocks it with an observation the model
can act on. It finds the run's thread and event stream in `RunContext.deps` (`RunDeps`).
Anything it cannot do (no thread, no surface) blocks: the gate fails closed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sqlalchemy import Engine

from bot.approvals.broker import ApprovalBroker, ApprovalOutcome, ApprovalRequest
from bot.approvals.rules import denial, rejection, resolve_for
from bot.engine.events import emit_safely
from bot.engine.hooks import HookRegistry, HookResult, PreToolUseContext
from bot.engine.notes import ApprovalNote
from bot.engine.tools import ApprovalPolicy
from bot.redaction import mask_known
from bot.runs.deps import RunDeps, run_deps
from bot.runs.types import ApprovalEnded, ApprovalWaiting
from bot.storage.database import Database
from hooks.call_log import CallLogHook, CallReplayHook, CallStartHook
from hooks.guards import RateLimitGuard, ReadOnlyGuard, TruncateResultGuard

CALL_START_PRIORITY = 1000  # after every other PreToolUse hook: the row means "it went out"


class ApprovalGateHook:
    """Ask a human before a call whose policy requires approval; fail closed."""

    name = "approval_gate"

    def __init__(self, *, broker: ApprovalBroker, known_secrets: Sequence[str] = ()) -> None:
        """`broker`: records approvals, posts cards and wakes this gate when someone decides;
        `known_secrets`: the platform's own tokens, masked on cards besides the tool's secrets."""
        self._broker = broker
        self._known_secrets = tuple(known_secrets)

    async def __call__(self, ctx: PreToolUseContext[RunDeps]) -> HookResult:
        policy = resolve_for(ctx, self._broker.timezone).policy
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
            grant_fingerprint=grant_fp,
            requesters=ctx.requesters,
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
        elif existing.fingerprint != ctx.fingerprint:
            return HookResult.block(
                f"The arguments of `{ctx.tool.name}` differ from the ones submitted for approval, "
                "so the call did not run.",
                note=ApprovalNote(status="blocked", approval_id=existing.id, policy_rule=rule),
            )
        request = self._request(ctx, policy, conversation_id, grant_fp)
        # from the card on, the time is a person's: the run's time budget does not count it
        with ctx.waiting_for_human():
            approval = await self._broker.open(request, deps.thread)
            waiting = ApprovalWaiting(ctx.tool_call_id, ctx.tool.name, approval.id)
            await emit_safely(deps.emit, waiting)
            outcome = await self._broker.wait(approval)
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
        secrets = [*ctx.tool.secret_values(), *self._known_secrets]
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
        )


def gate_result(tool_name: str, outcome: ApprovalOutcome, *, timeout_s: float | None) -> HookResult:
    """Map how the approval ended to allow / block, with the observation the model reads."""
    note = ApprovalNote(
        status=outcome.status, approval_id=outcome.approval_id, approvers=tuple(outcome.decided_by)
    )
    who = ", ".join(outcome.decided_by) or "an approver"
    if outcome.status == "approved":
        return HookResult.allow(note=note)
    if outcome.status == "rejected" and not outcome.decided_by:
        return HookResult.block(
            f"The approval request for `{tool_name}` TIMED OUT and its policy treats a timeout "
            "as a rejection (on_timeout: reject). It did not run; tell the user it needs an "
            "approver's decision.",
            note=note,
        )
    if outcome.status == "rejected":
        return HookResult.block(rejection(tool_name, by=who, reason=outcome.reason), note=note)
    if outcome.status == "expired":
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


def install_runtime_hooks(
    registry: HookRegistry,
    *,
    broker: ApprovalBroker,
    db: Database | Engine,
    known_secrets: Sequence[str] = (),
    read_only: ReadOnlyGuard | None = None,
    rate_limit: RateLimitGuard | None = None,
    truncate: TruncateResultGuard | None = None,
) -> None:
    """Register the runtime's hooks in their order (lower priority runs first).

    PreToolUse: call_replay (0: a logged call is never re-run), read_only (10), rate_limit (20),
    approval_gate (50), call_log_start (last: the write-ahead row, once every check allowed the
    call). PostToolUse: truncate_result (10), call_log (90: completes the row with what the
    model saw).
    """
    registry.add_pre(CallReplayHook(db=db), name="call_replay", priority=0)
    if read_only is not None:
        registry.add_pre(read_only, name="read_only", priority=10)
    if rate_limit is not None:
        registry.add_pre(rate_limit, name="rate_limit", priority=20)
    gate = ApprovalGateHook(broker=broker, known_secrets=known_secrets)
    registry.add_pre(gate, name="approval_gate", priority=50)
    registry.add_pre(CallStartHook(db=db), name="call_log_start", priority=CALL_START_PRIORITY)
    if truncate is not None:
        registry.add_post(truncate, name="truncate_result", priority=10)
    registry.add_post(CallLogHook(db=db), name="call_log", priority=90)
