"""Shared pytest fixtures for the fake OpenAI server (import them in your conftest)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import pytest

from bot.engine.llm import OpenAICompatibleLLM
from bot.model_http import model_http_client
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.serving import started


@pytest.fixture
async def fake_openai() -> AsyncIterator[FakeOpenAI]:
    """A started FakeOpenAI, stopped after the test."""
    async with started(FakeOpenAI()) as fake:
        yield fake


def make_llm(
    fake: FakeOpenAI,
    abilities: Mapping[str, bool] | None = None,
    *,
    model: str = "fake-model",
    max_retries: int = 3,
) -> OpenAICompatibleLLM:
    """An `OpenAICompatibleLLM` on the fake (real openai SDK on the transport the bot uses,
    `bot.model_http`; tiny backoff so retries are fast)."""
    return OpenAICompatibleLLM(
        model=model,
        abilities=abilities if abilities is not None else {"tool_call": True, "json_mode": True},
        base_url=fake.base_url,
        api_key="sk-test-not-a-secret",
        timeout_s=10.0,
        max_retries=max_retries,
        backoff_base_s=0.01,
        backoff_max_s=0.05,
        http_client=model_http_client(),
    )
