"""Settings read from the environment as documented."""

from __future__ import annotations

import pytest

from bot.config import Settings


def test_slack_api_url_keeps_its_path_without_a_trailing_slash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLACK_API_URL", "http://127.0.0.1:9999/api")
    assert Settings(_env_file=None).slack_api_url == "http://127.0.0.1:9999/api/"


def test_llm_abilities_from_a_comma_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATOPS_LLM_ABILITIES", " json_mode ,")
    assert Settings(_env_file=None).llm_abilities == {"tool_call": False, "json_mode": True}
    monkeypatch.setenv("CHATOPS_LLM_ABILITIES", "")
    assert Settings(_env_file=None).llm_abilities == {"tool_call": False, "json_mode": False}
