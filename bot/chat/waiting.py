"""One approver's inbox: the approvals waiting for them, in no platform's markup.

The broker lists them (`Decisions.waiting_for`: pending, not past their deadline, on one
platform, that this person may approve now and has not answered yet); a surface renders the
list (Slack's App Home, Feishu's `pending` card, the console's approvals view) with each
entry's age and expiry, and the same buttons as the card. `InboxShower` is the surface side:
told whose list may have changed, it shows it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from bot.chat.threads import MessageRef
from bot.chat.views import ApprovalCardView

WAITING_TITLE = "Waiting for you"


@dataclass(frozen=True, kw_only=True)
class WaitingApproval:
    """One approval in someone's inbox: its card as it stands, when it was asked and until
    when it waits, the broker's time when it was listed (ages are read against it), and
    where its card is (for a link; None before the card was posted)."""

    card: ApprovalCardView
    created_at: datetime
    expires_at: datetime
    listed_at: datetime
    posted_at: MessageRef | None = None

    def age_and_expiry(self) -> str:
        """'asked 5 min ago · expires in 55 min': the line every surface shows."""
        now = self.listed_at
        age = short_duration((now - self.created_at).total_seconds())
        left = (self.expires_at - now).total_seconds()
        expiry = f"expires in {short_duration(left)}" if left > 0 else "expired"
        return f"asked {age} ago · {expiry}"


def short_duration(seconds: float) -> str:
    """Whole units, as a list shows them: `42` -> "42 s", `750` -> "12 min", `5400` ->
    "1 h 30 min" (an age or a time left, never negative)."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min"
    hours, minutes = divmod(whole // 60, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


@runtime_checkable
class InboxShower(Protocol):
    """A surface that keeps a per-person list of waiting approvals on show (Slack's App Home)."""

    async def refresh_inbox(self, users: Sequence[str] | None, *, workspace: str = "") -> None:
        """Show the list again to `users` (None: everyone this surface shows one to) in
        `workspace`, where the approval that changed was asked; never raises: a list that could
        not be refreshed must not undo a decision."""
        ...
