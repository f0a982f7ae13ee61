"""The web console in a real browser, as a newcomer uses it: send a request, watch the status,
approve the card, read the streamed answer, reload (all of it still there, in order), reject a
second request with a reason typed in the page, switch conversations (Back follows), open the
call log (filter, download) and the approvals view. And a hostile answer runs nothing.

The bot is a real `chatops serve`; the model is FakeOpenAI and the target system the fake ops
API, both in this process. Screenshots are written to tests/artifacts/.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.server.serve_process import ServeProcess

THREAD_URL = re.compile(r"/c/[0-9a-f]{32}$")
COMMENT = "the release is over: go ahead"
REASON = "not during the release freeze"


def restart_model(body: dict[str, Any]) -> Turn:
    """Restart the service the thread asks for; the streamed answer is Markdown."""
    text = json.dumps(body)
    service = "web" if "web service" in text else "api"
    if body.get("stream"):
        if REASON in text:
            return answer(f"I did **not** restart `{service}`: the approver said *{REASON}*.")
        return answer(
            f"## {service} restarted\n\n**{service}** is back:\n\n- health check: ok\n"
            f"- see [the runbook](https://runbooks.example/{service})"
        )
    if any(m["role"] == "tool" for m in body["messages"]):
        return answer(f"{service} handled")
    return tool_call("ops__restart", {"name": service}, id=f"call_{service}")


async def watch(page: Any) -> dict[str, list[str]]:
    """Everything that should never happen, collected while the test runs."""
    seen: dict[str, list[str]] = {"errors": [], "failed": [], "dialogs": []}
    page.on("pageerror", lambda exc: seen["errors"].append(str(exc)))
    page.on("console", lambda m: m.type == "error" and seen["errors"].append(m.text))
    page.on("response", lambda r: r.status >= 400 and seen["failed"].append(f"{r.status} {r.url}"))
    page.on("dialog", lambda d: seen["dialogs"].append(d.message))
    return seen


async def kinds(page: Any) -> list[tuple[str, str]]:
    """The conversation as shown: (kind, id) of each item, top to bottom."""
    return [
        tuple(pair)
        for pair in await page.eval_on_selector_all(
            "#log > .item", "els => els.map(e => [e.dataset.kind, e.dataset.id])"
        )
    ]


async def send(page: Any, text: str) -> None:
    await page.fill("#text", text)
    await page.press("#text", "Enter")


async def test_the_console_journey(
    bot: ServeProcess,
    browser: Any,
    fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
    artifacts: Path,
) -> None:
    fake_openai.respond_with(restart_model)
    page = await browser.new_page()
    trouble = await watch(page)
    await page.goto(bot.url + "/")
    await page.wait_for_selector('body[data-ready="thread:"]')
    await page.evaluate(
        """() => { window.sawLive = false;
          new MutationObserver(() => { if (document.querySelector('[data-kind="live"]'))
            window.sawLive = true; }).observe(document.body, {childList: true, subtree: true}); }"""
    )

    # send: Enter sends, and the request is the first thing in its new conversation
    await send(page, "restart the api service")
    await page.wait_for_url(THREAD_URL)
    first_url = page.url
    card = page.locator('.item.approval[data-state="pending"]')
    await card.wait_for()
    # the status: an icon and a word, saying it waits for the approval
    status = page.locator('.item.status[data-state="waiting_approval"]')
    await status.wait_for()
    assert await status.locator(".state svg.icon").count() >= 1
    assert "waiting for approval" in await status.inner_text()
    assert [k for k, _ in await kinds(page)] == ["message", "status", "approval"]
    # the card says whether the name in the "you are" box is one of its requesters
    note = card.locator(".requester-note")
    assert "you are one of the requesters" in (await note.inner_text()).lower()
    assert ops_api.restarts == []
    await page.screenshot(path=str(artifacts / "1-card.png"), full_page=True)
    await page.fill("#user", "lead")
    await page.press("#user", "Tab")  # the name changes: the card is drawn for the new viewer
    await note.wait_for(state="detached")

    # approve with a comment (a dialog); the answer streams in, then shows as rendered Markdown
    await card.locator('button[data-decision="approve_comment"]').click()
    await page.locator("#approve-dialog").wait_for(state="visible")
    await page.fill("#approve-comment", COMMENT)
    await page.screenshot(path=str(artifacts / "2a-approve-dialog.png"))
    await page.click("#approve-confirm")
    await page.locator(".item.answer .markdown h2").wait_for()
    await page.locator('.item.status[data-state="done"]').wait_for()
    approved = page.locator('.item.approval[data-state="approved"]')
    await approved.wait_for()
    # decided: folded to one line (outcome, tool, who, when, comment), the rest behind "show"
    line = await approved.locator(".folded").inner_text()
    assert line.startswith("approved ops__restart by lead \u00b7 ") and COMMENT in line
    details = approved.locator("details.approval-details")
    assert not await details.evaluate("d => d.open")
    assert not await approved.locator("pre.arguments").is_visible()
    await details.locator("summary").click()
    await approved.locator("pre.arguments").wait_for(state="visible")
    assert '"name": "api"' in await approved.locator("pre.arguments").inner_text()
    await page.screenshot(path=str(artifacts / "2b-folded-card.png"), full_page=True)
    assert await page.evaluate("window.sawLive") is True  # shown while it was being written
    assert ops_api.restarts == ["api"]
    answer_box = page.locator(".item.answer .markdown")
    assert await answer_box.locator("strong").first.inner_text() == "api"
    runbook = answer_box.locator("a")
    assert await runbook.get_attribute("href") == "https://runbooks.example/api"
    assert "noopener" in (await runbook.get_attribute("rel") or "")
    before = await kinds(page)
    assert [k for k, _ in before] == ["message", "status", "approval", "answer"]
    assert await page.locator("#log time.when").count() >= 4  # every item has its time
    await page.screenshot(path=str(artifacts / "2-answer.png"), full_page=True)

    # reload: the same thread, the same items, in the same order (the user's message too)
    await page.reload()
    await page.wait_for_selector(f'body[data-ready="thread:{first_url.rsplit("/", 1)[1]}"]')
    await page.locator(".item.answer .markdown h2").wait_for()
    assert await kinds(page) == before
    assert await page.locator(".item.you .text").inner_text() == "restart the api service"

    # a second conversation: Shift+Enter breaks the line, Enter sends; reject with a reason
    await page.click("#new")
    await page.wait_for_url(bot.url + "/")
    await page.fill("#text", "restart the web service")
    await page.press("#text", "Shift+Enter")
    await page.type("#text", "right now")
    assert await page.input_value("#text") == "restart the web service\nright now"
    await page.press("#text", "Enter")
    await page.wait_for_url(THREAD_URL)
    second_url = page.url
    assert second_url != first_url
    card = page.locator('.item.approval[data-state="pending"]')
    await card.wait_for()
    await card.locator('button[data-decision="reject"]').click()
    dialog = page.locator("#reject-dialog")
    await dialog.wait_for(state="visible")
    await page.fill("#reject-reason", REASON)
    await page.screenshot(path=str(artifacts / "3-reject-dialog.png"))
    await page.click("#reject-confirm")
    rejected = page.locator('.item.approval[data-state="rejected"]')
    await rejected.wait_for()
    assert REASON in await rejected.inner_text()
    await page.locator(".item.answer").wait_for()
    assert "not" in await page.locator(".item.answer .markdown strong").inner_text()
    assert ops_api.restarts == ["api"]  # the rejected restart never reached the system
    assert await page.locator(".item.you .text").inner_text() == (
        "restart the web service\nright now"
    )

    # the sidebar: both conversations, the newer first, each with its state
    titles = page.locator("#threads li a.title")
    assert await titles.count() == 2
    assert await titles.nth(0).inner_text() == "restart the web service right now"
    assert await titles.nth(1).inner_text() == "restart the api service"
    await page.locator("#threads li .state-done").first.wait_for()

    # switch conversations; Back and Forward follow
    await titles.nth(1).click()
    await page.wait_for_url(first_url)
    await page.locator(".item.answer .markdown h2").wait_for()
    assert await kinds(page) == before
    await page.go_back()
    await page.wait_for_url(second_url)
    await page.locator('.item.approval[data-state="rejected"]').wait_for()
    await page.go_forward()
    await page.wait_for_url(first_url)
    await page.locator(".item.answer .markdown h2").wait_for()

    # the call log: both calls; a filter narrows it (and is an address Back returns from)
    await page.click("#nav-calls")
    await page.wait_for_url(bot.url + "/calls")
    rows = page.locator("table.calls tbody tr")
    await rows.nth(1).wait_for()
    assert await rows.count() == 2
    assert "ops.restart" in await rows.nth(0).inner_text()
    await page.screenshot(path=str(artifacts / "4-call-log.png"), full_page=True)
    await page.select_option('select[name="outcome"]', "rejected")
    await page.click("#call-filters button[type=submit]")
    await page.wait_for_url(re.compile(r"/calls\?outcome=rejected$"))
    await page.locator("p.summary", has_text="outcome rejected").wait_for()
    assert await rows.count() == 1
    assert '"name":"web"' in await rows.nth(0).inner_text()
    async with page.expect_download() as waiting:
        await page.click('button[data-format="csv"]')
    download = await waiting.value
    csv_text = await asyncio.to_thread(Path(await download.path()).read_text)
    assert csv_text.splitlines()[0].startswith("id,at,platform,channel,requester")
    assert len(csv_text.splitlines()) == 2 and ",rejected," in csv_text
    await page.go_back()
    await page.wait_for_url(bot.url + "/calls")
    await page.locator("p.summary", has_text="(newest first): 2").wait_for()

    # the approvals view: nothing waits, both decisions are listed
    await page.click("#nav-approvals")
    await page.wait_for_url(bot.url + "/approvals")
    await page.locator("h3", has_text="Recent decisions (2)").wait_for()
    await page.screenshot(path=str(artifacts / "5-approvals.png"), full_page=True)

    # back to the first conversation for the picture the README shows
    await page.goto(first_url)
    await page.locator(".item.answer .markdown h2").wait_for()
    await page.locator(".item.status li.step summary").first.click()  # the step, opened
    await page.locator(".item.status .step-io").wait_for()
    await page.evaluate("window.scrollTo(0, 0)")
    await page.screenshot(path=str(artifacts / "console.png"))
    assert trouble == {"errors": [], "failed": [], "dialogs": []}


HOSTILE = (
    'Results: <script>window.pwned = 1</script> <img src=x onerror="window.pwned = 2">\n\n'
    "[click me](javascript:window.pwned=3) [data](data:text/html,<script>alert(1)</script>) "
    '<a href="#" onclick="window.pwned = 4">x</a> <svg onload="window.pwned = 5"></svg>\n\n'
    '<iframe src="https://evil.example"></iframe> [ok](https://example.com/ok)'
)


async def test_a_hostile_answer_runs_nothing_in_the_page(
    bot: ServeProcess, browser: Any, fake_openai: FakeOpenAI
) -> None:
    fake_openai.respond_with(lambda body: answer(HOSTILE))
    page = await browser.new_page()
    trouble = await watch(page)
    await page.goto(bot.url + "/")
    await page.wait_for_selector('body[data-ready="thread:"]')
    await send(page, "summarise the incident")
    shown = page.locator(".item.answer .markdown")
    await shown.wait_for()
    assert await page.evaluate("window.pwned") is None
    assert await shown.locator("script, img, iframe, svg, object, embed").count() == 0
    attributes = await shown.evaluate(
        "el => [...el.querySelectorAll('*')].flatMap(n => [...n.attributes].map(a => a.name))"
    )
    assert attributes and not [name for name in attributes if name.startswith("on")]
    links = await shown.locator("a").evaluate_all("els => els.map(a => a.getAttribute('href'))")
    assert "https://example.com/ok" in links and all(
        href is None or href.startswith("https://") for href in links
    )
    assert "<script>window.pwned = 1</script>" in await shown.inner_text()  # shown as text
    assert trouble == {"errors": [], "failed": [], "dialogs": []}
