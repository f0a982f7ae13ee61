"""The console on a phone (390 px wide): nothing is wider than the screen in any view, the
sidebar is a drawer (closed until the menu button opens it; choosing anything in it closes it),
"New conversation", the composer and Send are on screen, the conversation starts at the top,
and the call log's table scrolls inside its own box. `console-phone.png` (tests/artifacts/) is
the picture docs/console.md shows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.browser.layout import assert_no_sideways_scroll, assert_on_screen
from tests.browser.test_console_journey import THREAD_URL, send, watch
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.server.serve_process import ServeProcess

PHONE = {"width": 390, "height": 844}
LONG_TITLE = (
    "please restart the api service in the production cluster after checking every "
    "dependency, its dashboards and its logs"
)
TOKEN = "deploy-" + "0123456789abcdef" * 20
SERVICE = "api-" + "0123456789abcdef" * 8  # a long unbroken argument on the card


def model(body: dict[str, Any]) -> Turn:
    asked = json.dumps([m for m in body["messages"] if m["role"] == "user"][-1])
    if body.get("stream"):
        return answer(f"## api restarted\n\nDeployment `{TOKEN}` is live: {TOKEN}")
    if "restart" in asked and not any(m["role"] == "tool" for m in body["messages"]):
        return tool_call("ops__restart", {"name": SERVICE}, id="call_api")
    return answer("done")


async def check_screen(page: Any) -> None:
    """What must hold in every view: no sideways scroll; in a conversation, the composer."""
    await assert_no_sideways_scroll(page)
    if await page.evaluate("document.body.dataset.view") == "thread":
        await assert_on_screen(page, "#text")
        await assert_on_screen(page, "#send")


async def open_drawer(page: Any) -> None:
    await page.click("#menu")
    await page.locator("#sidebar #new").wait_for(state="visible")
    # it slides in: wait until it is all in
    await page.wait_for_function(
        "() => document.getElementById('sidebar').getBoundingClientRect().x >= 0"
    )
    assert await page.get_attribute("#menu", "aria-expanded") == "true"
    await assert_on_screen(page, "#sidebar #new")
    await assert_on_screen(page, "#sidebar")
    await assert_no_sideways_scroll(page)


async def test_the_console_on_a_phone(
    bot: ServeProcess,
    browser: Any,
    fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
    artifacts: Path,
) -> None:
    fake_openai.respond_with(model)
    page = await browser.new_page()
    trouble = await watch(page)
    await page.set_viewport_size(PHONE)
    await page.goto(bot.url + "/")
    await page.wait_for_selector('body[data-ready="thread:"]')
    await check_screen(page)
    assert not await page.locator("#sidebar #new").is_visible()  # the drawer is closed

    # a request with a long title and a long unbroken argument; its card; approve it
    await send(page, LONG_TITLE)
    await page.wait_for_url(THREAD_URL)
    first = page.url
    card = page.locator('.item.approval[data-state="pending"]')
    await card.wait_for()
    await check_screen(page)
    await page.fill("#user", "lead")
    await page.press("#user", "Tab")
    approve = card.locator('button[data-decision="approve"]')
    await approve.scroll_into_view_if_needed()
    await approve.click()
    await page.locator(".item.answer .markdown h2").wait_for()
    await page.locator('.item.status[data-state="done"]').wait_for()
    await check_screen(page)
    assert ops_api.restarts == [SERVICE]
    await page.evaluate("window.scrollTo(0, 0)")
    await page.screenshot(path=str(artifacts / "console-phone.png"))

    # the drawer: New conversation starts another one and closes it
    await open_drawer(page)
    current = page.locator("#threads a[aria-current=page]")
    assert await current.get_attribute("href") == "/c/" + first[-32:]
    await page.screenshot(path=str(artifacts / "console-phone-drawer.png"))
    await page.click("#sidebar #new")
    await page.wait_for_url(bot.url + "/")
    assert await page.get_attribute("#menu", "aria-expanded") == "false"
    await page.locator("#sidebar #new").wait_for(state="hidden")
    await check_screen(page)
    await send(page, "how is the " + "very-" * 30 + "long service name")
    await page.wait_for_url(THREAD_URL)
    await page.locator(".item.answer").wait_for()
    await check_screen(page)

    # back to the first through the drawer: the conversation starts at the top of the screen
    await open_drawer(page)
    assert await page.locator("#threads li").count() == 2
    await page.click(f'#threads a[href="/c/{first[-32:]}"]')
    await page.wait_for_url(first)
    await page.locator(".item.answer .markdown h2").wait_for()
    await page.locator("#sidebar #new").wait_for(state="hidden")
    await page.evaluate("window.scrollTo(0, 0)")
    log = await page.locator("#log").bounding_box()
    assert log is not None and log["y"] < PHONE["height"] / 3
    await check_screen(page)

    # the call log: its table scrolls inside its own box, the page does not
    await open_drawer(page)
    await page.click("#nav-calls")
    await page.wait_for_url(bot.url + "/calls")
    await page.locator("table.calls tbody tr").first.wait_for()
    await check_screen(page)
    box = page.locator(".table-box")
    assert await box.evaluate("b => b.scrollWidth > b.clientWidth")  # it scrolls, in its box
    await page.screenshot(path=str(artifacts / "console-phone-calls.png"))

    await open_drawer(page)
    await page.click("#nav-approvals")
    await page.wait_for_url(bot.url + "/approvals")
    await page.locator("h3", has_text="Recent decisions (1)").wait_for()
    await check_screen(page)
    assert trouble == {"errors": [], "failed": [], "dialogs": []}
