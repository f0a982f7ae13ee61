"""ApprovalBroker: create, wait, decide, authorise, expire and escalate approvals.

The approval row is the truth; each local waiter also holds one `asyncio.Future`, resolved the
moment a decision lands (no polling). `decide()` changes only a still-pending row with a
conditional UPDATE, so two clicks at once make exactly one decision. Approvers are checked here,
server-side, from the row and the configured groups, never from anything a card carried.
What follows each change of a row (its waiter, a wake-up, the time to decision, its cards) is
`bot.approvals.settling`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timedelta

from bot.approvals import authority, batches, grants
from bot.approvals.cards import card_ref, card_view
from bot.approvals.editing import EditDesk, ToolLookup
from bot.approvals.escalation import Escalator
from bot.approvals.reminders import Reminders
from bot.approvals.routing import CardKeeper
from bot.approvals.schema import ApprovalPolicy
from bot.approvals.settling import Settler
from bot.approvals.types import ApprovalOutcome, ApprovalRequest
from bot.approvals.waiters import Waiters
from bot.chat.decisions import CardClick, Decision, DecisionResult
from bot.chat.forms import GENERAL, EditCheck, EditForm
from bot.chat.surface import Surface
from bot.chat.threads import ThreadRef
from bot.chat.views import ApprovalCardView
from bot.chat.waiting import WaitingApproval
from bot.chat.workspaces import WorkspacePolicies
from bot.clock import Clock, as_utc
from bot.config import Settings
from bot.observability.context import bound
from bot.observability.metrics import Metrics
from bot.observability.trace_config import trace_id_of
from bot.statuses import ApprovalStatus
from bot.storage import approval_inbox, approval_queries
from bot.storage import queries as queries
from bot.storage.database import Database
from bot.storage.models import Approval, ApprovalDecision, ApprovalGrant
from bot.storage.wakeups import LoopbackWakeups, Wakeups

log = logging.getLogger(__name__)

INBOX_LIMIT = 100  # approvals one person's list shows at most (oldest first)


class ApprovalBroker:
    """One per app. Surfaces are registered by platform so cards can be posted and updated."""

    def __init__(
        self,
        *,
        db: Database,
        settings: Settings,
        clock: Clock | None = None,
        wakeups: Wakeups | None = None,
        metrics: Metrics | None = None,
        tools: ToolLookup | None = None,
        workspaces: WorkspacePolicies | None = None,
    ) -> None:
        """`db`: the app's database; `settings`: timeouts, reminder delay and
        approver groups (`CHATOPS_APPROVAL_TIMEOUT_S`, `..._ESCALATE_AFTER_S`, `..._REMIND_AT`,
        `..._GROUPS`);
        `clock`: the time deadlines and escalation tiers are read in (tests move it);
        `wakeups`: how the process whose run waits hears of a decision made here;
        `metrics`: the runtime's (time to decision, counted where a decision is won);
        `tools`: the tool of a name (an edit is checked against its schema and policy; none:
        no call can be edited);
        `workspaces`: who may decide in each workspace (`CHATOPS_WORKSPACES_FILE`: its
        approvers narrow a row's, its groups replace `CHATOPS_APPROVER_GROUPS` there)."""
        self._db = db
        self._workspaces = workspaces or WorkspacePolicies()
        self._settings = settings
        self._clock = clock or Clock()
        self._cards = CardKeeper(self._db, approvers_of=self.approvers_of)
        self._escalator = Escalator(self._db, self._cards, self.approvers_of)
        self._reminders = Reminders(self._db, self._cards, self.approvers_of,
                                    share=settings.chatops_approval_remind_at)  # fmt: skip
        self._waiters = Waiters()
        self._asked: set[str] = set()  # runs that asked for an approval here, until they end
        self._settler = Settler(
            self._db, waiters=self._waiters, cards=self._cards,
            wakeups=wakeups or LoopbackWakeups(), clock=self._clock, metrics=metrics,
        )  # fmt: skip
        self._batches = batches.BatchDesk(db, approvers_of=self.approvers_of)
        self._edits = EditDesk(
            db, settings, tools=tools or (lambda name: None), clock=self._clock,
            settler=self._settler, cards=self._cards, approvers_of=self.approvers_of,
        )  # fmt: skip

    async def close(self) -> None:
        """Shutdown, after the runs were cancelled: card posts still in flight finish."""
        await self._cards.close()

    def register_surface(self, surface: Surface) -> None:
        self._cards.register(surface)

    def timeout_for(self, timeout_s: float | None) -> float:
        """A per-action timeout, or `CHATOPS_APPROVAL_TIMEOUT_S`."""
        return timeout_s or self._settings.chatops_approval_timeout_s

    @property
    def timezone(self) -> str:
        """The zone manifest rules read the time in (`CHATOPS_TIMEZONE`)."""
        return self._settings.chatops_timezone

    @property
    def waiting(self) -> int:
        """How many approvals have a local waiter right now."""
        return len(self._waiters)

    # --- the gate's side ---------------------------------------------------------------------

    async def find(self, run_id: str, tool_call_id: str) -> Approval | None:
        return await self._db.run(approval_queries.find_approval, run_id, tool_call_id)

    def now(self) -> datetime:
        """The broker's time: deadlines, and the `time` manifest rules read (tests move it)."""
        return self._clock.now()

    async def lookup(
        self,
        run_id: str,
        tool_call_id: str,
        conversation_id: int,
        tool_name: str,
        *,
        policy: ApprovalPolicy,
        grant_fingerprint: str,
        requesters: tuple[str, ...],
        thread: ThreadRef,
    ) -> tuple[Approval | None, ApprovalGrant | None]:
        """The approval of this tool call if one exists, else a live grant that covers it
        under `policy`, the call's resolved now (`bot.approvals.grants.judge`), whose granter
        may still decide in the workspace of `thread` (the run's, where its cards go)."""
        existing, candidates = await self._db.run(
            approval_queries.approval_lookup,
            run_id,
            tool_call_id,
            conversation_id,
            tool_name,
            grant_fingerprint=grant_fingerprint,
        )
        approvers = self.approvers_in(thread.platform, thread.workspace)
        grant = grants.first_covering(
            ((row, grants.terms_of(row)) for row in candidates),
            policy,
            fingerprint=grant_fingerprint,
            requesters=requesters,
            groups=approvers.groups,
            within=approvers.within,
        )
        return existing, grant

    async def open(self, request: ApprovalRequest, thread: ThreadRef) -> Approval:
        """Record a pending approval and post its card, or re-attach to the existing one.

        A resumed run asks again for the same (run, tool call): it gets the stored row, and the
        card is posted only if it never was (a crash between the insert and the post).
        `PersonalLimitReached` when the requester already has as many approvals pending as one
        person may (`CHATOPS_MAX_PENDING_APPROVALS_PER_USER`): nothing is recorded or posted.
        """
        self._asked.add(request.run_id)  # first: its end looks for what is pending
        timeout = self.timeout_for(request.timeout_s)
        now = self._clock.now()
        row = approval_queries.new_approval(
            **request.row_values(),
            created_at=now,
            card_platform=thread.platform,  # where the card goes: decisions come from there
            card_workspace=thread.workspace,  # whose approvers receive and decide it
            expires_at=now + timedelta(seconds=timeout),
        )
        key = (request.run_id, request.tool_call_id)
        self._waiters.future(key)  # registered first, so no decision can slip past the waiter
        # the run is `waiting_approval` before the card exists: a crash from here on resumes it
        try:
            approval, _created = await self._db.run(
                approval_queries.open_approval, row,
                per_person=self._settings.chatops_max_pending_approvals_per_user,
            )  # fmt: skip
        except BaseException:
            self._waiters.forget(key)
            raise
        if approval.status == ApprovalStatus.PENDING and approval.card_message_id is None:
            log.info("approval %s asked: %s, approvers %s", approval.id, approval.tool_name,
                     ", ".join(approval.approvers) or "anyone")  # fmt: skip
            posting = self._cards.track(self._post_card(approval, thread, request))
            try:
                approval = await asyncio.shield(posting)
            except asyncio.CancelledError:
                # the run was cancelled mid-post: let the post land and record where the card
                # is, so the cancellation can still be shown on it
                with contextlib.suppress(Exception):
                    await posting
                raise
        return approval

    async def _post_card(
        self, approval: Approval, thread: ThreadRef, request: ApprovalRequest
    ) -> Approval:
        """Post the card and record where it lives; a card nobody can see ends the approval."""
        key = (request.run_id, request.tool_call_id)
        try:
            dm_users = sorted(self.approvers_of(approval).deciders(approval.approvers) or ())
            return await self._cards.post(approval, thread, dm_users)
        except Exception:
            # nobody can see it, so nobody can answer it: end it now (the gate fails closed)
            self._waiters.forget(key)
            await self._db.run(
                approval_queries.conclude_approval,
                approval.id,
                ApprovalStatus.CANCELLED,
                decided_by=[],
                reason="the approval card could not be posted",
            )
            await self._db.run(queries.reopen_run_if_unblocked, request.run_id)
            raise

    async def wait(self, approval: Approval | str) -> ApprovalOutcome:
        """Wait for the decision, reminding or escalating, and expiring at the row's deadline.

        `open()` put the run in `waiting_approval` (so a restart resumes rather than fails it);
        when its last local waiter is answered, the run goes back to `running`.
        """
        row = (
            await self._db.run(approval_queries.get_approval, approval)
            if isinstance(approval, str)
            else approval
        )
        if row is None:
            raise LookupError(f"approval {approval} not found")
        key = (row.run_id, row.tool_call_id)
        future = self._waiters.future(key)  # usually made by `open()`, before any click
        self._waiters.begin(row.run_id)
        try:
            outcome = await self._wait_row(row, future)
        finally:
            # cancelled (shutdown or run cancel): the run keeps its status for whoever handles
            # it; answered: it goes back to running after its last wait
            last = self._waiters.finish(key)
        if last:
            await self._db.run(queries.reopen_run_if_unblocked, row.run_id)
        return outcome

    async def _wait_row(
        self, row: Approval, future: asyncio.Future[ApprovalOutcome]
    ) -> ApprovalOutcome:
        if row.status != ApprovalStatus.PENDING:
            return authority.outcome(row)
        remind_after_s = self._settings.chatops_approval_escalate_after_s
        return await self._escalator.wait(
            row, future, self._clock, remind_after_s=remind_after_s,
            expire=self._settler.expire, reminders=self._reminders,
        )  # fmt: skip

    async def cancel_run(
        self, run_id: str, *, reason: str = "run cancelled", held_here: bool = False
    ) -> None:
        """The run ended: its pending approvals end as cancelled, cards updated. `held_here`:
        the run was started by this process and never taken over (lease epoch 0), so only an
        approval asked here can be pending, and a run that asked none is not looked up."""
        asked_here = run_id in self._asked
        self._asked.discard(run_id)
        if asked_here or not held_here:
            await self._settler.cancel_run(run_id, reason=reason)

    async def wake(self, approval_id: str) -> None:
        """A wake-up from another process: the approval was decided there."""
        row = await self._db.run(approval_queries.get_approval, approval_id)
        if row is not None:
            self._waiters.settle(row)

    async def poll(self) -> None:
        """The safety net under wake-ups: waiters whose approval was decided anywhere return."""
        run_ids = self._waiters.waiting_runs()
        if run_ids:
            for row in await self._db.run(approval_queries.decided_approvals_of_runs, run_ids):
                self._waiters.settle(row)

    # --- the human's side --------------------------------------------------------------------

    def approvers_in(self, platform: str, workspace: str) -> authority.Approvers:
        """Who may decide in this workspace (`CHATOPS_WORKSPACES_FILE`: its approvers narrow
        an approval's, its groups replace `CHATOPS_APPROVER_GROUPS` there)."""
        policy = self._workspaces.for_workspace(platform, workspace)
        groups = policy.groups(self._settings.chatops_approver_groups)
        return authority.Approvers(groups, policy.approvers)

    def approvers_of(self, row: Approval) -> authority.Approvers:
        """Who may decide in the workspace the approval's card is in: who gets it by direct
        message, a reminder of it, or an entry for it in their inbox."""
        return self.approvers_in(row.card_platform or "", row.card_workspace or "")

    async def run_approvers(self, run_id: str) -> set[str]:
        """Who may approve (or did decide) any of a run's approvals: they may stop the run."""
        people: set[str] = set()
        for row in await self._db.run(approval_queries.approvals_for_run, run_id):
            named = self.approvers_of(row).deciders(row.approvers) or set()
            people |= named | set(row.decided_by)
        return people

    async def decide(
        self,
        approval_id: str,
        user_id: str,
        decision: Decision,
        reason: str = "",
        *,
        platform: str,
        grantees: list[str] | None = None,
        click: CardClick | None = None,
        arguments: dict | None = None,
        fingerprint: str = "",
    ) -> DecisionResult:
        """Record one person's answer; the first decisive answer wins (see the module docstring).

        `platform`: where the answer came from; only the platform the card was posted on may
        decide it (a user id means nothing on another platform, and the console's is typed).
        `grantees`: for `approve_thread`, the people the grant covers (default: the requesters).
        `click`: where a chat click was made; it must be on this approval's card, and a clicker
        from another organisation must be named in the approvers (the console passes none: its
        cards carry no platform identity).
        `arguments`, `fingerprint`: for `approve_edited`, the edited call and the fingerprint of
        the call the approver edited (`bot.approvals.editing`); `request_changes` takes the
        approver's guidance as `reason`.
        """
        if decision in batches.BATCH_DECISIONS:
            return await self._decide_batch(approval_id, user_id, decision, reason,
                                            platform=platform, click=click)  # fmt: skip
        row, refused = await self._admit(approval_id, user_id, decision, platform, click)
        if decision == "approve_edited" and row is not None and arguments == row.arguments:
            decision = "approve"  # edited nothing: a plain approval
        if refused is not None or row is None:
            result = refused or authority.NOT_FOUND
        elif decision == "reject":
            result = await self._reject(row, user_id, reason)
        elif decision == "request_changes":
            result = await self._edits.request_changes(row, user_id, reason)
        elif decision == "approve_edited":
            if arguments is None:
                result = DecisionResult("edit_refused", "No edited arguments were sent.")
            else:
                result = await self._edits.approve_edited(
                    row, user_id, reason, arguments, fingerprint
                )
        else:
            granted = authority.grantees(row, grantees) if decision == "approve_thread" else None
            result = await self._approve(row, user_id, reason, grantees=granted)
        ids: dict[str, object] = {}
        if row is not None:  # the run's ids, and its trace's when it is traced
            parent = await self._db.run(queries.run_trace_parent, row.run_id)
            ids = {"run_id": row.run_id, "conversation_id": row.conversation_id,
                   "trace_id": trace_id_of(parent)}  # fmt: skip
        with bound(approval_id=approval_id, **ids):
            log.info("approval %s: %s by %s on %s: %s", approval_id, decision, user_id, platform,
                     result.status)  # fmt: skip
        if row is not None and row.batch_id:  # its card lists the batch: show that one after
            result = await self._batches.with_card(result, row)
        return result

    async def _decide_batch(
        self,
        approval_id: str,
        user_id: str,
        decision: Decision,
        reason: str,
        *,
        platform: str,
        click: CardClick | None,
    ) -> DecisionResult:
        """Approve all / Reject all on the card of `approval_id`'s batch (`bot.approvals.
        batches`): each call decided as a click on it would be, or none."""

        async def decide_one(member_id: str, each: Decision, text: str) -> DecisionResult:
            return await self.decide(member_id, user_id, each, text, platform=platform,
                                     click=click)  # fmt: skip

        return await self._batches.decide(
            approval_id, user_id, decision, reason, platform=platform, click=click,
            admit=self._admit, decide_one=decide_one,
        )  # fmt: skip

    async def view(
        self, approval_id: str, *, click: CardClick | None = None
    ) -> ApprovalCardView | None:
        """The card of an approval as it stands (a surface's dialog shows what it decides, a
        folded card's "show details" what it folded); with `click`, only when the click was
        made on a copy of this approval's card (a payload naming another approval gets None)."""
        row, copies = await self._db.run(approval_queries.approval_with_copies, approval_id)
        if row is None:
            return None
        if click is not None and not authority.on_one_of(self._cards.refs(row, copies), click):
            return None
        return card_view(row)

    async def waiting_for(
        self, user_id: str, *, platform: str, workspace: str | None = None
    ) -> list[WaitingApproval]:
        """The approvals waiting for this person on `platform` (their inbox): pending, before
        their deadline, that they may approve now (`authority.refusal`, as a click is judged,
        with the approvers of the card's workspace) and have not answered yet; oldest first.
        `workspace`: only the approvals asked there (an inbox shown in one workspace never
        lists another's; None: the platform serves one)."""
        now = self._clock.now()
        rows = await self._db.run(
            approval_inbox.pending_on_platform, platform, now=now, limit=INBOX_LIMIT
        )
        if workspace is not None:
            rows = [(row, n) for row, n in rows if (row.card_workspace or "") == workspace]
        return [
            WaitingApproval(
                card=card_view(row, approvals_so_far=len(answered)),
                created_at=as_utc(row.created_at),
                expires_at=as_utc(row.expires_at),
                listed_at=now,
                posted_at=card_ref(row),
            )
            for row, answered in rows
            if user_id not in answered and self._inbox_refusal(row, user_id) is None
        ]

    def _inbox_refusal(self, row: Approval, user_id: str) -> DecisionResult | None:
        approvers = self.approvers_of(row)
        return authority.refusal(row, user_id, "approve", approvers.groups,
                                 within=approvers.within)  # fmt: skip

    async def edit_form(
        self, approval_id: str, user_id: str, *, platform: str, click: CardClick | None = None
    ) -> EditForm | DecisionResult:
        """The form to edit the call in, for someone who may approve it; else why not."""
        row, refused = await self._admit(approval_id, user_id, "approve_edited", platform, click)
        if refused is not None or row is None:
            return refused or authority.NOT_FOUND
        return self._edits.form(row)

    async def check_edit(
        self,
        approval_id: str,
        user_id: str,
        values: dict[str, str | None],
        *,
        fingerprint: str,
        platform: str,
        click: CardClick | None = None,
    ) -> EditCheck:
        """A submitted form checked (nothing is decided): the edited arguments, or what is wrong
        with the edit, by field, for the surface to show inside its form."""
        row, refused = await self._admit(approval_id, user_id, "approve_edited", platform, click)
        if refused is not None or row is None:
            return EditCheck(errors={GENERAL: (refused or authority.NOT_FOUND).message})
        return await self._edits.check(row, user_id, values, fingerprint)

    async def refusal(
        self,
        approval_id: str,
        user_id: str,
        decision: Decision,
        *,
        platform: str,
        click: CardClick | None = None,
    ) -> DecisionResult | None:
        """Why `decide` would refuse this person now, or None: lets a surface say so before it
        asks for more (Slack opens the reject dialog only for someone who may reject)."""
        return (await self._admit(approval_id, user_id, decision, platform, click))[1]

    async def _admit(
        self,
        approval_id: str,
        user_id: str,
        decision: Decision,
        platform: str,
        click: CardClick | None = None,
    ) -> tuple[Approval | None, DecisionResult | None]:
        """The approval row, and a refusal if it is not pending or not this person's to decide
        (`bot.approvals.authority`); a row past its deadline is expired first."""
        row, copies = await self._db.run(approval_queries.approval_with_copies, approval_id)
        if row is None:
            return None, authority.NOT_FOUND
        if (misplaced := authority.wrong_platform(row, platform)) is not None:
            return row, misplaced
        approvers = self.approvers_of(row)
        groups = approvers.groups
        if click is not None:
            if not click.inbox:  # an inbox lists only cards already posted
                row, copies = await self._cards.once_recorded(row, copies, click)
            cards = self._cards.refs(row, copies)
            refused = authority.wrong_card(row, cards, click, user_id, groups)
            if refused is not None:
                return row, refused
        now = self._clock.now()
        if row.status == ApprovalStatus.PENDING and as_utc(row.expires_at) <= now:
            await self._settler.expire(row.id)
            row = await self._db.run(approval_queries.get_approval, approval_id) or row
        elif row.status == ApprovalStatus.PENDING:  # a tier due but not yet applied counts already
            row = await self._escalator.apply_due(row, now)
        return row, authority.refusal(row, user_id, decision, groups, within=approvers.within)

    async def _reject(self, row: Approval, user_id: str, reason: str) -> DecisionResult:
        won, fresh = await self._db.run(approval_queries.reject, row.id, user_id, reason)
        fresh = fresh or row
        if not won:
            return authority.already(fresh)
        await self._settler.finish(row.id, changed=True, row=fresh)
        return DecisionResult("decided", "Rejected. The agent will be told why.", card_view(fresh))

    async def _approve(
        self, row: Approval, user_id: str, reason: str, *, grantees: list[str] | None
    ) -> DecisionResult:
        decision = ApprovalDecision(
            approval_id=row.id, user_id=user_id, decision="approve", reason=reason,
            fingerprint=row.fingerprint,
        )  # fmt: skip
        first_time, won, approvers, fresh = await self._db.run(
            approval_queries.approve,
            decision,
            row,
            grant_by=user_id if grantees else None,
            grantees=grantees or (),
            reason=reason,
        )
        fresh = fresh or row
        if len(approvers) < row.min_approvals:
            view = card_view(fresh, approvals_so_far=len(approvers))
            if first_time:
                await self._cards.update(fresh, view=view)
            more = row.min_approvals - len(approvers)
            said = "Your approval is recorded" if first_time else "You have already approved"
            return DecisionResult("recorded", f"{said}; {more} more needed.", view)
        if not won:
            return authority.already(fresh)
        await self._settler.finish(row.id, changed=True, row=fresh)
        return DecisionResult("decided", authority.approved(row, grantees), card_view(fresh))
