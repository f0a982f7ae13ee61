"""The answer streamed into a Slack thread: chat.startStream, chat.appendStream, chat.stopStream.

The `PacedStream` (bot/chat/streaming.py) decides when to send; this is one stream's
transport. The first text starts the stream (Slack requires the recipient, the requester, when
the thread is in a channel); later text is appended, at most once a second per stream and
within the workspace's appendStream budget. What is streamed is the model's Markdown made
inert: `<`, `>` and `&` escaped (no mention, broadcast or Slack link), and no Markdown link can
form (`](` and `]:` are broken with a backslash, a rule that depends only on the character
before, so text streamed in pieces is made inert exactly as the whole would be).

When the synthesis is done the stream is stopped and its message replaced in place
(`chat.update`) by the answer as Slack's plain post renders it (mrkdwn sections, links only to
http(s) and mailto) with the feedback buttons under it; an answer needing several messages
replaces it by those messages (the streamed one deleted). So a broken synthesis' fallback
replaces the partial text, and the thread never shows the partial text and the answer both. A
workspace that refuses streaming (`not_allowed`, `missing_scope`, ...) is remembered, and its
answers are posted once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.chat.threads import MessageRef, ThreadRef
from bot.chat.views import AnswerFile
from bot.surfaces.slack.markdown import escape
from bot.surfaces.slack.render import (
    SlackMessage,
    feedback_block,
    render_answer,
    render_notice,
)

if TYPE_CHECKING:
    from bot.surfaces.slack.outbound import SlackSurface

log = logging.getLogger(__name__)

MARKDOWN_LIMIT = 12_000  # Slack: markdown_text of one call
STREAM_CAPACITY = 10_000  # characters streamed before escaping (room for entities)


def inert(text: str, before: str) -> str:
    """Streamed Markdown made inert (see the module docstring); `before`: the character
    streamed just before `text` ('' at the start)."""
    out = []
    previous = before
    for ch in text:
        if previous == "]" and ch in "(:":
            out.append("\\")
        out.append(escape(ch))
        previous = ch
    return "".join(out)


class SlackStream:
    """One streamed answer message (the `StreamTransport` of bot/chat/streaming.py)."""

    capacity = STREAM_CAPACITY

    def __init__(
        self,
        surface: SlackSurface,
        thread: ThreadRef,
        *,
        recipient: str,
        client: AsyncWebClient | None = None,
    ) -> None:
        """`client`: the one with the thread's workspace token (default: the surface's)."""
        self._surface = surface
        self._client = client or surface.client
        self._thread = thread
        self._recipient = recipient
        self.ts: str | None = None
        self.calls = 0  # Web API calls this stream made (the bench counts them)

    async def send(self, shown: str, new: str) -> None:
        before = shown[len(shown) - len(new) - 1 : len(shown) - len(new)]
        text = inert(new, before)
        thread = self._thread
        if self.ts is None:
            self.calls += 1
            try:
                response = await self._client.chat_startStream(
                    channel=thread.channel,
                    thread_ts=thread.root,
                    markdown_text=text,
                    recipient_team_id=thread.workspace or None,
                    recipient_user_id=self._recipient or None,
                )
            except SlackApiError as exc:
                self._surface.features.refused(thread.workspace, "stream", exc)
                raise
            self.ts = str(response["ts"])
            return
        await self._surface.append_limiter.acquire(thread.workspace)
        self.calls += 1
        await self._client.chat_appendStream(channel=thread.channel, ts=self.ts, markdown_text=text)

    async def finish(
        self,
        answer: str,
        *,
        streamed: str,
        intact: bool,
        files: Sequence[AnswerFile],
        feedback_run: str,
    ) -> MessageRef:
        surface, thread = self._surface, self._thread
        if self.ts is None:  # the stream never started: today's single post
            return await surface.post_answer(thread, answer, files=files, feedback_run=feedback_run)
        await self._stop()
        return await self._replace(answer, files, feedback_run)

    async def abandon(self, streamed: str, note: str) -> None:
        if self.ts is not None:
            await self._stop(markdown_text=f"\n\n_{inert(note, '')}_")

    async def _stop(self, **final: object) -> bool:
        """End the stream; False when Slack refused (it may have ended it already)."""
        assert self.ts is not None
        self.calls += 1
        try:
            await self._client.chat_stopStream(channel=self._thread.channel, ts=self.ts, **final)
        except SlackApiError as exc:
            log.warning("slack refused to stop an answer stream (%s)", exc.response.get("error"))
            return False
        return True

    async def _replace(
        self, answer: str, files: Sequence[AnswerFile], feedback_run: str
    ) -> MessageRef:
        """The streamed message becomes the answer as a plain post shows it: edited in place
        when one message holds it, else deleted for the messages that do."""
        assert self.ts is not None
        surface, thread = self._surface, self._thread
        ref = MessageRef(thread, self.ts)
        messages = render_answer(answer)
        if len(messages) == 1:
            message = messages[0]
            if feedback_run:
                message = SlackMessage(message.text, [*message.blocks, feedback_block()])
            try:
                self.calls += 1
                await surface.edit(ref, message)  # after decided cards, like status edits
                await surface.attach_all(thread, files)
                return ref
            except SlackApiError as exc:
                log.warning("slack refused to replace a streamed answer (%s)", exc)
        try:
            self.calls += 1
            await self._client.chat_delete(channel=thread.channel, ts=self.ts)
        except SlackApiError as exc:  # keep the message, but say the answer follows
            log.warning("slack refused to delete a streamed answer (%s)", exc)
            try:
                await surface.edit(ref, render_notice("(The answer is below.)"))
            except SlackApiError:
                log.warning("slack refused to edit the streamed answer too; posting anyway")
        return await surface.post_answer(thread, answer, files=files, feedback_run=feedback_run)
