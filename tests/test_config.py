"""Settings read from the environment as documented."""

from __future__ import annotations

import dataclasses

import pytest

from bot.config import Settings
from bot.engine.agent_limits import EngineLimits


def test_slack_api_url_keeps_its_path_without_a_trailing_slash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLACK_API_URL", "http://127.0.0.1:9999/api")
    assert Settings(_env_file=None).slack_api_url == "http://127.0.0.1:9999/api/"


def test_llm_abilities_from_a_comma_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATOPS_LLM_ABILITIES", " json_mode ,")
    abilities = Settings(_env_file=None).llm_abilities
    assert abilities == {"tool_call": False, "json_mode": True, "vision": False}
    monkeypatch.setenv("CHATOPS_LLM_ABILITIES", "")
    assert not any(Settings(_env_file=None).llm_abilities.values())
    monkeypatch.setenv("CHATOPS_LLM_ABILITIES", "tool_call,vision")
    abilities = Settings(_env_file=None).llm_abilities
    assert abilities == {"tool_call": True, "json_mode": False, "vision": True}


def test_engine_limits_are_declared_once_in_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every `EngineLimits` field is a `REACT_*` setting with the dataclass's default, and the
    environment reaches each one (the float ones too)."""
    names = [f.name for f in dataclasses.fields(EngineLimits)]
    assert {f"react_{name}" for name in names} <= set(Settings.model_fields)
    assert Settings(_env_file=None).engine_limits == EngineLimits()
    monkeypatch.setenv("REACT_RUN_TIMEOUT_S", "12.5")
    monkeypatch.setenv("REACT_RUN_MAX_TOKENS", "777")
    limits = Settings(_env_file=None).engine_limits
    assert (limits.run_timeout_s, limits.run_max_tokens) == (12.5, 777)
