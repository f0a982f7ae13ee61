"""The run as a Slack agent session: `agents.sessions.setStatus` follows the status message.

`processing` while the run works (Slack shows its native stop button, whose click arrives as
an `agent_session_stopped` event), `suspended` while it waits for a human, `closed` when it
has ended. The session is the thread's (`channel_id`, `thread_ts` = the thread's root); its
title (the request) and initiator (the requester) are given when it is created.

Updates go out on one worker task the surface owns, the latest wanted status per thread
(coalesced, like the status message), within a per-workspace budget (the method is Tier 3):
a status message is never held up by its session. A workspace without agent sessions
(`feature_disabled`, `missing_scope`, ...) is remembered and gets no more calls.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.chat.threads import ThreadRef
from bot.chat.views import StatusView
from bot.statuses import RunStatus
from bot.surfaces.slack.features import WorkspaceFeatures
from bot.surfaces.slack.limiter import UpdateLimiter

log = logging.getLogger(__name__)

SessionStatus = Literal["processing", "suspended", "closed"]
SESSION_STATUS: dict[str, SessionStatus] = {
    RunStatus.RUNNING: "processing",
    RunStatus.WAITING_APPROVAL: "suspended",
    RunStatus.DONE: "closed",
    RunStatus.FAILED: "closed",
    RunStatus.CANCELLED: "closed",
}
NO_STOP_EVENTS = "missing_agent_session_stopped_event_subscription"
MAX_TRACKED = 10_000  # threads whose last session status is remembered
TITLE_CHARS = 200  # Slack: a session title is at most 200 characters


@dataclass(frozen=True)
class _Wanted:
    thread: ThreadRef
    status: SessionStatus
    title: str
    initiator: str


class AgentSessions:
    """Session status per thread, sent by one worker (see the module docstring)."""

    def __init__(
        self,
        client: Callable[[str], Awaitable[AsyncWebClient]],
        features: WorkspaceFeatures,
        limiter: UpdateLimiter,
    ) -> None:
        """`client`: the client of a workspace (its token)."""
        self._client = client
        self._features = features
        self._limiter = limiter
        self._wanted: OrderedDict[ThreadRef, _Wanted] = OrderedDict()
        self._sent: OrderedDict[ThreadRef, SessionStatus] = OrderedDict()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._warned = False

    def note(self, thread: ThreadRef, view: StatusView) -> None:
        """The run's status message shows `view`: its session should say so (cheap)."""
        status = SESSION_STATUS.get(view.state)
        if status is None or not thread.root or not self._features.has(thread.workspace, "session"):
            return
        pending = self._wanted.get(thread)
        if (pending.status if pending else self._sent.get(thread)) == status:
            return
        self._wanted[thread] = _Wanted(thread, status, view.title[:TITLE_CHARS], view.requester)
        self._wanted.move_to_end(thread)
        self._idle.clear()
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._work(), name="slack-agent-sessions")

    async def wait_idle(self) -> None:
        """Until every noted status has been sent (tests)."""
        await self._idle.wait()

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _work(self) -> None:
        while True:
            if not self._wanted:
                self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            _, wanted = self._wanted.popitem(last=False)
            await self._limiter.acquire(wanted.thread.workspace)
            await self._send(wanted)

    async def _send(self, wanted: _Wanted) -> None:
        thread = wanted.thread
        if not self._features.has(thread.workspace, "session"):
            return
        first = thread not in self._sent
        try:
            client = await self._client(thread.workspace)
            response = await client.agents_sessions_setStatus(
                channel_id=thread.channel,
                thread_ts=thread.root,
                status=wanted.status,
                title=(wanted.title or None) if first else None,
                initiator_user_id=(wanted.initiator or None) if first else None,
            )
        except SlackApiError as exc:
            if not self._features.refused(thread.workspace, "session", exc):
                log.warning("slack: agent session status not set (%s)", exc.response.get("error"))
            return
        except Exception:  # noqa: BLE001 - a session is a courtesy; the run goes on
            log.warning("slack: agent session status not set", exc_info=True)
            return
        warning = str(response.get("warning") or "")
        if NO_STOP_EVENTS in warning and not self._warned:
            self._warned = True
            log.warning("slack: subscribe the app to agent_session_stopped (%s)", NO_STOP_EVENTS)
        if wanted.status == "closed":
            self._sent.pop(thread, None)
            return
        self._sent[thread] = wanted.status
        self._sent.move_to_end(thread)
        while len(self._sent) > MAX_TRACKED:
            self._sent.popitem(last=False)
