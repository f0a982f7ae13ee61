"""A run's one `emit`: every event to the status message first, then to every listener; a call
refused for rate (or for too many pending approvals) is also said in the thread."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.chat.events import ApprovalLimited, CredentialWaiting, Listener, RateLimited, RunEvent
from bot.chat.surface import Surface
from bot.chat.threads import ThreadRef
from bot.engine.events import emit_safely
from bot.runs.notices import approval_limit_notice, connect_notice, rate_limit_notice


def run_emitter(
    run_id: str,
    on_status: Callable[[RunEvent], None],
    listeners: list[Listener],
    surface: Surface,
    thread: ThreadRef,
) -> Callable[[RunEvent], Awaitable[None]]:
    """A run's one `emit`: the status message first, then any listeners; a call refused for
    rate is also said in the thread (once per tool and run); a connect link goes privately to
    the one person who must connect."""
    told: set[str] = set()

    async def emit(event: RunEvent) -> None:
        on_status(event)
        if isinstance(event, RateLimited) and event.tool_name not in told:
            told.add(event.tool_name)
            await surface.post_notice(thread, rate_limit_notice(event))
        if isinstance(event, ApprovalLimited) and event.type not in told:
            told.add(event.type)  # once per run: the model is told of every refused call
            mention = (event.person,) if event.person else ()
            await surface.post_notice(thread, approval_limit_notice(event), mention=mention)
        if isinstance(event, CredentialWaiting):  # to that person only (Slack: ephemeral)
            await surface.notify_user(thread, event.person, connect_notice(event))
        for listener in listeners:
            await emit_safely(lambda e, fn=listener: fn(run_id, thread, e), event)

    return emit
