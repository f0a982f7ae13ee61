"""Typed notes: what a PreToolUse hook tells the hooks after it (and the PostToolUse hooks).

A note is a frozen dataclass; `Notes` holds at most one of each type, so a reader asks for the
type it knows (`ctx.notes.get(ApprovalNote)`) instead of looking up string keys. The engine
itself reads one note: `ApprovalNote.bound_fingerprint` (an approval binds the exact arguments
that run; a later rewrite of them blocks the call).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

N = TypeVar("N")


@dataclass(frozen=True)
class Notes:
    """The notes of one tool call, one per type; `add` replaces a note of the same type."""

    items: tuple[object, ...] = ()

    def get(self, kind: type[N]) -> N | None:
        """The note of type `kind`, or None when no hook wrote one."""
        return next((item for item in self.items if isinstance(item, kind)), None)

    def add(self, *notes: object) -> Notes:
        kinds = {type(note) for note in notes}
        return Notes((*(item for item in self.items if type(item) not in kinds), *notes))

    def __iter__(self) -> Iterator[object]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


@dataclass(frozen=True, kw_only=True)
class ApprovalNote:
    """How the approval step ended for one call, as the call log records it.

    Written by the approval gate (`hooks.approval_gate`) or the terminal's prompt
    (`bot.terminal.approval`); read by the call log (`hooks.call_log`) and, for
    `bound_fingerprint`, by the hook registry.
    `status`: not_required, denied, blocked, thread_grant, approved, rejected, expired,
    cancelled, changes_requested. `bound_fingerprint`: the arguments the approval covers (""
    when none is bound). An approver who edited the call before approving it: `edited_by`,
    the model's `model_arguments`, and `edit_diff` (what changed, as the model is told it).
    `comment`: the decider's comment (approve or reject; '' for a timeout or cancellation).
    """

    status: str
    approval_id: str | None = None
    grant_id: str | None = None
    approvers: tuple[str, ...] = ()
    policy_rule: str = ""
    bound_fingerprint: str = ""
    edited_by: str = ""
    model_arguments: Mapping[str, Any] | None = None
    edit_diff: str = ""
    comment: str = ""  # what the approver wrote with their approval or rejection
