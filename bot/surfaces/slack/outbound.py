"""The outbound half of the Slack surface: `SlackSurface` posts and edits through the Web API.

Every edit goes through the surface's `UpdateLimiter` (`limiter.py`: the chat.update budget,
HTTP 429 retried). The status message is a `plan` of task cards (`plan.py`) or the classic
checklist (`CHATOPS_STATUS_STYLE`); the answer streams (`stream.py`) and the run is an agent
session (`sessions.py`) where the workspace has those features, each falling back once per
workspace (`features.py`) to what works everywhere.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.audit.render import markdown as audit_markdown
from bot.chat.questions import QuestionView
from bot.chat.surface import AuditReportPoster
from bot.chat.threads import MessageRef, ThreadRef
from bot.chat.views import AnswerFile, AnyCardView, ApprovalCardView, CardPlace, StatusView
from bot.surfaces.slack import routing
from bot.surfaces.slack.audit_report import slack_blocks
from bot.surfaces.slack.batch_card import render_card
from bot.surfaces.slack.cards import render_approval_card
from bot.surfaces.slack.features import WorkspaceFeatures
from bot.surfaces.slack.identity import SlackInstallation
from bot.surfaces.slack.limiter import UpdateLimiter
from bot.surfaces.slack.markdown import (
    BLOCKS_TEXT_LIMIT,
    SECTION_LIMIT,
    pack_messages,
    split_mrkdwn,
)
from bot.surfaces.slack.plan import render_plan_status
from bot.surfaces.slack.question_card import render_question
from bot.surfaces.slack.render import (
    SlackMessage,
    feedback_block,
    render_answer,
    render_notice,
    render_plain_text,
    render_status,
    section,
)
from bot.surfaces.slack.sessions import AgentSessions
from bot.surfaces.slack.stream import SlackStream
from bot.surfaces.slack.workspaces import SlackClients

if TYPE_CHECKING:
    from bot.chat.audit_report import AuditReport
    from bot.surfaces.slack.home import SlackHome

log = logging.getLogger(__name__)
T = TypeVar("T")
REPORT_TOO_BIG = (
    "The report is too long for a private message: narrow it (a connector, a shorter window), "
    "or run `chatops audit`."
)

# Slack's answers when a message's size is the problem: it may refuse what we counted as
# fitting (its limits are partly undocumented), so these degrade rather than fail the run
TOO_BIG = frozenset({"msg_blocks_too_long", "invalid_blocks", "msg_too_long"})
SMALLER_PIECES = 4  # the refused message again, in pieces this many times smaller


def too_big(exc: SlackApiError) -> bool:
    return exc.response.get("error") in TOO_BIG


class SlackSurface:
    """The runtime's view of Slack: posts and edits messages in threads (the `Surface` protocol)."""

    platform = "slack"
    status_edit_interval_s = None  # the run manager's: Slack limits edits per message
    direct_messages = True  # a card to one person: conversations.open, then chat.postMessage

    def __init__(
        self,
        client: AsyncWebClient,
        limiter: UpdateLimiter,
        *,
        features: WorkspaceFeatures | None = None,
        append_limiter: UpdateLimiter | None = None,
        session_limiter: UpdateLimiter | None = None,
        clients: SlackClients | None = None,
    ) -> None:
        """`limiter`: the chat.update budget; `features`: what each workspace has (plan status,
        streams, sessions); `append_limiter`, `session_limiter`: the chat.appendStream (Tier 4)
        and agents.sessions.setStatus (Tier 3) budgets per workspace; `clients`: the token of
        each workspace (default: `client`'s one token for every workspace)."""
        self.client = client
        self.clients = clients or SlackClients(client)
        self.limiter = limiter
        self.features = features or WorkspaceFeatures()
        share = limiter.share  # every budget is per workspace: shared across processes alike
        self.append_limiter = append_limiter or UpdateLimiter(
            per_minute=90.0, burst=10, share=share
        )
        self.installation: SlackInstallation | None = None  # set by `setup_slack`
        self.home: SlackHome | None = None  # the App Home inboxes (set by `setup_slack`)
        self.sessions = AgentSessions(
            self.clients.client,
            self.features,
            session_limiter or UpdateLimiter(per_minute=40.0, share=share),
        )

    async def client_for(self, workspace: str) -> AsyncWebClient:
        """The client with the token of `workspace` (raises `NotInstalled` in OAuth mode for
        a workspace without an installation)."""
        return await self.clients.client(workspace)

    async def _post(self, thread: ThreadRef, message: SlackMessage) -> MessageRef:
        client = await self.client_for(thread.workspace)
        response = await client.chat_postMessage(
            channel=thread.channel,
            thread_ts=thread.root or None,  # none: a copy of a card outside the thread
            text=message.text,
            blocks=message.blocks,
            unfurl_links=False,
            unfurl_media=False,
        )
        return MessageRef(thread=thread, message_id=str(response["ts"]))

    async def edit(self, ref: MessageRef, message: SlackMessage, *, urgent: bool = False) -> None:
        """`chat.update` within the workspace's edit budget (urgent edits go first)."""
        client = await self.client_for(ref.thread.workspace)
        await self.limiter.acquire(ref.thread.workspace, urgent=urgent)
        await client.chat_update(
            channel=ref.thread.channel, ts=ref.message_id, text=message.text, blocks=message.blocks
        )

    async def post_status(self, thread: ThreadRef, view: StatusView) -> MessageRef:
        ref = await self._status(thread, view, lambda message: self._post(thread, message))
        self.sessions.note(thread, view)
        return ref

    async def update_status(self, ref: MessageRef, view: StatusView) -> None:
        await self._status(ref.thread, view, lambda message: self.edit(ref, message))
        self.sessions.note(ref.thread, view)

    async def _status(
        self, thread: ThreadRef, view: StatusView, send: Callable[[SlackMessage], Awaitable[T]]
    ) -> T:
        """The status as a plan where the workspace renders one, else the classic checklist
        (a plan refused once is never tried again in that workspace)."""
        if self.features.has(thread.workspace, "plan"):
            try:
                return await send(render_plan_status(view))
            except SlackApiError as exc:
                if not self.features.refused(thread.workspace, "plan", exc):
                    raise
        return await send(render_status(view))

    async def open_answer_stream(self, thread: ThreadRef, *, recipient: str) -> SlackStream | None:
        """A stream for the answer, where the workspace streams (else None: one post)."""
        if not thread.root or not self.features.has(thread.workspace, "stream"):
            return None
        client = await self.client_for(thread.workspace)
        return SlackStream(self, thread, recipient=recipient, client=client)

    async def post_approval_card(self, thread: ThreadRef, view: AnyCardView) -> MessageRef:
        return await self._post(thread, render_card(view))

    async def update_approval_card(self, ref: MessageRef, view: AnyCardView) -> None:
        """A card's edit is urgent: the outcome (buttons gone) before any status edit."""
        await self.edit(ref, render_card(view), urgent=True)

    async def post_question(self, thread: ThreadRef, view: QuestionView) -> MessageRef:
        """A tool's question (`QuestionPoster`): a message with "Answer…" and "Decline"."""
        return await self._post(thread, render_question(view))

    async def update_question(self, ref: MessageRef, view: QuestionView) -> None:
        await self.edit(ref, render_question(view), urgent=True)

    async def thread_link(self, thread: ThreadRef) -> str:
        client = await self.client_for(thread.workspace)
        return await routing.permalink(client, thread.channel, thread.root)

    async def post_approval_copy(self, place: CardPlace, view: ApprovalCardView) -> MessageRef:
        """A copy in an approvals channel, or in the approver's DM (conversations.open)."""
        channel = await routing.copy_channel(await self.client_for(place.workspace), place)
        where = ThreadRef(self.platform, place.workspace, channel, "")
        return await self._post(where, render_approval_card(view))

    async def post_routed_notice(
        self, thread: ThreadRef, places: Sequence[CardPlace]
    ) -> MessageRef:
        return await self._post(thread, routing.routed_notice(places))

    async def post_answer(
        self,
        thread: ThreadRef,
        markdown: str,
        *,
        files: Sequence[AnswerFile] = (),
        feedback_run: str = "",
    ) -> MessageRef:
        """The answer in the thread, split into several messages when Slack's limits need it,
        the last one carrying the feedback buttons (with `feedback_run`), then each of its
        documents as a file in the thread.

        When Slack refuses a message as too big anyway, that message goes again in smaller
        pieces; when a piece is refused too, the whole answer goes as a file (or, if the upload
        fails, as plain text), so the run never fails for the size of its answer.
        """
        posted: list[MessageRef] = []
        try:
            messages = render_answer(markdown)  # never empty
            if feedback_run:
                messages = _with_feedback(messages)
            for message in messages:
                posted.extend(await self._post_or_split(thread, message))
        except SlackApiError as exc:
            if not too_big(exc):
                raise
            log.warning("slack refused the answer's pieces (%s); posting it as a file", exc)
            posted.append(await self._post_as_file(thread, markdown, "answer.md", "Answer"))
            if feedback_run:
                posted.append(await self._post(thread, _feedback_message()))
        await self.attach_all(thread, files)
        return posted[-1] if feedback_run else posted[0]

    async def attach_all(self, thread: ThreadRef, files: Sequence[AnswerFile]) -> None:
        for file in files:
            await self._attach(thread, file)

    async def _attach(self, thread: ThreadRef, file: AnswerFile) -> None:
        """One document as a file in the thread (files.getUploadURLExternal, the upload,
        files.completeUploadExternal); a refused upload is said in the thread instead."""
        try:
            client = await self.client_for(thread.workspace)
            await client.files_upload_v2(
                channel=thread.channel,
                thread_ts=thread.root or None,
                content=file.text,
                filename=file.name,
                title=file.name,
            )
        except SlackClientError as exc:
            log.warning("slack refused the document %s (%s)", file.name, exc)
            reason = exc.response.get("error") if isinstance(exc, SlackApiError) else "no upload"
            await self._post(
                thread, render_notice(f"The document {file.name} could not be attached ({reason}).")
            )

    async def _post_or_split(self, thread: ThreadRef, message: SlackMessage) -> list[MessageRef]:
        try:
            return [await self._post(thread, message)]
        except SlackApiError as exc:
            if not too_big(exc):
                raise
            log.warning("slack refused an answer message (%s); posting smaller pieces", exc)
        return [await self._post(thread, piece) for piece in _smaller(message)]

    async def _post_as_file(
        self, thread: ThreadRef, markdown: str, filename: str, title: str
    ) -> MessageRef:
        """A short note in the thread with the whole text attached as a file; plain-text
        messages when the upload is refused (no `files:write` scope, uploads disabled)."""
        note = render_notice(f"{title} is too long for Slack messages; it is attached as a file.")
        ref = await self._post(thread, note)
        client = await self.client_for(thread.workspace)
        try:
            await client.files_upload_v2(
                channel=thread.channel,
                thread_ts=thread.root or None,
                content=markdown,
                filename=filename,
                title=title,
            )
        except SlackClientError as exc:
            log.warning("slack refused the file upload (%s); posting plain text", exc)
            await self.edit(ref, render_notice(f"{title} (as plain text, in parts):"))
            for text in render_plain_text(markdown):
                await client.chat_postMessage(
                    channel=thread.channel, thread_ts=thread.root, text=text, mrkdwn=False
                )
        return ref

    async def post_notice(
        self, thread: ThreadRef, text: str, *, mention: Sequence[str] = ()
    ) -> MessageRef:
        return await self._post(thread, render_notice(text, mention))

    async def open_thread(self, channel: str, workspace: str, text: str) -> ThreadRef:
        """A trigger's alert summary in `channel`: the thread it starts (`ThreadOpener`). The
        team is the bot's own (`auth.test`, asked once) unless the trigger names one."""
        if not workspace and self.installation is not None and not self.clients.oauth:
            workspace = (await self.installation.identity()).team_id
        ref = await self._post(
            ThreadRef(self.platform, workspace, channel, ""), render_notice(text)
        )
        return ThreadRef(self.platform, workspace, channel, ref.message_id)

    async def refresh_inbox(self, users: Sequence[str] | None, *, workspace: str = "") -> None:
        """Publish the App Home of these people again (`bot.chat.waiting.InboxShower`)."""
        if self.home is not None:
            await self.home.refresh(users, workspace=workspace)

    async def notify_user(self, thread: ThreadRef, user_id: str, text: str) -> None:
        """An ephemeral message: only `user_id` sees it, in the thread it concerns."""
        message = render_notice(text)
        kwargs: dict[str, Any] = {"thread_ts": thread.root} if thread.root else {}
        client = await self.client_for(thread.workspace)
        await client.chat_postEphemeral(
            channel=thread.channel,
            user=user_id,
            text=message.text,
            blocks=message.blocks,
            **kwargs,
        )

    @property
    def report_poster(self) -> AuditReportPoster:
        """Slack posts scheduled audit reports (`post_audit_report`)."""
        return self

    async def post_audit_report(
        self,
        channel: str,
        report: AuditReport,
        *,
        thread: ThreadRef | None = None,
        workspace: str = "",
    ) -> str:
        """An audit report (Block Kit from `audit_report.slack_blocks`) in a channel or a thread,
        with the token of the thread's (else `workspace`'s) installation: `NotInstalled` in
        OAuth mode when that workspace has none."""
        kwargs: dict[str, Any] = {"thread_ts": thread.root} if thread and thread.root else {}
        workspace = thread.workspace if thread else workspace
        client = await self.client_for(workspace)
        try:
            response = await client.chat_postMessage(
                channel=channel,
                text=f"Audit report: {report.query.describe()}",
                blocks=slack_blocks(report),
                **kwargs,
            )
        except SlackApiError as exc:
            if not too_big(exc):
                raise
            log.warning("slack refused the audit report blocks (%s); posting it as a file", exc)
            where = thread or ThreadRef(self.platform, workspace, channel, "")
            ref = await self._post_as_file(where, audit_markdown(report), "audit.md", "The report")
            return ref.message_id
        return str(response["ts"])

    async def show_audit_report(
        self, channel: str, user_id: str, report: AuditReport, *, workspace: str = ""
    ) -> None:
        """An audit report only `user_id` sees (ephemeral), where they asked for it; one too big
        for a message becomes a note saying how to narrow it (a file would be seen by all)."""
        client = await self.client_for(workspace)
        try:
            await client.chat_postEphemeral(
                channel=channel,
                user=user_id,
                text=f"Audit report: {report.query.describe()}",
                blocks=slack_blocks(report),
            )
        except SlackApiError as exc:
            if not too_big(exc):
                raise
            await self.tell(channel, user_id, REPORT_TOO_BIG, workspace=workspace)

    async def tell(
        self, channel: str, user_id: str, text: str, thread_ts: str = "", *, workspace: str = ""
    ) -> None:
        """An ephemeral note outside any run (slash command replies)."""
        where = ThreadRef(self.platform, workspace, channel, thread_ts)
        await self.notify_user(where, user_id, text)


def _feedback_message() -> SlackMessage:
    return SlackMessage(text="Was this answer helpful?", blocks=[feedback_block()])


def _with_feedback(messages: list[SlackMessage]) -> list[SlackMessage]:
    """The feedback buttons under the last message (their own message when it is full)."""
    if len(messages[-1].blocks) >= 50:
        return [*messages, _feedback_message()]
    return _with_extra(messages, [feedback_block()])


def _smaller(message: SlackMessage) -> list[SlackMessage]:
    """A refused answer message again, its sections cut into pieces `SMALLER_PIECES` times
    smaller and packed under a budget as much smaller."""
    texts = [b["text"]["text"] for b in message.blocks if b.get("type") == "section"]
    extra = [b for b in message.blocks if b.get("type") != "section"]  # the feedback buttons
    pieces = [p for t in texts for p in split_mrkdwn(t, SECTION_LIMIT // SMALLER_PIECES)]
    groups = pack_messages(pieces, text_limit=BLOCKS_TEXT_LIMIT // SMALLER_PIECES)
    smaller = [SlackMessage(text="\n".join(g), blocks=[section(p) for p in g]) for g in groups]
    return _with_extra(smaller, extra)


def _with_extra(messages: list[SlackMessage], extra: list[dict[str, Any]]) -> list[SlackMessage]:
    if not extra:
        return messages
    last = messages[-1]
    return [*messages[:-1], SlackMessage(last.text, [*last.blocks, *extra])]
