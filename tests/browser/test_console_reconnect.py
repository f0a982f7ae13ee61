"""The server goes away under an open page and comes back: the page says the connection is
lost, retries, and once the server answers again the banner goes and what happened meanwhile
(a message and its answer, made through another server process on the same database while
the page's server was down) is in the conversation, once, with no reload.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.browser.test_console_journey import THREAD_URL, kinds, send, watch
from tests.fakes.openai_server import FakeOpenAI, Turn, answer
from tests.server.serve_process import ServeProcess, serving


def model(body: dict[str, Any]) -> Turn:
    asked = str([m for m in body["messages"] if m["role"] == "user"][-1])
    return answer("still here" if "meanwhile" in asked else "hello there")


async def test_a_restart_is_shown_and_caught_up(
    bot: ServeProcess, browser: Any, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.respond_with(model)
    page = await browser.new_page()
    trouble = await watch(page)
    await page.goto(bot.url + "/")
    await page.wait_for_selector('body[data-ready="thread:"]')
    await send(page, "say hello")
    await page.wait_for_url(THREAD_URL)
    await page.locator(".item.answer:not(.live)", has_text="hello there").wait_for()
    await page.wait_for_selector('body[data-stream="open"]')
    assert await page.locator("#offline").is_hidden()
    root = page.url[-32:]

    await bot.stop()
    await page.locator("#offline").wait_for(state="visible")
    assert "Connection lost" in await page.locator("#offline").inner_text()
    assert await page.evaluate("document.body.dataset.stream") == "closed"

    # meanwhile, another process on the same database answers in this conversation
    other = await browser.new_page()
    async with serving(tmp_path, bot.env) as elsewhere:
        await other.goto(f"{elsewhere.url}/c/{root}")
        await other.wait_for_selector(f'body[data-ready="thread:{root}"]')
        await send(other, "what happened meanwhile?")
        await other.locator(".item.answer:not(.live)", has_text="still here").wait_for()
        await other.close()
        await elsewhere.stop()
    assert await page.locator(".item.answer:not(.live)", has_text="still here").count() == 0

    await bot.start()  # the same port
    await page.locator("#offline").wait_for(state="hidden")
    await page.locator(".item.answer:not(.live)", has_text="still here").wait_for()
    await page.locator(".item.you", has_text="what happened meanwhile?").wait_for()
    shown = await kinds(page)
    assert len(shown) == len(set(shown))  # each item once
    assert [kind for kind, _ in shown].count("answer") == 2
    # the only failures were the requests the server was not there to answer
    assert trouble["errors"] == [e for e in trouble["errors"] if "ERR_CONNECTION_REFUSED" in e]
    assert trouble["dialogs"] == []
