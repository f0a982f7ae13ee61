"""Text every platform's renderer shares: a status step's line, how long a grant lasts, and
what "approve for this thread" allows (plain text; each renderer escapes it for its markup)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from bot.chat.views import ApprovalCardView, StatusStep


@dataclass(frozen=True, kw_only=True)
class StepLineStyle:
    """How one platform's markup writes a status step (the line itself is `step_line`'s):
    its icons, its escaping and cutting, the label's form and where the detail goes."""

    icons: Mapping[str, str]
    no_icon: str = ""
    escape: Callable[[str], str]
    cut: Callable[[str, int], str]
    label: str = "{}"  # the escaped label goes in the braces
    detail: str  # the escaped, cut detail goes in the braces
    detail_chars: int


def step_line(step: StatusStep, style: StepLineStyle) -> str:
    """One checklist line: icon, label, elapsed seconds, then the detail (if any)."""
    icon = style.icons.get(step.state, style.no_icon)
    line = f"{icon} {style.label.format(style.escape(step.label))}"
    if step.elapsed_s is not None:
        line += f" ({step.elapsed_s:.1f}s)"
    if step.detail:
        line += style.detail.format(style.escape(style.cut(step.detail, style.detail_chars)))
    return line


def describe_duration(seconds: float) -> str:
    """`900` -> "15 min", `7200` -> "2 h", `45` -> "45 s" (cards say how long a grant lasts)."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def grant_note(view: ApprovalCardView) -> str:
    """What "approve for this thread" would allow, in one sentence (plain text)."""
    if view.grant_ttl_s is None:
        return ""
    who = ", ".join(view.requesters) or "the requester"
    same = "these same arguments"
    if view.grant_vary:
        same += f" (except {', '.join(view.grant_vary)}, which may differ)"
    return (
        f"Approve for this thread: for {describe_duration(view.grant_ttl_s)}, {view.tool_name} "
        f"with {same} may run again in this thread without asking, when requested by {who} "
        "(or the people you name), while the call falls under the same approval rule and you "
        "remain one of its approvers."
    )


def grant_button_label(view: ApprovalCardView) -> str:
    """The label of the "approve for this thread" button, with how long a grant lasts."""
    return f"Approve for this thread ({describe_duration(view.grant_ttl_s or 0)})"
