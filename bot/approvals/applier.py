"""Applying a stored click: the inbox hands a `DecisionRecord` here, the broker decides, and a
clicker whose click changed nothing is told why where they clicked.

A click reads surfaces -> inbox -> approvals: the surface stores the verified record before its
acknowledgement (`bot.inbox`), and the inbox's worker applies it with the function built here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from bot.approvals.broker import ApprovalBroker
from bot.chat.decisions import DecisionRecord, DecisionResult
from bot.chat.surface import Surface


def decision_applier(
    broker: ApprovalBroker, surfaces: Callable[[], Mapping[str, Surface]]
) -> Callable[[DecisionRecord], Awaitable[DecisionResult]]:
    """How the inbox applies a stored click: the broker decides; a clicker whose click changed
    nothing (not an approver, already decided) is told privately where they clicked."""

    async def apply(record: DecisionRecord) -> DecisionResult:
        result = await broker.decide(
            record.approval_id,
            record.user_id,
            record.decision,
            record.reason,
            platform=record.platform,
            grantees=list(record.grantees) or None,
            click=record.card,
            arguments=record.arguments,
            fingerprint=record.fingerprint,
        )
        surface = surfaces().get(record.platform)
        if result.status != "decided" and record.reply_to is not None and surface is not None:
            await surface.notify_user(record.reply_to, record.user_id, result.message)
        return result

    return apply
