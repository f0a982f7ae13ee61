"""The ports a surface is given: everything it may call, and nothing else (never the runtime).

Built by the runtime (`Runtime.surface_ports`): the inbox a surface stores events in before it
acknowledges them, the decisions port (the approval broker), dispatch to the run manager, the
audit command, Stop, registration, and the run events' listeners. Their messages are the chat
vocabulary's (`bot.chat`), so a surface imports no service to speak to one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from bot.chat.audit_report import AuditChatReply, Place
from bot.chat.controls import FeedbackClick, StopRequest, StopResult
from bot.chat.decisions import CardClick, Decision, DecisionRecord, DecisionResult
from bot.chat.events import Listener
from bot.chat.forms import EditCheck, EditForm
from bot.chat.health import SurfaceHealth
from bot.chat.questions import Questions
from bot.chat.surface import Surface
from bot.chat.threads import InboundMessage
from bot.chat.views import ApprovalCardView, BotStatus
from bot.chat.waiting import WaitingApproval


@dataclass(frozen=True)
class DispatchOutcome:
    """What `dispatch()` did with a message."""

    kind: Literal["duplicate", "interrupt", "forwarded", "started", "ignored", "busy", "limited"]
    conversation_id: int | None = None
    run_id: str | None = None


class Decisions(Protocol):
    """The decisions port (the approval broker): decide for a verified clicker, or say why not
    before asking them more; the card of an approval as it stands; the form to edit its call
    in, and a submitted edit checked before it is stored (`bot.chat.forms`)."""

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
    ) -> DecisionResult: ...

    async def edit_form(
        self, approval_id: str, user_id: str, *, platform: str, click: CardClick | None = None
    ) -> EditForm | DecisionResult: ...

    async def check_edit(
        self,
        approval_id: str,
        user_id: str,
        values: dict[str, str | None],
        *,
        fingerprint: str,
        platform: str,
        click: CardClick | None = None,
    ) -> EditCheck: ...

    async def refusal(
        self,
        approval_id: str,
        user_id: str,
        decision: Decision,
        *,
        platform: str,
        click: CardClick | None = None,
    ) -> DecisionResult | None: ...

    async def view(
        self, approval_id: str, *, click: CardClick | None = None
    ) -> ApprovalCardView | None: ...

    async def waiting_for(
        self, user_id: str, *, platform: str, workspace: str | None = None
    ) -> list[WaitingApproval]: ...


class InboxPort(Protocol):
    """Where a surface stores a message or a click before acknowledging it (`bot.inbox`);
    its workers dispatch and decide from there."""

    def route_messages(
        self, platform: str, handler: Callable[[InboundMessage, int], Awaitable[None]]
    ) -> None: ...

    async def accept_message(self, message: InboundMessage) -> bool: ...

    async def accept_decision(self, record: DecisionRecord) -> asyncio.Future[DecisionResult]: ...

    async def accept_feedback(self, click: FeedbackClick) -> None: ...

    async def done(self, inbox_id: int) -> None: ...

    async def wait_idle(self, timeout: float) -> None: ...  # noqa: ASYNC109 - like the inbox's


# A message to the run manager: a new run, an interrupt of the active one, or nothing (the
# inbox's row id when it came through the inbox)
Dispatch = Callable[[InboundMessage, int | None], Awaitable[DispatchOutcome]]
# A chat audit command (user, text, where it was asked): the reply, or None when the text is no
# audit command (the agent gets it)
AuditCommand = Callable[[str, str, Place], Awaitable[AuditChatReply | None]]
# Stop a run (`RunManager.stop_request`): who may is checked there, from the request's verified
# user and the run the message belongs to
Stop = Callable[[StopRequest], Awaitable[StopResult]]
# A workspace removed the app (platform, workspace): stop its runs here; how many were stopped
EndWorkspace = Callable[[str, str], Awaitable[int]]


async def _no_runs(platform: str, workspace: str) -> int:
    return 0


@dataclass(frozen=True, kw_only=True)
class SurfacePorts:
    """Everything a surface may call, and nothing else: never the runtime.

    `dispatch`: hand a message to the run manager; `inbox`: store events before the ack;
    `decisions`: the approval broker; `audit`: answer a chat audit command; `register`: route
    this platform's runs (and cards) to the surface; `listen`: see every run's events (the
    console's live stream); `status`: what the console shows about the bot; `stop`: a person
    pressed Stop; `health`: where a surface says whether its credentials were accepted;
    `end_workspace`: a workspace uninstalled the app, its runs end (cancelled);
    `live_processes`: how many processes share a platform's per-workspace budgets.
    """

    dispatch: Dispatch
    inbox: InboxPort
    decisions: Decisions
    audit: AuditCommand
    stop: Stop
    register: Callable[[Surface], None]
    listen: Callable[[Listener], None]
    status: Callable[[], BotStatus]
    health: SurfaceHealth = field(default_factory=SurfaceHealth)
    end_workspace: EndWorkspace = _no_runs
    # where a tool's question (an MCP server's elicitation form) is answered; None: nowhere
    questions: Questions | None = None
    # how many bot processes are live (their heartbeats, `LeaseKeeper.live_processes`): a
    # surface paces a platform budget that holds across processes to its share of it
    live_processes: Callable[[], int] = lambda: 1
