"""An MCP server's question in the console, in a real browser on a real `chatops serve`: the SDK
server `tests/fakes/mcp_rich_server.py` asks for a restart window mid-call; the inline form in
the thread refuses a value outside the requested schema under its field (the call keeps
waiting), and a valid answer reaches the server, which returns it as the tool's result."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.test_console_journey import send, watch
from tests.fakes.openai_server import FakeOpenAI
from tests.server.serve_process import ServeProcess, serving
from tests.server.test_mcp_rich import call_then_answer, rich_manifest


@pytest.fixture
async def rich_bot(tmp_path: Path, fake_openai: FakeOpenAI) -> AsyncIterator[ServeProcess]:
    """`chatops serve` with the rich MCP server as its only connector."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    rich_manifest(manifests)
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'chatops.db'}",
        "CHATOPS_MANIFESTS_DIR": str(manifests),
        "OPENAI_BASE_URL": fake_openai.base_url,
        "OPENAI_API_KEY": "sk-test-not-a-secret",
        "CHATOPS_MODEL": "fake-model",
        "CHATOPS_LLM_MAX_RETRIES": "0",
    }
    async with serving(tmp_path, env) as process:
        yield process
        await process.stop()


def tool_result(fake_openai: FakeOpenAI) -> list[str]:
    return [
        m["content"] for body in fake_openai.requests for m in body["messages"]
        if m["role"] == "tool"
    ]  # fmt: skip


async def test_the_inline_question_form_refuses_then_sends(
    rich_bot: ServeProcess, browser: Any, fake_openai: FakeOpenAI, artifacts: Path
) -> None:
    fake_openai.respond_with(call_then_answer("rich__restart", {"service": "api"}))
    page = await browser.new_page()
    trouble = await watch(page)
    await page.goto(rich_bot.url + "/")
    await page.wait_for_selector('body[data-ready="thread:"]')
    await page.fill("#user", "alice")
    await page.press("#user", "Tab")

    await send(page, "restart the api")
    question = page.locator('.item.question[data-state="open"]')
    await question.wait_for()
    shown = await question.inner_text()
    assert "Question from rich" in shown and "not an approval" in shown
    assert "When may api restart?" in shown
    await question.locator('[name="minutes"]').fill("500")
    await question.locator('[name="reason"]').fill("deploy 1.2")
    await question.locator('select[name="decision"]').select_option("approve")
    await question.locator('button[value="accept"]').click()
    problem = question.locator('.field-error[data-name="minutes"]')
    await problem.wait_for(state="visible")
    assert "500 is greater than the maximum of 120" in await problem.inner_text()
    assert tool_result(fake_openai) == []  # the call still waits
    await page.screenshot(path=str(artifacts / "1-question-refused.png"), full_page=True)

    await question.locator('[name="minutes"]').fill("30")
    await question.locator('button[value="accept"]').click()
    answered = page.locator('.item.question[data-state="accepted"]')
    await answered.wait_for()
    assert "answered by alice" in await answered.inner_text()
    await page.locator('.item.status[data-state="done"]').wait_for()
    assert tool_result(fake_openai) == ["restart of api: 30 min, 'deploy 1.2', approve"]
    await page.screenshot(path=str(artifacts / "2-question-answered.png"), full_page=True)

    # the refused answer's 422 is the only failed request (chromium logs it as a console error)
    assert [f.split()[0] for f in trouble["failed"]] == ["422"] and trouble["dialogs"] == []
    assert all("status of 422" in e for e in trouble["errors"])
