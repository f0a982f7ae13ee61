"""Tools as data: a name, a description, a JSON Schema and one async `invoke`.

A manifest compiles to `Tool` values, so the engine cannot tell HTTP from MCP from a built-in.
What other features know of a tool rides along as opaque `metadata` (the approval policy, whose
schema is `bot.approvals.schema`); the engine never looks at it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolImage:
    """An image a tool returned, for a model that can see images (`images` ability): base64
    `data` of one `mime_type`. The observation text describes it too, so a model that cannot
    see images, the call log and the status read words, never the bytes."""

    mime_type: str
    data: str


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns: the observation text the model reads.

    `content_type` (e.g. `text/html`) and `artifact` (the tool's own say) mark a document for
    the user: the engine keeps it out of the model's context (`bot.engine.artifacts`);
    `filename` names it when the tool knows a name. `images` ride beside the text: the engine
    shows them to a model that accepts images, in a user message after the tool results
    (`bot.engine.prompts.tool_images`).
    """

    content: str
    is_error: bool = False
    content_type: str = ""
    artifact: bool = False
    filename: str = ""
    images: tuple[ToolImage, ...] = ()

    @classmethod
    def error(cls, message: str) -> ToolResult:
        return cls(content=message, is_error=True)


ToolInvoke = Callable[[dict[str, Any]], Awaitable[ToolResult]]


ProgressReport = Callable[[float, float | None, str], Awaitable[None]]


@dataclass(frozen=True)
class Question:
    """A tool asks the people of the run for input mid-call (an MCP server's elicitation):
    `message` as the tool wrote it, `schema` the flat JSON Schema of the answer, `asker` who
    asks (the connector), shown on the form so nobody takes it for the bot's own question."""

    message: str
    schema: Mapping[str, Any]
    asker: str


@dataclass(frozen=True)
class Reply:
    """What the people answered: `accept` with `content` (valid against the schema), `decline`,
    or `cancel` (dismissed, or nobody answered in time)."""

    action: str  # "accept" | "decline" | "cancel"
    content: Mapping[str, Any] | None = None


AskUser = Callable[[Question], Awaitable[Reply]]


@dataclass(frozen=True, kw_only=True)
class Audience:
    """Who a call is made for and where its result will be shown: a tool whose answer depends
    on who may see it (the audit report) or acts as a person (per-user credentials) reads it
    (`Tool.invoke_for`). `requester` started the run; `approvers`: who approved this call
    (empty when it needed no approval); `workspace`: the team or tenant user ids belong to."""

    platform: str = ""
    workspace: str = ""
    channel: str = ""
    direct: bool = False  # a direct message: only its one user sees the answer
    requester: str = ""
    requesters: tuple[str, ...] = ()
    approvers: tuple[str, ...] = ()
    # where a long call says how far it got (progress, total or None, message): the run's status
    progress: ProgressReport | None = None
    # where a tool asks the run's requesters a question mid-call (a form in the thread); None:
    # nobody can be asked (the tool is told the question was cancelled)
    ask: AskUser | None = None


AudienceInvoke = Callable[[Audience, dict[str, Any]], Awaitable[ToolResult]]


@dataclass(frozen=True, kw_only=True)
class Tool:
    """One callable tool, `<connector>__<action>`."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    invoke: ToolInvoke
    connector: str = ""
    action: str = ""
    # topics within the connector (an imported operation's OpenAPI tags): with many tools, the
    # selection catalogue lists the tool under its connector and its first tag
    tags: tuple[str, ...] = ()
    # what other features know of the tool, by key (the engine never reads it): the approval
    # policy, for one (`bot.approvals.schema.policy_of`)
    metadata: Mapping[str, object] = field(default_factory=dict)
    secret_values: Callable[[], Iterable[str]] = field(default=lambda: ())
    # what arguments are checked against before any hook, when it differs from `parameters`
    # (an MCP server's full schema where the model is shown a shortened one)
    validation_schema: Mapping[str, Any] | None = None
    # called instead of `invoke` with who the call is for and where its answer is shown
    invoke_for: AudienceInvoke | None = None

    @property
    def argument_schema(self) -> Mapping[str, Any]:
        return self.parameters if self.validation_schema is None else self.validation_schema

    @property
    def summary(self) -> str:
        """The one line shown in the compact selection catalogue (about 80 characters)."""
        first = self.description.strip().splitlines()[0] if self.description.strip() else ""
        return first[:80]

    def openai_schema(self) -> dict[str, Any]:
        """The `tools=[...]` entry for native function calling."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters) or {"type": "object", "properties": {}},
            },
        }


async def _not_callable(args: dict[str, Any]) -> ToolResult:
    return ToolResult.error("no such tool")


def unknown_tool(name: str) -> Tool:
    """What a call to a tool that does not exist is recorded as (it never runs)."""
    shown = name[:200]
    return Tool(
        name=shown, description="", parameters={}, invoke=_not_callable, action=shown
    )  # fmt: skip


def fingerprint(tool_name: str, args: Mapping[str, Any]) -> str:
    """A stable hash of (tool, arguments): cycle detection and approval binding use it."""
    canonical = json.dumps(
        {"tool": tool_name, "args": args}, sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


class ToolRegistry:
    """An ordered set of tools by name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"duplicate tool name {tool.name!r}")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def snapshot(self) -> ToolRegistry:
        """A copy: a run keeps the tools it started with while new ones are registered."""
        return ToolRegistry(self._tools.values())

    def subset(self, names: Iterable[str]) -> ToolRegistry:
        """A registry of the named tools that exist here, in this registry's order."""
        wanted = set(names)
        return ToolRegistry(tool for name, tool in self._tools.items() if name in wanted)

    def secret_values(self) -> list[str]:
        """Every registered tool's secret values (each connector's source read once): the
        process masks them all, whichever tool's result carries them."""
        sources = {id(tool.secret_values): tool.secret_values for tool in self._tools.values()}
        found: list[str] = []
        for source in sources.values():
            try:
                found.extend(value for value in source() if value)
            except Exception:  # noqa: BLE001 - one connector's failure hides no other's secrets
                log.warning("could not read a connector's secret values", exc_info=True)
        return found

    def openai_schemas(self) -> list[dict[str, Any]]:
        return [tool.openai_schema() for tool in self._tools.values()]

    def catalogue(self) -> str:
        """Name and one line per tool, no schemas: the input of the selection call."""
        return "\n".join(f"- {tool.name}: {tool.summary}" for tool in self._tools.values())

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools
