"""Small builders for engine tests: tools that record their calls, an event recorder."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from bot.engine import prompts
from bot.engine.events import StepEvent
from bot.engine.tools import Tool, ToolRegistry, ToolResult


class Recorder:
    """An `emit` callable that keeps every event."""

    def __init__(self) -> None:
        self.events: list[StepEvent] = []

    def __call__(self, event: StepEvent) -> None:
        self.events.append(event)

    def of(self, kind: str) -> list[Any]:
        return [event for event in self.events if event.type == kind]

    def types(self) -> list[str]:
        return [event.type for event in self.events]


def echo_tool(
    name: str,
    calls: list[dict[str, Any]] | None = None,
    *,
    reply: str | Callable[[dict[str, Any]], Awaitable[ToolResult]] = "ok",
    description: str = "",
) -> Tool:
    """A tool answering `reply` (or awaiting it) and appending its arguments to `calls`."""

    async def invoke(args: dict[str, Any]) -> ToolResult:
        if calls is not None:
            calls.append(dict(args))
        if callable(reply):
            return await reply(args)
        return ToolResult(reply)

    return Tool(
        name=name,
        description=description or f"The {name} tool.",
        parameters={"type": "object", "properties": {"id": {"type": "string"}}},
        invoke=invoke,
    )


def registry(*tools: Tool) -> ToolRegistry:
    return ToolRegistry(tools)


def contents(messages: list[dict[str, Any]]) -> list[str]:
    return [str(message.get("content") or "") for message in messages]


def is_compaction(body: dict[str, Any]) -> bool:
    """The request is the engine's compaction call (not a loop or synthesis call)."""
    messages = body.get("messages") or []
    return bool(messages) and messages[0].get("content") == prompts.COMPACTION_SYSTEM
