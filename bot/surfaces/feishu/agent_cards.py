"""Pure card JSON 2.0 for the run's controls: the status card as a plan of tasks, its Stop
button, the answer's feedback buttons, and the CardKit card the answer streams into.

Buttons carry `{"chatops": "stop"}` or `{"chatops": "feedback", "rating": ...}` as their
callback value: a hint of what was pressed. Which run is meant comes from the message the
callback names (`open_message_id`), who pressed from its verified `operator`.
"""

from __future__ import annotations

from typing import Any

from bot.chat.views import StatusStep, StatusView
from bot.surfaces.feishu.render import (
    RUN_TEMPLATE,
    RUN_TITLE,
    STATUS_MAX_STEPS,
    card_frame,
    cut,
    defuse,
    markdown_element,
    plain_text,
)

CONTROL_KEY = "chatops"  # the callback value's key for these buttons (approvals use others)
STREAM_ELEMENT = "answer"  # the element_id the answer is streamed into
SUMMARY_CHARS = 300
_TASK_ICON = {
    "running": "\u23f3",
    "waiting_approval": "\U0001f552",
    "done": "\u2705",
    "failed": "\u274c",
    "blocked": "\u26d4",
}
_APPROVAL_ICON = {"waiting": "\u270b", "approved": "\u2705"}


def _button(label: str, value: dict[str, str], style: str = "default") -> dict[str, Any]:
    return {
        "tag": "button",
        "text": plain_text(label),
        "type": style,
        "behaviors": [{"type": "callback", "value": value}],
    }


def stop_button() -> dict[str, Any]:
    button = _button("Stop", {CONTROL_KEY: "stop"}, "danger")
    button["confirm"] = {
        "title": plain_text("Stop this run?"),
        "text": plain_text("The agent stops; a step already running finishes, nothing more runs."),
    }
    return button


def feedback_buttons() -> dict[str, Any]:
    """Thumbs up / down in one row."""
    columns = [
        {"tag": "column", "width": "auto",
         "elements": [_button(label, {CONTROL_KEY: "feedback", "rating": rating})]}
        for label, rating in (("\U0001f44d", "up"), ("\U0001f44e", "down"))
    ]  # fmt: skip
    return {"tag": "column_set", "flex_mode": "flow", "columns": columns}


def _task_lines(step: StatusStep) -> list[str]:
    """A step as plan tasks: its approval (when one was asked), then the call itself."""
    lines = []
    if step.approval:
        icon = _APPROVAL_ICON.get(step.approval, "\u26d4")
        wait = "waiting for a decision" if step.approval == "waiting" else step.detail
        lines.append(f"{icon} **Approval for {defuse(step.label)}** \u2014 {defuse(wait)}")
    line = f"{_TASK_ICON.get(step.state, '•')} **{defuse(step.label)}**"
    if step.arguments:
        line += f"\n    {defuse(cut(step.arguments, SUMMARY_CHARS))}"
    output = step.output or ("" if step.approval else step.detail)
    if output:
        line += f"\n    \u2192 {defuse(cut(output, SUMMARY_CHARS))}"
    lines.append(line)
    return lines


def plan_status_card(view: StatusView) -> dict[str, Any]:
    """The run's status card as a plan: one task per step (and per approval wait), the newest
    kept when there are many, then the totals and, while the run is live, the Stop button."""
    steps = view.steps[-STATUS_MAX_STEPS:]
    elements: list[dict[str, Any]] = []
    if view.headline:
        elements.append(markdown_element(defuse(cut(view.headline, 1000))))
    hidden = len(view.steps) - len(steps)
    lines = [f"\u2026 {hidden} earlier steps"] if hidden else []
    lines += [line for step in steps for line in _task_lines(step)]
    if lines:
        elements.append(markdown_element("\n".join(lines)))
    if view.totals:
        elements.append(markdown_element(defuse(cut(view.totals, 500)), text_size="notation"))
    if not elements:
        elements.append(markdown_element("Starting\u2026"))
    return with_stop(
        card_frame(RUN_TITLE.get(view.state, view.state),
                   RUN_TEMPLATE.get(view.state, "blue"), elements, view.headline),
        view,
    )  # fmt: skip


def with_stop(card: dict[str, Any], view: StatusView) -> dict[str, Any]:
    """The Stop button at the bottom of a live run's status card."""
    if view.live:
        card["body"]["elements"].append(stop_button())
    return card


def with_feedback(card: dict[str, Any]) -> dict[str, Any]:
    card["body"]["elements"].append(feedback_buttons())
    return card


def stream_card(text: str) -> dict[str, Any]:
    """The card entity the answer streams into (`streaming_mode`: Feishu types out each new
    part of the element's text)."""
    return {
        "schema": "2.0",
        "config": {
            "update_multi": True,
            "streaming_mode": True,
            "summary": {"content": "Writing the answer\u2026"},
            "streaming_config": {
                "print_frequency_ms": {"default": 50},
                "print_step": {"default": 2},
                "print_strategy": "fast",
            },
        },
        "body": {"elements": [markdown_element(defuse(text), element_id=STREAM_ELEMENT)]},
    }
