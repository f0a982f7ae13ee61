"""The outbound half of the Slack surface: `SlackSurface` posts and edits through the Web API.

Edits (`chat.update`) are Tier 3 (about 50 a minute per workspace), so every edit goes through
one `UpdateLimiter` owned by the surface; HTTP 429 is retried by slack_sdk's rate-limit retry
handler, which also pauses the limiter for the Retry-After the server asked for.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient

from bot.audit.render import markdown as audit_markdown
from bot.engine.retry import parse_retry_after
from bot.surfaces.base import (
    AnswerFile,
    ApprovalCardView,
    AuditReportPoster,
    CardPlace,
    MessageRef,
    StatusView,
    ThreadRef,
)
from bot.surfaces.slack import routing
from bot.surfaces.slack.audit_report import slack_blocks
from bot.surfaces.slack.cards import render_approval_card
from bot.surfaces.slack.markdown import (
    BLOCKS_TEXT_LIMIT,
    SECTION_LIMIT,
    pack_messages,
    split_mrkdwn,
)
from bot.surfaces.slack.render import (
    SlackMessage,
    render_answer,
    render_notice,
    render_plain_text,
    render_status,
    section,
)

if TYPE_CHECKING:
    from bot.audit.model import AuditReport

log = logging.getLogger(__name__)
REPORT_TOO_BIG = (
    "The report is too long for a private message: narrow it (a connector, a shorter window), "
    "or run `chatops audit`."
)

UPDATES_PER_MINUTE = 40.0  # below chat.update's Tier 3 (50+/min per workspace)
UPDATE_BURST = 10
# Slack's answers when a message's size is the problem: it may refuse what we counted as
# fitting (its limits are partly undocumented), so these degrade rather than fail the run
TOO_BIG = frozenset({"msg_blocks_too_long", "invalid_blocks", "msg_too_long"})
SMALLER_PIECES = 4  # the refused message again, in pieces this many times smaller


def too_big(exc: SlackApiError) -> bool:
    return exc.response.get("error") in TOO_BIG


class UpdateLimiter:
    """A token bucket per workspace for `chat.update`, shared by every run of the process.

    Edits wait in priority order: an `urgent` one (an approval card showing its outcome) goes
    before every ordinary one (a status message) waiting for the same workspace's budget, even
    one that was already waiting, so decided cards lose their buttons first under load.
    """

    def __init__(
        self,
        *,
        per_minute: float = UPDATES_PER_MINUTE,
        burst: int = UPDATE_BURST,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self.rate = per_minute / 60.0
        self.burst = float(burst)
        self._tokens: dict[str, float] = {}
        self._stamp: dict[str, float] = {}
        self._queues: dict[str, list[tuple[int, int]]] = {}  # heap of (priority, arrival)
        self._turns: dict[str, asyncio.Event] = {}  # set when a workspace's queue changes
        self._arrivals = itertools.count()
        self._paused_until = 0.0
        self.queue_changed = asyncio.Condition()  # observers (tests, figures) wait on it

    def pause(self, seconds: float) -> None:
        """Slack said 429: no workspace edit starts before `seconds` from now."""
        self._paused_until = max(self._paused_until, self._clock() + seconds)

    def waiting(self, workspace: str) -> tuple[int, int]:
        """(urgent, ordinary) edits waiting for `workspace`'s budget."""
        queue = self._queues.get(workspace, [])
        urgent = sum(1 for priority, _ in queue if priority == 0)
        return urgent, len(queue) - urgent

    def short(self, workspace: str) -> bool:
        """True while edits of `workspace` are queueing for the budget."""
        return bool(self._queues.get(workspace))

    async def acquire(self, workspace: str, *, urgent: bool = False) -> None:
        """Wait until an edit may be sent for `workspace` (urgent ones first, then by arrival)."""
        ticket = (0 if urgent else 1, next(self._arrivals))
        queue = self._queues.setdefault(workspace, [])
        heapq.heappush(queue, ticket)
        await self._changed(workspace)
        try:
            while True:
                if queue[0] != ticket:  # someone goes first: wait for the queue to move
                    await self._turns.setdefault(workspace, asyncio.Event()).wait()
                    continue
                delay = self._take(workspace)
                if delay <= 0:
                    return
                await self._sleep(delay)  # the budget refills meanwhile
        finally:
            queue.remove(ticket)
            heapq.heapify(queue)
            if not queue:
                del self._queues[workspace]
            await asyncio.shield(self._changed(workspace))

    def _take(self, workspace: str) -> float:
        """Take a token now (0.0), or say how long until one is there."""
        now = self._clock()
        if now < self._paused_until:
            return self._paused_until - now
        last = self._stamp.get(workspace, now)
        tokens = min(self.burst, self._tokens.get(workspace, self.burst) + (now - last) * self.rate)
        self._stamp[workspace] = now
        if tokens >= 1.0:
            self._tokens[workspace] = tokens - 1.0
            return 0.0
        self._tokens[workspace] = tokens
        return (1.0 - tokens) / self.rate

    async def _changed(self, workspace: str) -> None:
        turn = self._turns.pop(workspace, None)
        if turn is not None:
            turn.set()  # every waiter of the workspace looks again at who is first
        async with self.queue_changed:
            self.queue_changed.notify_all()


class LimiterPausingRetryHandler(AsyncRateLimitErrorRetryHandler):
    """slack_sdk's 429 handler (sleeps Retry-After, then retries) that also pauses the limiter."""

    def __init__(self, limiter: UpdateLimiter, *, max_retry_count: int = 6) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.limiter = limiter

    async def prepare_for_next_attempt_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        if response is not None:
            values = {k.lower(): v for k, v in response.headers.items()}.get("retry-after")
            hinted = parse_retry_after(values[0]) if values else None
            self.limiter.pause(1.0 if hinted is None else hinted)
        await super().prepare_for_next_attempt_async(
            state=state, request=request, response=response, error=error
        )


class SlackSurface:
    """The runtime's view of Slack: posts and edits messages in threads (the `Surface` protocol)."""

    platform = "slack"

    def __init__(self, client: AsyncWebClient, limiter: UpdateLimiter) -> None:
        self.client = client
        self.limiter = limiter

    async def _post(self, thread: ThreadRef, message: SlackMessage) -> MessageRef:
        response = await self.client.chat_postMessage(
            channel=thread.channel,
            thread_ts=thread.root or None,  # none: a copy of a card outside the thread
            text=message.text,
            blocks=message.blocks,
            unfurl_links=False,
            unfurl_media=False,
        )
        return MessageRef(thread=thread, message_id=str(response["ts"]))

    async def _update(
        self, ref: MessageRef, message: SlackMessage, *, urgent: bool = False
    ) -> None:
        await self.limiter.acquire(ref.thread.workspace, urgent=urgent)
        await self.client.chat_update(
            channel=ref.thread.channel, ts=ref.message_id, text=message.text, blocks=message.blocks
        )

    async def post_status(self, thread: ThreadRef, view: StatusView) -> MessageRef:
        return await self._post(thread, render_status(view))

    async def update_status(self, ref: MessageRef, view: StatusView) -> None:
        await self._update(ref, render_status(view))

    async def post_approval_card(self, thread: ThreadRef, view: ApprovalCardView) -> MessageRef:
        return await self._post(thread, render_approval_card(view))

    async def update_approval_card(self, ref: MessageRef, view: ApprovalCardView) -> None:
        """A card's edit is urgent: the outcome (buttons gone) before any status edit."""
        await self._update(ref, render_approval_card(view), urgent=True)

    async def thread_link(self, thread: ThreadRef) -> str:
        return await routing.permalink(self.client, thread.channel, thread.root)

    async def post_approval_copy(self, place: CardPlace, view: ApprovalCardView) -> MessageRef:
        """A copy in an approvals channel, or in the approver's DM (conversations.open)."""
        channel = await routing.copy_channel(self.client, place)
        where = ThreadRef(self.platform, place.workspace, channel, "")
        return await self._post(where, render_approval_card(view))

    async def post_routed_notice(
        self, thread: ThreadRef, places: Sequence[CardPlace]
    ) -> MessageRef:
        return await self._post(thread, routing.routed_notice(places))

    async def post_answer(
        self, thread: ThreadRef, markdown: str, *, files: Sequence[AnswerFile] = ()
    ) -> MessageRef:
        """The answer in the thread, split into several messages when Slack's limits need it,
        then each of its documents as a file in the thread.

        When Slack refuses a message as too big anyway, that message goes again in smaller
        pieces; when a piece is refused too, the whole answer goes as a file (or, if the upload
        fails, as plain text), so the run never fails for the size of its answer.
        """
        posted: list[MessageRef] = []
        try:
            for message in render_answer(markdown):  # never empty
                posted.extend(await self._post_or_split(thread, message))
        except SlackApiError as exc:
            if not too_big(exc):
                raise
            log.warning("slack refused the answer's pieces (%s); posting it as a file", exc)
            posted.append(await self._post_as_file(thread, markdown, "answer.md", "Answer"))
        for file in files:
            await self._attach(thread, file)
        return posted[0]

    async def _attach(self, thread: ThreadRef, file: AnswerFile) -> None:
        """One document as a file in the thread (files.getUploadURLExternal, the upload,
        files.completeUploadExternal); a refused upload is said in the thread instead."""
        try:
            await self.client.files_upload_v2(
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
        try:
            await self.client.files_upload_v2(
                channel=thread.channel,
                thread_ts=thread.root or None,
                content=markdown,
                filename=filename,
                title=title,
            )
        except SlackClientError as exc:
            log.warning("slack refused the file upload (%s); posting plain text", exc)
            await self._update(ref, render_notice(f"{title} (as plain text, in parts):"))
            for text in render_plain_text(markdown):
                await self.client.chat_postMessage(
                    channel=thread.channel, thread_ts=thread.root, text=text, mrkdwn=False
                )
        return ref

    async def post_notice(
        self, thread: ThreadRef, text: str, *, mention: Sequence[str] = ()
    ) -> MessageRef:
        return await self._post(thread, render_notice(text, mention))

    async def notify_user(self, thread: ThreadRef, user_id: str, text: str) -> None:
        """An ephemeral message: only `user_id` sees it, in the thread it concerns."""
        message = render_notice(text)
        kwargs: dict[str, Any] = {"thread_ts": thread.root} if thread.root else {}
        await self.client.chat_postEphemeral(
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
        self, channel: str, report: AuditReport, *, thread: ThreadRef | None = None
    ) -> str:
        """An audit report (Block Kit from `audit_report.slack_blocks`) in a channel or a thread."""
        kwargs: dict[str, Any] = {"thread_ts": thread.root} if thread and thread.root else {}
        try:
            response = await self.client.chat_postMessage(
                channel=channel,
                text=f"Audit report: {report.query.describe()}",
                blocks=slack_blocks(report),
                **kwargs,
            )
        except SlackApiError as exc:
            if not too_big(exc):
                raise
            log.warning("slack refused the audit report blocks (%s); posting it as a file", exc)
            where = thread or ThreadRef(self.platform, "", channel, "")
            ref = await self._post_as_file(where, audit_markdown(report), "audit.md", "The report")
            return ref.message_id
        return str(response["ts"])

    async def show_audit_report(self, channel: str, user_id: str, report: AuditReport) -> None:
        """An audit report only `user_id` sees (ephemeral), where they asked for it; one too big
        for a message becomes a note saying how to narrow it (a file would be seen by all)."""
        try:
            await self.client.chat_postEphemeral(
                channel=channel,
                user=user_id,
                text=f"Audit report: {report.query.describe()}",
                blocks=slack_blocks(report),
            )
        except SlackApiError as exc:
            if not too_big(exc):
                raise
            await self.tell(channel, user_id, REPORT_TOO_BIG)

    async def tell(self, channel: str, user_id: str, text: str, thread_ts: str = "") -> None:
        """An ephemeral note outside any run (slash command replies)."""
        await self.notify_user(ThreadRef(self.platform, "", channel, thread_ts), user_id, text)


def _smaller(message: SlackMessage) -> list[SlackMessage]:
    """A refused answer message again, its sections cut into pieces `SMALLER_PIECES` times
    smaller and packed under a budget as much smaller."""
    texts = [b["text"]["text"] for b in message.blocks if b.get("type") == "section"]
    pieces = [p for t in texts for p in split_mrkdwn(t, SECTION_LIMIT // SMALLER_PIECES)]
    groups = pack_messages(pieces, text_limit=BLOCKS_TEXT_LIMIT // SMALLER_PIECES)
    return [SlackMessage(text="\n".join(g), blocks=[section(p) for p in g]) for g in groups]
