"""The cards of a conversation as a daily user reads them: a failed tool step opens to show its
arguments and the system's error; an answer with a long unbroken string stays inside its card;
the composer grows with its text and is as wide as the conversation; a waiting step's time
counts on; a toast never lies on a card's time; a decided card is compact.

The bot is a real `chatops serve` on the fake model and the fake ops API (browser/conftest.py).
"""

from __future__ import annotations

import json
from typing import Any

from tests.browser.layout import assert_no_sideways_scroll, covered
from tests.browser.test_console_journey import THREAD_URL, send, watch
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.server.serve_process import ServeProcess

BROKEN = "payments database connection refused (pool exhausted)"
LONG = "Z" * 3000
LONG_CODE = "kubectl-" + "y" * 600


def model(body: dict[str, Any]) -> Turn:
    """`payments` is looked up (its API fails); `restart` needs an approval; `long` answers
    with unbroken strings in prose, inline code and a table."""
    asked = json.dumps([m for m in body["messages"] if m["role"] == "user"][-1])
    tools_done = any(m["role"] == "tool" for m in body["messages"])
    if "long" in asked:
        return answer(f"Token: {LONG}\n\nRun `{LONG_CODE}`\n\n| key | value |\n|---|---|\n"
                      f"| {LONG[:500]} | 1 |")  # fmt: skip
    if body.get("stream"):
        return answer("The **payments** service is failing." if "payments" in asked else "Done.")
    if tools_done:
        return answer("handled")
    if "payments" in asked:
        return tool_call("ops__get_service", {"name": "payments"}, id="call_payments")
    return tool_call("ops__restart", {"name": "api"}, id="call_restart")


async def test_a_failed_step_opens_to_show_its_arguments_and_error(
    bot: ServeProcess, browser: Any, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    fake_openai.respond_with(model)
    ops_api.broken["payments"] = (500, BROKEN)
    page = await browser.new_page()
    trouble = await watch(page)
    await page.goto(bot.url + "/")
    await page.wait_for_selector('body[data-ready="thread:"]')
    await send(page, "check the payments service")
    await page.wait_for_url(THREAD_URL)
    step = page.locator('.item.status[data-state="done"] li.step[data-state="failed"]')
    await step.wait_for()
    error = step.locator("dd.error-text")
    assert not await error.is_visible()  # closed: one line per step
    await step.locator("summary").click()
    await error.wait_for()
    shown = await error.inner_text()
    assert "HTTP 500" in shown and BROKEN in shown
    assert "name=payments" in await step.locator(".step-io dd").first.inner_text()
    # an open step stays open while its card is drawn again (here for another viewer)
    await page.fill("#user", "someone-else")
    await page.press("#user", "Tab")
    assert await step.locator("details").evaluate("d => d.open") is True
    assert await error.is_visible()
    assert trouble == {"errors": [], "failed": [], "dialogs": []}


async def test_a_long_unbroken_string_stays_inside_its_card(
    bot: ServeProcess, browser: Any, fake_openai: FakeOpenAI
) -> None:
    fake_openai.respond_with(model)
    page = await browser.new_page()
    await page.goto(bot.url + "/")
    await page.wait_for_selector('body[data-ready="thread:"]')
    await send(page, "print the long token")
    card = page.locator(".item.answer .markdown table")
    await card.wait_for()
    await assert_no_sideways_scroll(page)
    answer_box = await page.locator(".item.answer").bounding_box()
    column = await page.locator("#log").bounding_box()
    assert answer_box is not None and column is not None
    assert answer_box["x"] + answer_box["width"] <= column["x"] + column["width"] + 0.5
    # the table keeps inside the card too (it wraps, or scrolls in its own box)
    assert await card.evaluate(
        "t => t.getBoundingClientRect().right <= t.closest('.item').getBoundingClientRect().right"
    )


async def test_the_composer_grows_and_keeps_to_the_column(
    bot: ServeProcess, browser: Any, fake_openai: FakeOpenAI
) -> None:
    page = await browser.new_page()
    await page.set_viewport_size({"width": 1920, "height": 1000})
    await page.goto(bot.url + "/")
    await page.wait_for_selector('body[data-ready="thread:"]')
    composer = await page.locator("#ask").bounding_box()
    column = await page.locator("#log").bounding_box()
    assert composer is not None and column is not None
    assert abs(composer["width"] - column["width"]) <= 1 and abs(composer["x"] - column["x"]) <= 1
    empty_height = await page.locator("#text").evaluate("t => t.clientHeight")
    await page.fill("#text", "\n".join(f"line {n}" for n in range(1, 7)))
    grown = await page.locator("#text").evaluate("t => [t.clientHeight, t.scrollHeight]")
    assert grown[0] > empty_height and grown[0] >= grown[1]  # all six lines show, no scrollbar
    await page.fill("#text", "\n".join(f"line {n}" for n in range(1, 80)))
    capped = await page.locator("#text").evaluate("t => t.getBoundingClientRect().height")
    assert capped <= 0.4 * 1000 + 4  # up to a limit, then it scrolls


async def test_a_waiting_step_counts_on_and_a_decided_card_is_compact(
    bot: ServeProcess, browser: Any, fake_openai: FakeOpenAI
) -> None:
    fake_openai.respond_with(model)
    page = await browser.new_page()
    trouble = await watch(page)
    await page.goto(bot.url + "/")
    await page.wait_for_selector('body[data-ready="thread:"]')
    await send(page, "restart the api")
    card = page.locator('.item.approval[data-state="pending"]')
    await card.wait_for()
    secs = page.locator('li.step[data-state="waiting_approval"] .secs')
    await secs.wait_for()
    first = await secs.inner_text()
    await page.wait_for_function(
        "was => document.querySelector('li.step[data-state=\"waiting_approval\"] .secs')"
        ".textContent !== was", arg=first,
    )  # fmt: skip
    pending_height = (await card.bounding_box() or {})["height"]

    await page.fill("#user", "lead")
    await page.press("#user", "Tab")
    await card.locator('button[data-decision="approve"]').click()
    await page.locator("#toast").wait_for()
    assert await covered(page, "#toast", "#log time.when") == []
    decided = page.locator('.item.approval[data-state="approved"]')
    await decided.wait_for()
    assert (await decided.bounding_box() or {})["height"] < pending_height / 2
    assert not await decided.locator("pre.arguments").is_visible()  # opens on demand
    await decided.locator("details.full summary").click()
    await decided.locator("pre.arguments").wait_for()
    assert trouble == {"errors": [], "failed": [], "dialogs": []}
