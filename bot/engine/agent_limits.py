"""The engine's thresholds (DESIGN §2), one frozen value so one agent serves concurrent runs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class EngineLimits:
    """Defaults from the seed; `Settings.engine_limits` overrides them from `REACT_*` variables."""

    max_iterations: int = 50
    tool_selection_threshold: int = 12
    tool_selection_max: int = 6
    # each selection request's prompt, in tokens (estimated at 4 characters each): a catalogue
    # bigger than that is browsed by group first, and cut to the tools a local search ranks
    # first (`bot.engine.catalogue`, `bot.engine.tool_search`)
    tool_catalogue_max_tokens: int = 6_000
    # at most this many tools in one model request (OpenAI refuses more than 128), and their
    # schemas at most this many characters: a failed selection sends the best-ranked that fit
    max_tools_per_request: int = 128
    tool_schemas_max_chars: int = 200_000
    self_reflection_interval: int = 6
    cycle_detection_threshold: int = 3
    completion_check_min_tools: int = 3
    synthesis_truncate_chars: int = 2000
    context_budget_tokens: int = 100_000
    run_timeout_s: float = 900.0  # working time of one run, human waits excluded; 0 = none
    run_max_tokens: int = 1_000_000  # tokens of one run's model calls; 0 = none
