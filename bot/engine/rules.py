"""Deterministic loop rules after tool calls: cycle detection and self-reflection.

Both inject ordinary user messages (never separate UI events): a cycle warning when the same
(tool, arguments) hash reaches the threshold, and a reflection every N real tool calls. The
completion checklist, which acts when the agent wants to finish, lives on `RunScope`.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.engine import prompts
from bot.engine.agent_limits import EngineLimits
from bot.engine.state import RunState


def injections(
    state: RunState, limits: EngineLimits, calls: Sequence[tuple[str, str]], before: int
) -> list[str]:
    """The messages to inject after one response's tool calls ran.

    `calls` holds (tool name, fingerprint) of this response's calls; `before` is the real tool
    call count before them, so a reflection fires when a multiple of the interval is crossed.
    """
    texts: list[str] = []
    threshold = limits.cycle_detection_threshold
    for name, fp in calls:
        count = state.call_counts.get(fp, 0) + 1
        state.call_counts[fp] = count
        if threshold > 0 and count >= threshold:
            texts.append(prompts.CYCLE_WARNING.format(tool=name, count=count))
    interval = limits.self_reflection_interval
    after = state.tool_calls_made
    if interval > 0 and after // interval > before // interval:
        texts.append(prompts.REFLECTION.format(count=after, query=state.query))
    return texts
