"""Per-run state apart from per-run inputs: `RunState`, `StepRecord`, `AgentResult`.

`ReActAgent` holds only collaborators and limits, so one instance serves concurrent runs; all that
changes during a run lives here. `RunState.to_dict()` is the checkpoint (JSON-serialisable) and
`RunState.from_dict()` restores it, so a run can survive a restart.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from bot.engine.artifacts import Artifact, artifacts_of
from bot.engine.events import TokenUsage

Mode = Literal["native", "json"]
Stopped = Literal["answer", "max_iterations", "error", "timeout", "token_budget"]
CHECKPOINT_VERSION = 1


@dataclass
class StepRecord:
    """One tool call attempt as the run saw it (the synthesis trace and the fallback use it)."""

    iteration: int
    tool_name: str
    tool_args: dict[str, Any]
    observation: str
    error: str | None = None
    blocked: bool = False
    elapsed: float = 0.0
    tool_call_id: str = ""


@dataclass
class AgentResult:
    """What `run()` returns: the loop's answer, full trace and accounting."""

    query: str
    answer: str
    messages: list[dict[str, Any]]
    iterations: int
    usage: TokenUsage
    elapsed: float
    steps: list[StepRecord]
    stopped: Stopped
    artifacts: list[Artifact] = field(default_factory=list)  # documents for the user
    # replies read with the final answer on the last iteration: no step was left to act on
    # them, so the answer is kept and the synthesis is told of them
    late_interrupts: list[str] = field(default_factory=list)
    failure: Exception | None = None  # the model's failure that ended the run (`stopped="error"`)


@dataclass
class RunState:
    """Everything that changes during one run.

    `messages` are plain OpenAI dicts; `pinned` holds the indexes of messages compaction must
    keep (system prompt, the query, user interrupts), tracked here so nothing extra is sent.
    """

    query: str
    mode: Mode
    messages: list[dict[str, Any]]
    pinned: set[int] = field(default_factory=set)
    tool_names: list[str] | None = None  # the selected subset; None = every tool
    iteration: int = 0
    tool_calls_made: int = 0
    call_counts: dict[str, int] = field(default_factory=dict)
    checklist_sent: bool = False
    checklist_pending: bool = False
    parse_retry_pending: bool = False
    pending_json_call: dict[str, Any] | None = None
    usage: TokenUsage = field(default_factory=TokenUsage)
    steps: list[StepRecord] = field(default_factory=list)
    answer: str = ""
    elapsed_before: float = 0.0  # time spent before a resume
    waited_before: float = 0.0  # of which waiting for people (not counted by the time budget)
    requesters: list[str] = field(default_factory=list)  # everyone whose message it has read
    call_ids: set[str] = field(default_factory=set)  # every tool-call id this run has used
    artifacts: list[Artifact] = field(default_factory=list)  # documents kept out of context
    late_interrupts: list[str] = field(default_factory=list)  # read with no iteration left

    def artifact_names(self) -> set[str]:
        return {artifact.name for artifact in self.artifacts}

    def add_requesters(self, people: Iterable[str]) -> None:
        """The run has read these people's messages: each is a requester from now on."""
        for person in people:
            if person and person not in self.requesters:
                self.requesters.append(person)

    def claim_call_id(self, proposed: str | None = None) -> str:
        """A tool-call id unique within the run: the model server's own when it sent one that
        is new, else a fresh one (servers omit ids or repeat them, and approvals and the call
        log key on the id: a repeated id must never meet an earlier call's approval)."""
        call_id = proposed if proposed and proposed not in self.call_ids else _new_call_id()
        self.call_ids.add(call_id)
        return call_id

    def append(self, message: dict[str, Any], *, pinned: bool = False) -> None:
        if pinned:
            self.pinned.add(len(self.messages))
        self.messages.append(message)

    def replace_messages(self, messages: list[dict[str, Any]], pinned: set[int]) -> None:
        self.messages = messages
        self.pinned = pinned

    def to_dict(self, *, elapsed: float, waited: float = 0.0) -> dict[str, Any]:
        """The checkpoint: JSON-serialisable, restored by `from_dict`."""
        return {
            "version": CHECKPOINT_VERSION,
            "query": self.query,
            "mode": self.mode,
            "messages": [dict(message) for message in self.messages],
            "pinned": sorted(self.pinned),
            "tool_names": list(self.tool_names) if self.tool_names is not None else None,
            "iteration": self.iteration,
            "tool_calls_made": self.tool_calls_made,
            "call_counts": dict(self.call_counts),
            "checklist_sent": self.checklist_sent,
            "checklist_pending": self.checklist_pending,
            "parse_retry_pending": self.parse_retry_pending,
            "pending_json_call": self.pending_json_call,
            "usage": {
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
            },
            "steps": [asdict(step) for step in self.steps],
            "answer": self.answer,
            "elapsed": elapsed,
            "waited": waited,
            "requesters": list(self.requesters),
            "call_ids": sorted(self.call_ids),
            "artifacts": [artifact.to_dict() for artifact in self.artifacts],
            "late_interrupts": list(self.late_interrupts),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunState:
        if data.get("version") != CHECKPOINT_VERSION:
            raise ValueError(f"unsupported checkpoint version {data.get('version')!r}")
        usage = data.get("usage") or {}
        state = cls(
            query=data["query"],
            mode=data["mode"],
            messages=[dict(message) for message in data["messages"]],
            pinned=set(data.get("pinned") or ()),
            tool_names=data.get("tool_names"),
            iteration=int(data.get("iteration", 0)),
            tool_calls_made=int(data.get("tool_calls_made", 0)),
            call_counts=dict(data.get("call_counts") or {}),
            checklist_sent=bool(data.get("checklist_sent")),
            checklist_pending=bool(data.get("checklist_pending")),
            parse_retry_pending=bool(data.get("parse_retry_pending")),
            pending_json_call=data.get("pending_json_call"),
            usage=TokenUsage(
                int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
            ),
            steps=[StepRecord(**step) for step in data.get("steps") or ()],
            answer=data.get("answer", ""),
            elapsed_before=float(data.get("elapsed", 0.0)),
            waited_before=float(data.get("waited", 0.0)),
            requesters=list(data.get("requesters") or ()),
            call_ids=set(data.get("call_ids") or ()),
            artifacts=artifacts_of(data),
            late_interrupts=[str(text) for text in data.get("late_interrupts") or ()],
        )
        state.call_ids.update(state.known_call_ids())  # checkpoints written before the set
        return state

    def known_call_ids(self) -> set[str]:
        """Ids found in the trace and the messages (steps, assistant calls, a pending call)."""
        ids = {step.tool_call_id for step in self.steps if step.tool_call_id}
        for message in self.messages:
            ids.update(call["id"] for call in message.get("tool_calls") or () if call.get("id"))
        if self.pending_json_call is not None:
            ids.add(self.pending_json_call["id"])
        return ids

    def unanswered_calls(self) -> list[dict[str, Any]]:
        """Native tool calls of the last assistant message with no tool result yet."""
        messages = self.messages
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if message.get("role") == "assistant":
                answered = {m.get("tool_call_id") for m in messages[index + 1 :]}
                return [c for c in message.get("tool_calls") or () if c["id"] not in answered]
            if message.get("role") != "tool":
                return []
        return []

    def trace(self) -> list[tuple[str, dict[str, Any], str, bool]]:
        """(tool, args, observation, failed) per step, for synthesis and the fallback summary."""
        return [
            (step.tool_name, step.tool_args, step.observation, bool(step.error) or step.blocked)
            for step in self.steps
        ]


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"
