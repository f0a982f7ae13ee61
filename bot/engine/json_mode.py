"""JSON mode: tools described in the system prompt, one JSON action per assistant turn.

The action protocol is fixed (DESIGN §2): `{"reasoning", "action": "tool_call", "tool_name",
"tool_args"}` or `{"reasoning", "action": "final_answer", "answer"}`; observations come back as
user messages starting `Observation:`. Prose around the JSON is tolerated (`extract_json`); an
unparseable reply gets one reformat request, then its text is taken as the answer. Interrupts are
drained right after each assistant message (plain messages have no pairing rule to break).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.engine import prompts, rules
from bot.engine.events import ThinkingDone
from bot.engine.execution import execute_call
from bot.engine.scope import CONTINUE, RunScope
from bot.engine.structured import extract_json


@dataclass(frozen=True)
class Action:
    kind: str  # "tool_call" | "final_answer" | "unparsed"
    reasoning: str = ""
    tool_name: str = ""
    tool_args: Any = None
    answer: str = ""


def parse_action(text: str) -> Action:
    """The first JSON object in the reply, read as an action; anything else is `unparsed`."""
    data = extract_json(text)
    if data is None:
        return Action("unparsed", answer=text)
    reasoning = str(data.get("reasoning") or "")
    action = data.get("action")
    name = data.get("tool_name")
    if action == "tool_call" or (action is None and isinstance(name, str)):
        if not isinstance(name, str) or not name:
            return Action("unparsed", answer=text)
        args = data.get("tool_args")
        return Action("tool_call", reasoning, name, args if args is not None else {})
    if action == "final_answer" or (action is None and "answer" in data):
        answer = data.get("answer")
        return Action("final_answer", reasoning, answer=answer if isinstance(answer, str) else text)
    return Action("unparsed", answer=text)


async def json_step(scope: RunScope) -> bool:
    """One iteration; True when the run has its final answer."""
    state = scope.state
    fmt = {"type": "json_object"} if scope.llm.abilities.get("json_mode") else None
    reply = await scope.call_model(response_format=fmt)
    text = reply.content or ""
    state.append(prompts.assistant(text))
    action = parse_action(text)
    reasoning = action.reasoning or reply.reasoning_content or ""
    await scope.send(ThinkingDone(state.iteration, reasoning))
    interrupted = await scope.drain_interrupts()
    if action.kind == "unparsed":
        if not state.parse_retry_pending:
            state.parse_retry_pending = True
            state.append(prompts.user(prompts.JSON_REFORMAT))
            return CONTINUE
        action = Action("final_answer", reasoning, answer=text)  # retried once: use the text
    state.parse_retry_pending = False
    if action.kind == "tool_call":
        state.checklist_pending = False
        state.pending_json_call = {
            "id": state.claim_call_id(),
            "name": action.tool_name,
            "args": action.tool_args,
            "reasoning": reasoning,
        }
        await scope.checkpoint()
        await run_pending_json_call(scope)
        return CONTINUE
    return await scope.offer_answer(action.answer, interrupted=interrupted)


async def run_pending_json_call(scope: RunScope) -> None:
    """Execute the recorded JSON-mode call (also on resume), append its observation, inject."""
    state = scope.state
    call = state.pending_json_call
    if call is None:
        return
    before = state.tool_calls_made
    outcome = await execute_call(
        scope, call["id"], call["name"], _raw(call["args"]), call["reasoning"]
    )
    state.pending_json_call = None
    state.append(prompts.observation(outcome.observation))
    if outcome.images:
        state.append(prompts.tool_images([(outcome.name, outcome.images)]))
    for text in rules.injections(
        state, scope.limits, [(outcome.name, outcome.fingerprint)], before
    ):
        state.append(prompts.user(text))


def _raw(args: Any) -> Any:
    return args if isinstance(args, dict | str) or args is None else str(args)
