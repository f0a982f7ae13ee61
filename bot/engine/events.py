"""Step events: the seed's SSE protocol as typed objects.

One frozen dataclass per event; `type` holds the wire name, which is a contract (the web console
sends it as SSE, the status reporter and the CLI read it). `run()` takes one `emit` callable.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TokenUsage:
    """Token counts as reported by the API (no tokenizer is ever downloaded)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True)
class ThinkingStart:
    iteration: int
    type: Literal["thinking_start"] = "thinking_start"


@dataclass(frozen=True)
class ThinkingDone:
    iteration: int
    reasoning: str = ""
    type: Literal["thinking_done"] = "thinking_done"


@dataclass(frozen=True)
class IterationStart:
    iteration: int
    tool_name: str
    tool_args: dict[str, Any]
    tool_call_id: str = ""
    type: Literal["iteration_start"] = "iteration_start"


@dataclass(frozen=True)
class IterationDone:
    iteration: int
    tool_name: str
    observation: str
    error: str | None = None
    blocked: bool = False
    iter_elapsed: float = 0.0
    tool_call_id: str = ""
    type: Literal["iteration_done"] = "iteration_done"


@dataclass(frozen=True)
class ToolProgress:
    """A running tool said how far it got (an MCP server's `notifications/progress`): the
    status shows it on the call's step. `total` None: the tool does not know the end."""

    iteration: int
    tool_name: str
    tool_call_id: str
    progress: float
    total: float | None = None
    message: str = ""
    type: Literal["tool_progress"] = "tool_progress"


@dataclass(frozen=True)
class AnswerSignal:
    """The agent decided to finish (step channel `{type: "answer", status: "start"}`)."""

    type: Literal["answer_signal"] = "answer_signal"


@dataclass(frozen=True)
class AnswerStart:
    type: Literal["answer_start"] = "answer_start"


@dataclass(frozen=True)
class AnswerDelta:
    content: str
    type: Literal["answer_delta"] = "answer_delta"


@dataclass(frozen=True)
class AnswerReset:
    """The synthesis stream failed after some deltas: whatever was shown of it is void and
    `content` (the loop's own answer) replaces it (SSE: `answer {status: "reset", content}`)."""

    content: str
    type: Literal["answer_reset"] = "answer_reset"


@dataclass(frozen=True)
class AnswerDone:
    type: Literal["answer_done"] = "answer_done"


@dataclass(frozen=True)
class Compact:
    """Older turns were compacted: message counts and estimated tokens before and after;
    `summarized`: the model wrote the summary (False: the drop-and-note fallback)."""

    original_messages: int
    kept_messages: int
    tokens_before: int = 0
    tokens_after: int = 0
    summarized: bool = False
    type: Literal["compact"] = "compact"


@dataclass(frozen=True)
class Phase:
    phase: str
    total_tools: int = 0
    type: Literal["phase"] = "phase"


@dataclass(frozen=True)
class Inject:
    content: str
    type: Literal["inject"] = "inject"


@dataclass(frozen=True)
class Done:
    answer: str
    iterations: int
    usage: TokenUsage = field(default_factory=TokenUsage)
    elapsed: float = 0.0
    type: Literal["done"] = "done"


StepEvent = (
    ThinkingStart
    | ThinkingDone
    | IterationStart
    | IterationDone
    | ToolProgress
    | AnswerSignal
    | AnswerStart
    | AnswerDelta
    | AnswerReset
    | AnswerDone
    | Compact
    | Phase
    | Inject
    | Done
)

Emit = Callable[[StepEvent], Awaitable[None] | None]


async def emit_safely(emit: Callable[[Any], Awaitable[None] | None] | None, event: Any) -> None:
    """Deliver one event to a sync or async emitter; a failing emitter is logged, never raised:
    a broken status display or listener must not stop the run it observes."""
    if emit is None:
        return
    try:
        outcome = emit(event)
        if inspect.isawaitable(outcome):
            await outcome
    except Exception:  # noqa: BLE001 - observers never break the run
        log.exception("event emitter failed on %s; ignoring", getattr(event, "type", event))
