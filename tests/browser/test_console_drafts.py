"""What a user typed is theirs until they send it: each conversation keeps its own draft (text
typed in one never shows, nor is sent, in another), drafts survive a reload, and a message the
server never got ("not sent": the network failed under it) is still there after a reload, with
its "Send again", which sends it once."""

from __future__ import annotations

from typing import Any

from tests.browser.test_console_journey import THREAD_URL, send
from tests.fakes.openai_server import FakeOpenAI, answer
from tests.server.serve_process import ServeProcess


async def ready(page: Any, root: str = "") -> None:
    await page.wait_for_selector(f'body[data-ready="thread:{root}"]')


async def test_a_draft_per_conversation_kept_across_reloads(
    bot: ServeProcess, browser: Any, fake_openai: FakeOpenAI
) -> None:
    fake_openai.respond_with(lambda body: answer("Noted."))
    page = await browser.new_page()
    await page.goto(bot.url + "/")
    await ready(page)
    await send(page, "first conversation")
    await page.wait_for_url(THREAD_URL)
    first = page.url[-32:]
    await page.locator(".item.answer").wait_for()
    await page.click("#new")
    await ready(page)
    await send(page, "second conversation")
    await page.wait_for_url(THREAD_URL)
    second = page.url[-32:]
    await page.locator(".item.answer").wait_for()

    # a draft in each, and one in a new conversation
    await page.type("#text", "draft of the second")
    await page.click(f'#threads a[data-root="{first}"]')
    await ready(page, first)
    assert await page.input_value("#text") == ""
    await page.type("#text", "draft of the first")
    await page.click("#new")
    await ready(page)
    assert await page.input_value("#text") == ""
    await page.type("#text", "draft of a new one")
    await page.click(f'#threads a[data-root="{second}"]')
    await ready(page, second)
    assert await page.input_value("#text") == "draft of the second"

    # a reload keeps them all
    await page.reload()
    await ready(page, second)
    assert await page.input_value("#text") == "draft of the second"
    await page.click(f'#threads a[data-root="{first}"]')
    await ready(page, first)
    assert await page.input_value("#text") == "draft of the first"
    # Enter sends the first conversation's draft there, and only there
    await page.press("#text", "Enter")
    await page.locator(".item.you", has_text="draft of the first").wait_for()
    assert await page.input_value("#text") == ""
    await page.click("#new")
    await ready(page)
    assert await page.input_value("#text") == "draft of a new one"
    await page.click(f'#threads a[data-root="{second}"]')
    await ready(page, second)
    assert await page.locator(".item.you", has_text="draft of the first").count() == 0
    await page.reload()
    await page.click(f'#threads a[data-root="{first}"]')
    await ready(page, first)
    assert await page.input_value("#text") == ""  # sent: no draft left


async def test_a_message_not_sent_survives_a_reload_and_sends_once(
    bot: ServeProcess, browser: Any, fake_openai: FakeOpenAI
) -> None:
    fake_openai.respond_with(lambda body: answer("Noted."))
    page = await browser.new_page()
    await page.goto(bot.url + "/")
    await ready(page)
    await send(page, "a conversation")
    await page.wait_for_url(THREAD_URL)
    root = page.url[-32:]
    await page.locator(".item.answer").wait_for()

    await page.route("**/console/api/messages", lambda route: route.abort())  # the network fails
    await send(page, "please do not lose me")
    unsent = page.locator(".item.you", has_text="please do not lose me")
    await unsent.locator(".ack-failed").wait_for()
    await page.unroute("**/console/api/messages")

    await page.reload()
    await ready(page, root)
    await unsent.locator(".ack-failed button.retry").click()
    await unsent.locator(".ack-started").wait_for()
    await page.locator(".item.answer").nth(1).wait_for()
    await page.reload()
    await ready(page, root)
    await page.locator(".item.answer").nth(1).wait_for()
    assert await page.locator(".item.you", has_text="please do not lose me").count() == 1
    assert await unsent.locator(".ack-started").count() == 1
    assert await page.evaluate("localStorage.getItem('chatops-unsent')") is None
