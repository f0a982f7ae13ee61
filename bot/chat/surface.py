"""The Surface protocol: what the services ask of a chat platform.

A surface is a translator. Inbound it verifies, deduplicates and parses platform events into
`InboundMessage` and hands them to its ports (`bot.chat.ports`); outbound it renders the view
models (`bot.chat.views`) into the platform's markup (pure functions) and posts or edits them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from bot.chat.audit_report import AuditReport
from bot.chat.threads import MessageRef, ThreadRef
from bot.chat.views import AnswerFile, AnyCardView, ApprovalCardView, CardPlace, StatusView


class AuditReportPoster(Protocol):
    """A surface that posts a scheduled audit report into one of its channels (`workspace`:
    the Slack team or Feishu tenant the channel is in, whose token posts it; '' for the bot's
    own)."""

    async def post_audit_report(
        self, channel: str, report: AuditReport, *, workspace: str = ""
    ) -> object: ...


@runtime_checkable
class ThreadOpener(Protocol):
    """A surface on which the bot starts a thread itself: a trigger's alert summary, posted in
    a channel (Slack, Feishu); the message is the thread's root."""

    async def open_thread(self, channel: str, workspace: str, text: str) -> ThreadRef:
        """Post `text` in `channel` (`workspace`: the team or tenant; '' for the bot's own);
        the thread it starts."""
        ...


class Surface(Protocol):
    """One chat platform as the runtime sees it."""

    platform: str
    # how scheduled audit reports reach this platform's channels (Slack, Feishu: the surface
    # itself); None for a surface without channels (the console)
    report_poster: AuditReportPoster | None
    # the least time between two edits of one status message; None: the run manager's (one a
    # second, for the chat platforms' rate limits); the console takes every step at once (0)
    status_edit_interval_s: float | None
    # whether a card can be sent to one person's direct messages (reminders, `route: dm`):
    # Slack and Feishu; not the console, which has no user identities
    direct_messages: bool

    async def post_status(self, thread: ThreadRef, view: StatusView) -> MessageRef: ...

    async def update_status(self, ref: MessageRef, view: StatusView) -> None: ...

    async def post_approval_card(self, thread: ThreadRef, view: AnyCardView) -> MessageRef:
        """An approval card in the thread: one call's, or a batch's (`BatchCardView`: the
        calls of one model response, each with its own buttons, and Approve all / Reject all)."""
        ...

    async def update_approval_card(self, ref: MessageRef, view: AnyCardView) -> None: ...

    async def post_answer(
        self,
        thread: ThreadRef,
        markdown: str,
        *,
        files: Sequence[AnswerFile] = (),
        feedback_run: str = "",
    ) -> MessageRef:
        """The answer in the thread, with its documents attached (files, or console links).
        With `feedback_run` the answer carries thumbs up/down for that run, and the ref is the
        message that carries them (the last one of a long answer); else the first message."""
        ...

    async def post_notice(
        self, thread: ThreadRef, text: str, *, mention: Sequence[str] = ()
    ) -> MessageRef:
        """A short note in the thread (run failed, escalation reminder mentioning approvers)."""
        ...

    async def notify_user(self, thread: ThreadRef, user_id: str, text: str) -> None:
        """Tell one user something privately (Slack ephemeral; Feishu an ephemeral card in a group
        chat, else a card to the direct chat or a DM)."""
        ...

    async def thread_link(self, thread: ThreadRef) -> str:
        """A link to the thread, for a card copy posted elsewhere ('' when there is none)."""
        ...

    async def post_approval_copy(self, place: CardPlace, view: ApprovalCardView) -> MessageRef:
        """A copy of an approval card in an approvals channel or an approver's DM; the ref
        names where it really landed (a DM's channel)."""
        ...

    async def post_routed_notice(
        self, thread: ThreadRef, places: Sequence[CardPlace]
    ) -> MessageRef:
        """In the thread: the approval waits elsewhere ("waiting for approval in #approvals")."""
        ...
