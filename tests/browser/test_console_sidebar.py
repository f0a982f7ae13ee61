"""The sidebar as a daily client's: two conversations started with the same words are told
apart (their start time after the title), each row says when it last changed, a conversation
that changed while the user looked elsewhere is marked unread until opened, the search box
filters by title, Rename and Delete work (and every open page follows at once), the tab says
which conversation is open, a call-log row opens the conversation its call was made in, and an
address the console does not have gets its own 404 page.

Deleting hides the conversation from the console only: its call-log rows are still there.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp

from bot.storage.models import CallLog
from tests.browser.test_console_journey import THREAD_URL, send, watch
from tests.databases import rows
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.server.serve_process import ServeProcess

SAME = "check the api service"


def model(body: dict[str, Any]) -> Turn:
    """Looking at a service calls `get_service` once, then answers."""
    if any(m["role"] == "tool" for m in body["messages"]):
        return answer("The api service is up.")
    if "service" in json.dumps(body["messages"][-1]) and not body.get("stream"):
        return tool_call("ops__get_service", {"name": "api"}, id="call_get")
    return answer("Noted.")


async def start(page: Any, url: str, text: str) -> str:
    """A new conversation from the page; its root once answered."""
    await page.goto(url + "/")
    await page.wait_for_selector('body[data-ready="thread:"]')
    await send(page, text)
    await page.wait_for_url(THREAD_URL)
    await page.locator(".item.answer").wait_for()
    await page.locator('.item.status[data-state="done"]').wait_for()  # nothing more to come
    return page.url[-32:]


async def titles(page: Any) -> list[str]:
    return await page.eval_on_selector_all("#threads a.title", "els => els.map(e => e.title)")


def row(page: Any, root: str) -> Any:
    return page.locator("#threads li", has=page.locator(f'a[data-root="{root}"]'))


async def test_the_sidebar(
    bot: ServeProcess, browser: Any, fake_openai: FakeOpenAI, ops_api: OpsAPI, artifacts: Path
) -> None:
    fake_openai.respond_with(model)
    page = await browser.new_page()
    trouble = await watch(page)
    first = await start(page, bot.url, SAME)
    second = await start(page, bot.url, SAME)
    other = await start(page, bot.url, "deploy window of the web service")

    # alike titles are told apart; each row says when it changed; the tab names the open one
    shown = await titles(page)
    alike = [t for t in shown if t.startswith(SAME)]
    assert len(alike) == 2 and alike[0] != alike[1] and all(" · " in t for t in alike), shown
    assert "deploy window of the web service" in shown  # a title nothing else shares stays as it is
    assert await page.locator("#threads li time.when").count() == 3
    assert await page.title() == "deploy window of the web service · chatops"

    # a conversation that changes while another is open is unread until opened
    colleague = await browser.new_page()
    await colleague.goto(f"{bot.url}/c/{first}")
    await colleague.wait_for_selector(f'body[data-ready="thread:{first}"]')
    await send(colleague, "thanks")
    await row(page, first).locator(".dot").wait_for()
    assert "unread" in (await row(page, first).get_attribute("class"))
    assert await page.locator("#threads li.unread").count() == 1
    await page.locator(f'#threads a[data-root="{first}"]').click()
    await page.wait_for_selector(f'body[data-ready="thread:{first}"]')
    assert await page.locator("#threads li.unread").count() == 0
    await page.reload()  # read stays read
    await page.wait_for_selector(f'body[data-ready="thread:{first}"]')
    assert await page.locator("#threads li.unread").count() == 0
    assert (await page.title()).startswith(SAME)

    # search filters by title, in the page
    await page.fill("#thread-search", "deploy")
    assert await page.locator("#threads li:visible").count() == 1
    assert await row(page, other).is_visible()
    await page.fill("#thread-search", "")
    assert await page.locator("#threads li:visible").count() == 3
    await page.screenshot(path=str(artifacts / "1-sidebar.png"))

    # rename: this page and the colleague's follow at once
    await row(page, first).locator("button.row-rename").click()
    await page.fill("#rename-text", "api health, morning")
    await page.click("#rename-confirm")
    await row(page, first).locator("a.title", has_text="api health, morning").wait_for()
    await row(colleague, first).locator("a.title", has_text="api health, morning").wait_for()
    assert await page.title() == "api health, morning · chatops"
    # the other one alike is alone now: its plain title
    assert await row(page, second).locator("a.title").get_attribute("title") == SAME

    # delete: gone from both pages and after a reload; its address no longer opens it
    await row(page, second).locator("button.row-delete").click()
    await page.click("#delete-confirm")
    await row(page, second).wait_for(state="detached")
    await row(colleague, second).wait_for(state="detached")
    await page.reload()
    await page.wait_for_selector(f'body[data-ready="thread:{first}"]')
    assert await row(page, second).count() == 0
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{bot.url}/console/api/threads/{second}") as r:
            assert r.status == 404
        async with http.post(f"{bot.url}/console/api/threads/{second}/rename",
                             json={"title": "x"}) as r:  # fmt: skip
            assert r.status == 404
    # the call log keeps what the deleted conversation did (the audit trail is not erased)
    logged = await asyncio.to_thread(rows, bot.env["DATABASE_URL"], CallLog)
    assert len([c for c in logged if c.action == "get_service"]) == 3

    # a call-log row opens the conversation its call was made in
    await page.click("#nav-calls")
    await page.wait_for_selector('body[data-ready="calls:"]')
    links = page.locator("table.calls a.call-thread")
    await links.first.wait_for()
    assert await links.count() == 3
    hrefs = {await link.get_attribute("href") for link in await links.all()}
    assert hrefs == {f"/c/{first}", f"/c/{second}", f"/c/{other}"}
    await page.locator(f'table.calls a.call-thread[href="/c/{other}"]').click()
    await page.wait_for_selector(f'body[data-ready="thread:{other}"]')
    assert await page.title() == "deploy window of the web service · chatops"

    # an address the console does not have: its own page, status 404
    response = await page.goto(bot.url + "/no/such/page")
    assert response.status == 404
    assert await page.locator("main.lost h2").inner_text() == "Nothing here"
    assert await page.title() == "Not found · chatops"
    # an API client keeps the plain answer
    async with aiohttp.ClientSession() as http, http.get(f"{bot.url}/console/api/nothing") as r:
        assert r.status == 404 and r.content_type != "text/html"
    # the one failure: that page's own 404 (the browser logs it as an error)
    assert trouble["failed"] == [f"404 {bot.url}/no/such/page"]
    assert [e for e in trouble["errors"] if "404" not in e] == [] and trouble["dialogs"] == []
    assert len(trouble["errors"]) <= 1
