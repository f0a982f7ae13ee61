"""What the thread is told when a call was refused before it ran: for rate, or because its
requester already has as many approvals pending as one person may."""

from __future__ import annotations

from bot.chat.events import ApprovalLimited, CredentialWaiting, RateLimited


def rate_limit_notice(event: RateLimited) -> str:
    return (
        f"`{event.tool_name}` was refused: at most {event.limit} calls a minute {event.scope}. "
        "The agent was told to wait or work with what it has."
    )


def approval_limit_notice(event: ApprovalLimited) -> str:
    """The per-person cap on pending approvals (`CHATOPS_MAX_PENDING_APPROVALS_PER_USER`)."""
    waiting = "approval is" if event.limit == 1 else "approvals are"
    return (
        f"`{event.tool_name}` was not sent for approval: {event.limit} {waiting} already "
        "waiting for your requests, which is as many as one person may have at once. The call "
        "did not run and the agent was told why. Have the waiting cards decided, or press Stop "
        "on a run you no longer need, then ask again."
    )


def connect_notice(event: CredentialWaiting) -> str:
    """The private note with a person's connect link (per-user connector credentials)."""
    return (
        f"`{event.tool_name}` acts with your own {event.connector} account, which is not "
        f"connected yet. Connect it here (this link is for you alone and works once): "
        f"{event.link}\nThe request goes on as soon as you have connected."
    )
