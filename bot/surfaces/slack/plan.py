"""The status message as Slack's own plan: a `plan` block of `task_card`s (pure, no I/O).

Each step is a task (its tool, the arguments summarised as `details`, the observation as
`output`); an approval wait is a task of its own, just before the call it gates. Task states
follow Slack's four: pending, in_progress, complete, error. The newest tasks are kept when
there are too many for one message; the plan's title says how many earlier ones were left out.
Texts are plain (`rich_text` text elements): nothing in them is markup, so no mention or link
a tool or the model wrote can come alive here.
"""

from __future__ import annotations

from typing import Any

from bot.chat.views import StatusStep, StatusView
from bot.statuses import RunStatus
from bot.surfaces.slack.markdown import escape
from bot.surfaces.slack.render import (
    RUN_TITLES,
    Blocks,
    SlackMessage,
    context,
    cut,
    status_text,
    stop_block,
)

MAX_TASKS = 20
TASKS_TEXT_BUDGET = 9_000  # of Slack's ~12,500 characters of block text per message
TITLE_CHARS = 150
SUMMARY_CHARS = 300

_TASK_STATUS = {
    "running": "in_progress",
    "waiting_approval": "pending",
    "done": "complete",
    "failed": "error",
    "blocked": "error",
}
_APPROVAL_STATUS = {"waiting": "in_progress", "approved": "complete"}
_PLAN_EMOJI = {
    RunStatus.RUNNING: "\u23f3",
    RunStatus.WAITING_APPROVAL: "\u270b",
    RunStatus.DONE: "\u2705",
    RunStatus.FAILED: "\u274c",
    RunStatus.CANCELLED: "\u2716\ufe0f",
}


def rich_text(text: str) -> dict[str, Any]:
    """One plain paragraph as a `rich_text` object (Slack refuses an empty text element)."""
    leaf = {"type": "text", "text": text or " "}
    return {"type": "rich_text", "elements": [{"type": "rich_text_section", "elements": [leaf]}]}


def _task(task_id: str, title: str, status: str, *, details: str = "", output: str = "") -> dict:
    task: dict[str, Any] = {
        "type": "task_card",
        "task_id": task_id[:255],
        "title": cut(title, TITLE_CHARS),
        "status": status,
    }
    if details:
        task["details"] = rich_text(cut(details, SUMMARY_CHARS))
    if output:
        task["output"] = rich_text(cut(output, SUMMARY_CHARS))
    return task


def step_tasks(step: StatusStep, index: int) -> list[dict[str, Any]]:
    """A step's task, and its approval's task when one was asked for."""
    key = step.key or f"step-{index}"
    output = step.output or (step.detail if not step.approval else "")
    tasks = [_task(key, step.label, _TASK_STATUS.get(step.state, "pending"),
                   details=step.arguments, output=output)]  # fmt: skip
    if step.approval:
        status = _APPROVAL_STATUS.get(step.approval, "error")
        detail = "waiting for a decision" if step.approval == "waiting" else step.detail
        tasks.insert(0, _task(f"{key}:approval", f"Approval for {step.label}", status,
                              output=detail))  # fmt: skip
    return tasks


def _size(task: dict[str, Any]) -> int:
    texts = [task["title"]] + [
        task[part]["elements"][0]["elements"][0]["text"] for part in ("details", "output")
        if part in task
    ]  # fmt: skip
    return sum(len(t) for t in texts)


def plan_block(view: StatusView) -> dict[str, Any]:
    tasks = [t for i, step in enumerate(view.steps) for t in step_tasks(step, i)]
    kept: list[dict[str, Any]] = []
    size = 0
    for task in reversed(tasks):  # the newest first: the running step is the one people watch
        if len(kept) >= MAX_TASKS or size + _size(task) > TASKS_TEXT_BUDGET:
            break
        kept.append(task)
        size += _size(task)
    kept.reverse()
    title = f"{_PLAN_EMOJI.get(view.state, '')} {RUN_TITLES[view.state].split(' ', 1)[1]}"
    if view.headline and view.headline not in title:
        title += f" \u00b7 {view.headline}"
    hidden = len(tasks) - len(kept)
    if hidden:
        title += f" (\u2026 {hidden} earlier)"
    block: dict[str, Any] = {"type": "plan", "title": cut(title.strip(), TITLE_CHARS)}
    if kept:
        block["tasks"] = kept
    return block


def render_plan_status(view: StatusView) -> SlackMessage:
    """The run's status message as a plan, with its totals and, while live, the Stop button."""
    blocks: Blocks = [plan_block(view)]
    if view.totals:
        blocks.append(context(escape(view.totals)))
    if view.live:
        blocks.append(stop_block(view))
    return SlackMessage(text=status_text(view), blocks=blocks)
