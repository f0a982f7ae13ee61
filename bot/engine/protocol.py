"""The seed's SSE protocol: each typed step event as a `{type, status}` frame on its channel.

Inside, events are typed (`bot.engine.events`); on the wire (the web console's event stream)
they speak the seed's own protocol, so a frontend written for it works unchanged: `step`
(thinking, iteration, answer signal), `answer` (start, delta, done; and `reset`, ours: the
stream broke and `content` replaces what was shown), `compact`, `phase`, `inject` and `done`.
Fields are the seed's; where ours add some (a call id, token counts), they come after.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, assert_never

from bot.engine.events import (
    AnswerDelta,
    AnswerDone,
    AnswerReset,
    AnswerSignal,
    AnswerStart,
    Compact,
    Done,
    Inject,
    IterationDone,
    IterationStart,
    Phase,
    StepEvent,
    ThinkingDone,
    ThinkingStart,
    TokenUsage,
    ToolProgress,
)

Channel = Literal["step", "answer", "compact", "phase", "inject", "done"]
CHANNELS: tuple[Channel, ...] = ("step", "answer", "compact", "phase", "inject", "done")


@dataclass(frozen=True)
class SeedFrame:
    """One SSE frame: `event: <channel>` and `data: <json of data>`."""

    channel: Channel
    data: dict[str, Any]


def seed_frame(event: StepEvent) -> SeedFrame:
    """The seed's frame for one engine event."""
    match event:
        case ThinkingStart():
            return step_frame("thinking", "start", iteration=event.iteration)
        case ThinkingDone():
            return step_frame(
                "thinking", "done", iteration=event.iteration, reasoning=event.reasoning
            )
        case IterationStart():
            return step_frame(
                "iteration", "start", iteration=event.iteration, tool_name=event.tool_name,
                tool_args=event.tool_args, tool_call_id=event.tool_call_id,
            )  # fmt: skip
        case IterationDone():
            return step_frame(
                "iteration", "done", iteration=event.iteration, tool_name=event.tool_name,
                observation=event.observation, error=event.error,
                iter_elapsed=event.iter_elapsed, blocked=event.blocked,
                tool_call_id=event.tool_call_id,
            )  # fmt: skip
        case ToolProgress():
            return step_frame(
                "iteration", "progress", iteration=event.iteration, tool_name=event.tool_name,
                tool_call_id=event.tool_call_id, progress=event.progress, total=event.total,
                message=event.message,
            )  # fmt: skip
        case AnswerSignal():
            return step_frame("answer", "start")
        case AnswerStart():
            return SeedFrame("answer", {"status": "start"})
        case AnswerDelta():
            return SeedFrame("answer", {"status": "delta", "content": event.content})
        case AnswerReset():
            return SeedFrame("answer", {"status": "reset", "content": event.content})
        case AnswerDone():
            return SeedFrame("answer", {"status": "done"})
        case Compact():
            return SeedFrame(
                "compact",
                {
                    "original_messages": event.original_messages,
                    "kept_messages": event.kept_messages,
                    "tokens_before": event.tokens_before,
                    "tokens_after": event.tokens_after,
                    "summarized": event.summarized,
                },
            )
        case Phase():
            return SeedFrame("phase", {"phase": event.phase, "total_tools": event.total_tools})
        case Inject():
            return SeedFrame("inject", {"type": "inject", "content": event.content})
        case Done():
            return SeedFrame(
                "done",
                {
                    "answer": event.answer,
                    "iterations": event.iterations,
                    "usage": usage_dict(event.usage),
                    "elapsed": event.elapsed,
                },
            )
        case _:
            assert_never(event)


def usage_dict(usage: TokenUsage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }


def step_frame(kind: str, status: str, **fields: Any) -> SeedFrame:
    """A frame on the `step` channel (runtime events that are not the engine's use it too)."""
    return SeedFrame("step", {"type": kind, "status": status, **fields})
