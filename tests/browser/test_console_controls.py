"""Stop and feedback in a real browser: the Stop button on a running status card ends the run
(its pending approval cancelled, the thread told who stopped it, the tool never run), and the
thumbs on an answer store one changeable rating per person. The bot is a real `chatops serve`
on SQLite (tests/browser/conftest.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from bot.storage.models import Run, RunFeedback
from tests.browser.test_console_journey import THREAD_URL, send, watch
from tests.databases import rows
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.server.serve_process import ServeProcess


def model(body: dict[str, Any]) -> Turn:
    """A restart needs an approval; anything else is answered at once."""
    if "restart" in json.dumps(body["messages"][-1]) and not body.get("stream"):
        return tool_call("ops__restart", {"name": "api"}, id="call_api")
    return answer("All services are **healthy**.")


async def stored_ratings(database_url: str, expected: list[tuple[str, str]]) -> None:
    """Wait (bounded) until the stored ratings are `expected` (user, rating)."""
    for _ in range(100):
        found = await asyncio.to_thread(rows, database_url, RunFeedback)
        if [(f.user_id, f.rating) for f in found] == expected:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"ratings stored: {[(f.user_id, f.rating) for f in found]}")


async def test_stop_and_feedback_in_the_browser(
    bot: ServeProcess, browser: Any, fake_openai: FakeOpenAI, ops_api: OpsAPI, artifacts: Path
) -> None:
    fake_openai.respond_with(model)
    database_url = bot.env["DATABASE_URL"]
    page = await browser.new_page()
    trouble = await watch(page)
    await page.goto(bot.url + "/")
    await page.wait_for_selector('body[data-ready="thread:"]')

    # a run waiting for its approval shows Stop; the requester presses it
    await send(page, "restart the api service")
    await page.wait_for_url(THREAD_URL)
    await page.locator('.item.approval[data-state="pending"]').wait_for()
    status = page.locator('.item.status[data-state="waiting_approval"]')
    await status.wait_for()
    await status.locator("button.stop").click()
    await page.locator('.item.status[data-state="cancelled"]').wait_for()
    await page.locator('.item.approval[data-state="cancelled"]').wait_for()
    notice = page.locator(".item.notice", has_text="stopped this run")
    await notice.wait_for()
    assert await notice.locator(".text").inner_text() == "console-user stopped this run."
    # the totals say what was done, no count that contradicts it
    totals = await page.locator('.item.status[data-state="cancelled"] .totals').inner_text()
    assert totals.startswith("1 tool call · "), totals
    assert " 0 iterations" not in totals and " 0 tokens" not in totals, totals
    assert await page.locator(".item.status button.stop").count() == 0  # an ended run has none
    assert ops_api.restarts == []
    [run] = await asyncio.to_thread(rows, database_url, Run)
    assert (run.status, run.stopped_by) == ("cancelled", "console-user")
    await page.screenshot(path=str(artifacts / "1-stopped.png"), full_page=True)

    # an answer carries the thumbs: one rating per person, a second click changes it
    await page.click("#new")
    await page.wait_for_url(bot.url + "/")
    await send(page, "how are the services?")
    await page.wait_for_url(THREAD_URL)
    answer_card = page.locator(".item.answer")
    await answer_card.locator(".markdown strong").wait_for()
    assert await answer_card.locator('button[aria-pressed="true"]').count() == 0
    await answer_card.locator("button.rate-up").click()
    await page.locator("#toast", has_text="Thanks for the feedback").wait_for()
    await answer_card.locator('button.rate-up[aria-pressed="true"]').wait_for()
    await stored_ratings(database_url, [("console-user", "up")])
    await answer_card.locator("button.rate-down").click()
    await answer_card.locator('button.rate-down[aria-pressed="true"]').wait_for()
    assert await answer_card.locator("button.rate-up").get_attribute("aria-pressed") == "false"
    await stored_ratings(database_url, [("console-user", "down")])
    # the pressed thumb is the stored one: a reload shows it again; another person's is not
    await page.reload()
    await answer_card.locator('button.rate-down[aria-pressed="true"]').wait_for()
    assert await answer_card.locator('button[aria-pressed="true"]').count() == 1
    await page.fill("#user", "someone-else")
    await page.press("#user", "Tab")
    await page.wait_for_function(
        "document.querySelectorAll('.item.answer button[aria-pressed=\"true\"]').length === 0"
    )
    await page.screenshot(path=str(artifacts / "2-feedback.png"), full_page=True)
    assert trouble == {"errors": [], "failed": [], "dialogs": []}
