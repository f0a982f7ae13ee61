"""What the run manager needs of an agent (`bot.engine.agent.ReActAgent`; tests pass fakes)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, Protocol

from bot.engine.events import Emit
from bot.engine.hooks import RunContext
from bot.engine.interrupts import InterruptQueue
from bot.engine.state import AgentResult
from bot.engine.stopping import StopSignal
from bot.engine.tools import ToolRegistry


class Agent(Protocol):
    """What the run manager needs of `bot.engine.agent.ReActAgent`."""

    tools: ToolRegistry  # a tool's secret values are masked in the status message

    async def run(
        self,
        query: str,
        *,
        history: Sequence[dict[str, Any]] = (),
        context: RunContext[Any] | None = None,
        interrupts: InterruptQueue | None = None,
        emit: Emit | None = None,
        on_checkpoint: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
        resume_from: dict[str, Any] | None = None,
        stop: StopSignal | None = None,
        connectors: Collection[str] | None = None,
    ) -> AgentResult: ...

    async def synthesize(self, result: AgentResult, *, emit: Emit | None = None) -> str: ...
