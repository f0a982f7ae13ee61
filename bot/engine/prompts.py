"""Every text the engine shows the model, and the constructors of the message dicts it sends.

One place, so the wording of the rules (DESIGN §2) can be read, reviewed and tested together;
the messages are plain OpenAI chat dicts (no private keys), ready to send as they are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from bot.engine.tools import ToolImage, ToolRegistry

Message = dict[str, Any]

DEFAULT_SYSTEM_PROMPT = (
    "You are an operations assistant working inside a team chat thread. You answer questions "
    "and carry out requests by calling the tools you are given, which act on real systems. "
    "Use tools to look facts up instead of guessing. Some calls need a human's approval; if a "
    "call is rejected or blocked, do not retry the same call: explain or choose another way. "
    "When you have what you need, give a concise final answer."
)

JSON_PROTOCOL = """You have these tools:
{tools}

Reply with exactly ONE JSON object and nothing else, in one of these two forms:
{{"reasoning": "<your short reasoning>", "action": "tool_call", "tool_name": "<tool name>", "tool_args": {{<arguments>}}}}
{{"reasoning": "<your short reasoning>", "action": "final_answer", "answer": "<your answer>"}}
Call one tool per reply. Each tool result comes back as a user message starting with "Observation:"."""  # noqa: E501

NO_TOOLS = "(no tools are available: answer from what you know)"

JSON_REFORMAT = (
    "Your previous response could not be parsed as valid JSON. Reply again with exactly one "
    'JSON object: either {"reasoning": "...", "action": "tool_call", "tool_name": "...", '
    '"tool_args": {...}} or {"reasoning": "...", "action": "final_answer", "answer": "..."}.'
)

STRUCTURED_REFORMAT = (
    "Your previous response could not be parsed as valid JSON matching the schema. Reply again "
    "with only one JSON object that matches this JSON Schema, with no other text:\n{schema}"
)

STRUCTURED_INSTRUCTION = (
    "Reply with only one JSON object that matches this JSON Schema, with no other text:\n{schema}"
)

REFLECTION = (
    "[SELF-REFLECTION] You have made {count} tool calls so far. Pause and check before your "
    "next step:\n"
    "1. Are you still making progress towards the original goal: {query}\n"
    "2. Are you repeating similar actions or going in circles?\n"
    "3. What is the most direct next step to finish?\n"
    "4. Should you give the final answer now?"
)

CYCLE_WARNING = (
    "You have called `{tool}` with identical arguments {count} times and received the same "
    "result. Please try a different approach or tool."
)

CHECKLIST = (
    "[COMPLETION CHECK] Before you finish, verify your answer:\n"
    "1. Does it fully answer the original question: {query}\n"
    "2. Are the key facts verified by tool results?\n"
    "3. Is there any contradiction in the information you gathered?\n"
    "If something is missing, call the tools you need now. Otherwise reply with a short "
    "verification; you will be asked for the final answer next."
)

CHECKLIST_DONE = (
    "Verification noted. Now give your final answer to the original question, addressed to the "
    "user: only the answer, without the checklist."
)

COMPACTED = (
    "[CONTEXT COMPACTED] {count} earlier messages were removed to fit the context budget."
    "{called} Their results are no longer shown; call a tool again if you need one."
)

COMPACTION_SYSTEM = (
    "You compact the working memory of an operations agent that is in the middle of a task. "
    "You get the oldest part of its conversation, which is about to be removed. Write what "
    "that part established, so the agent can go on without calling the same tools again:\n"
    "- every fact the tool results gave, with exact identifiers, names, numbers, states, "
    "times and URLs (copy them verbatim);\n"
    "- each tool call made, with its arguments, and whether it succeeded, failed, was "
    "blocked, or was approved or rejected by a human (with the reason given);\n"
    "- the decisions taken and the reasoning chain so far, the most recent steps in most "
    "detail, and what was still to be done.\n"
    "Write plain text, as short as the facts allow. Do not invent anything, do not answer "
    "the user, do not address the agent."
)

COMPACTION_REQUEST = "The agent's task: {query}\n\nThe part to compact:\n\n{transcript}"

COMPACTED_SUMMARY = (
    "[CONTEXT SUMMARY] The earlier part of this run was compacted to fit the context budget. "
    "What it established (facts, ids, calls and their outcomes, decisions):\n{summary}"
)

SELECTION_PROMPT = (
    "Pick the tools most relevant to the user's request, at most {limit}, from this catalogue "
    '(name: description). Reply as {{"tools": ["name", ...]}}.\n\nCatalogue:\n{catalogue}\n\n'
    "User request: {query}"
)

SELECTION_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"tools": {"type": "array", "items": {"type": "string"}}},
    "required": ["tools"],
}

BROWSE_PROMPT = (
    "There are {tools} tools, too many to list, in {groups} groups (system/topic). Choose the "
    "groups whose tools the user's request needs, at most {limit}, and give words to search "
    'all tools for (an object and a verb, e.g. "refund invoice") when no group fits. You '
    'will then pick tools from what you chose. Reply as {{"groups": ["group", ...], '
    '"search": "words"}}.\n\nGroups (name (size): some of their tools):\n{index}\n\n'
    "User request: {query}"
)

BROWSE_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "groups": {"type": "array", "items": {"type": "string"}},
        "search": {"type": "string"},
    },
    "required": ["groups"],
}

SYNTHESIS_SYSTEM = (
    "You write the final answer for the user from an agent's work trace. Present the result "
    "directly, in Markdown where it helps. Do not talk about the trace, the tools or yourself "
    '(no "Based on the tool output..."). Answer in the language of the user\'s question. If '
    "the work failed or is incomplete, say so plainly and say what is known."
)

# the user wrote while the agent gave its final answer on its last iteration: nothing more
# could be done, so the answer says whether it covers them, or that they need a new request
LATE_INTERRUPTS = (
    "\n\nThe user also wrote the following while the agent was finishing, when no step was "
    "left to act on it. Say plainly whether the answer covers it; if it does not, say it was "
    "not acted on and can be asked again:\n"
)


def system(text: str) -> Message:
    return {"role": "system", "content": text}


def user(text: str) -> Message:
    return {"role": "user", "content": text}


def assistant(content: str | None, tool_calls: Sequence[Mapping[str, Any]] = ()) -> Message:
    message: Message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [dict(call) for call in tool_calls]
    return message


def tool_call_entry(call_id: str, name: str, arguments: str) -> Message:
    """One element of an assistant message's `tool_calls`."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool_result(call_id: str, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def tool_images(shown: Sequence[tuple[str, Sequence[ToolImage]]]) -> Message:
    """The images tool calls returned, as one user message of image parts (a `tool` message
    carries text only in Chat Completions). `shown`: (tool name, its images) per call, in call
    order; the observations number the images the same way ("image 1")."""
    parts: list[dict[str, Any]] = []
    for tool_name, images in shown:
        for number, image in enumerate(images, 1):
            parts.append({"type": "text", "text": f"Image {number} returned by {tool_name}:"})
            url = f"data:{image.mime_type};base64,{image.data}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return {"role": "user", "content": parts}


def content_text(content: Any) -> str:
    """A message's content as text: parts joined, an image part as `[image]` (its base64 is
    no text to count, summarise or cut)."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        return json.dumps(content)
    return "\n".join(
        "[image]" if part.get("type") == "image_url" else str(part.get("text", ""))
        for part in content
        if isinstance(part, Mapping)
    )


def image_parts(content: Any) -> int:
    """How many image parts a message's content has."""
    if not isinstance(content, list):
        return 0
    return sum(
        1 for part in content if isinstance(part, Mapping) and part.get("type") == "image_url"
    )


def observation(content: str) -> Message:
    """JSON mode: a tool result comes back as a user message."""
    return user(f"Observation: {content}")


def system_prompt(base: str | None, tools: ToolRegistry, *, json_mode: bool) -> str:
    """The loop's system prompt; JSON mode adds the tool list and the action protocol."""
    text = base or DEFAULT_SYSTEM_PROMPT
    if not json_mode:
        return text
    listing = "\n".join(
        f"- {tool.name}: {tool.description.strip()}\n  arguments (JSON Schema): "
        f"{json.dumps(dict(tool.parameters) or {'type': 'object', 'properties': {}})}"
        for tool in tools
    )
    return f"{text}\n\n{JSON_PROTOCOL.format(tools=listing or NO_TOOLS)}"


def observation_text(content: str, *, is_error: bool) -> str:
    """What the model reads for one result; errors are marked so it can self-correct."""
    if is_error and not content.startswith("Error"):
        return f"Error: {content}"
    return content


def synthesis_messages(
    query: str,
    trace: Sequence[tuple[str, Mapping[str, Any], str, bool]],
    draft: str,
    limit: int,
    *,
    late: Sequence[str] = (),
) -> list[Message]:
    """The synthesis prompt: the question, each call with its result cut to `limit` chars, and
    the replies (`late`) that arrived with the final answer when no iteration was left."""
    lines = []
    for index, (name, args, result, failed) in enumerate(trace, 1):
        cut = result if len(result) <= limit else result[:limit] + " [...truncated]"
        status = "failed" if failed else "ok"
        lines.append(f"{index}. {name}({json.dumps(dict(args), default=str)}) [{status}]\n{cut}")
    work = "\n\n".join(lines) or "(no tools were called)"
    body = f"Question:\n{query}\n\nWork trace:\n{work}\n\nThe agent's draft answer:\n{draft}"
    if late:
        body += LATE_INTERRUPTS + "\n".join(f"- {text}" for text in late)
    return [system(SYNTHESIS_SYSTEM), user(body)]


def fallback_summary(
    iterations: int,
    trace: Sequence[tuple[str, Mapping[str, Any], str, bool]],
    *,
    why: str = "",
) -> str:
    """The answer when the loop stops short (iterations, time or tokens run out): why it
    stopped, what was done, what failed."""
    why = why or f"I stopped after {iterations} iterations"
    if not trace:
        return f"{why}, without reaching an answer. No tool was called."
    lines = []
    for name, args, result, failed in trace[-20:]:
        snippet = " ".join(result.split())[:160]
        lines.append(
            f"- {name}({json.dumps(dict(args), default=str)}): "
            f"{'failed' if failed else 'ok'} - {snippet}"
        )
    more = f"\n(and {len(trace) - 20} earlier calls)" if len(trace) > 20 else ""
    return (
        f"{why}, without reaching a final answer. "
        f"Here is what was done ({len(trace)} tool calls):\n" + "\n".join(lines) + more
    )
