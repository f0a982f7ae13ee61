"""The console for everyone: every text keeps a contrast of at least 4.5:1 in every state (the
empty page, a pending card, the reject dialog, answered and decided conversations on the
selected row, the approvals view, the call log, the phone's drawer), measured from the
computed colours in the page (tests/browser/contrast.js; nothing is downloaded); axe-core
(Deque's engine, the copy bundled in the axe-playwright-python wheel, evaluated in the page)
finds no serious or critical violation in the empty, pending-card, answered, dialog, approvals
and call-log states; the open conversation is `aria-current`; a reject reason keeps its line
breaks."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import Any

from tests.browser.test_console_journey import THREAD_URL, send, watch
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.server.serve_process import ServeProcess

CONTRAST = (Path(__file__).with_name("contrast.js")).read_text()
AXE = (files("axe_playwright_python") / "axe.min.js").read_text()
AXE_RUN = """async (scope) => {
  const found = await axe.run(document.querySelector(scope), {resultTypes: ["violations"]});
  return found.violations.filter(v => v.impact === "serious" || v.impact === "critical")
    .map(v => ({rule: v.id, impact: v.impact, help: v.help,
                where: v.nodes.slice(0, 5).map(n => n.target.join(" "))}));
}"""
LEAST = 4.5
REASON = "not during the freeze;\nask again on Monday"


def model(body: dict[str, Any]) -> Turn:
    """Every request restarts a service (an approval); then the answer."""
    if body.get("stream") or any(m["role"] == "tool" for m in body["messages"]):
        return answer("The restart is **handled**.")
    asked = json.dumps([m for m in body["messages"] if m["role"] == "user"][-1])
    service = "web" if "web" in asked else "api"
    return tool_call("ops__restart", {"name": service}, id=f"call_{service}")


async def low_contrast(page: Any, scope: str = "body") -> list[dict[str, Any]]:
    return list(await page.evaluate(CONTRAST, [scope, LEAST]))


async def axe_serious(page: Any, scope: str = "body") -> list[dict[str, Any]]:
    """axe-core's serious and critical violations in `scope` (evaluated, not a <script>: the
    console's Content-Security-Policy allows no inline script, rightly)."""
    if not await page.evaluate("() => typeof axe !== 'undefined'"):
        await page.evaluate(AXE + "\n;undefined")
    return list(await page.evaluate(AXE_RUN, scope))


async def test_contrast_in_every_state_and_the_open_conversation_is_current(
    bot: ServeProcess, browser: Any, fake_openai: FakeOpenAI
) -> None:
    fake_openai.respond_with(model)
    page = await browser.new_page()
    trouble = await watch(page)
    await page.goto(bot.url + "/")
    await page.wait_for_selector('body[data-ready="thread:"]')
    assert await low_contrast(page) == []  # empty
    assert await axe_serious(page) == []

    await send(page, "restart the api service")
    await page.wait_for_url(THREAD_URL)
    first = page.url[-32:]
    card = page.locator('.item.approval[data-state="pending"]')
    await card.wait_for()
    await page.locator("#threads li.open .state-waiting_approval").wait_for()
    await page.locator("#threads li.open .badge.pending").wait_for()
    assert await low_contrast(page) == []  # a pending card; amber on the selected row
    assert await axe_serious(page) == []
    current = page.locator("#threads a[aria-current=page]")
    assert await current.count() == 1 and await current.get_attribute("data-root") == first

    await page.fill("#user", "lead")
    await page.press("#user", "Tab")
    await card.locator('button[data-decision="approve"]').click()
    await page.locator(".item.answer").wait_for()
    await page.locator("#threads li.open .state-done").wait_for()
    assert await low_contrast(page) == []  # answered; green on the selected row
    assert await axe_serious(page) == []

    await page.click("#new")
    await page.wait_for_selector('body[data-ready="thread:"]')
    assert await page.locator("#threads a[aria-current]").count() == 0
    await send(page, "restart the web service")
    await page.wait_for_url(THREAD_URL)
    card = page.locator('.item.approval[data-state="pending"]')
    await card.locator('button[data-decision="reject"]').click()
    await page.locator("#reject-dialog").wait_for(state="visible")
    await page.fill("#reject-reason", REASON)
    assert await low_contrast(page, "#reject-dialog") == []  # the dialog
    assert await axe_serious(page, "#reject-dialog") == []
    await page.click("#reject-confirm")
    rejected = page.locator('.item.approval[data-state="rejected"]')
    await rejected.wait_for()
    reason = rejected.locator(".folded .comment")  # on the decided card's one line
    assert await reason.inner_text() == REASON  # the line break is shown as one
    await page.locator(".item.answer").wait_for()
    await page.locator("#threads li.open .state-done").wait_for()
    assert await low_contrast(page) == []  # rejected and answered
    opened = await page.locator("#threads a[aria-current=page]").get_attribute("data-root")
    assert opened == page.url[-32:]

    await page.click("#nav-approvals")
    await page.locator("h3", has_text="Recent decisions (2)").wait_for()
    assert await page.get_attribute("#nav-approvals", "aria-current") == "page"
    assert await low_contrast(page) == []  # the approvals view
    assert await axe_serious(page) == []

    await page.click("#nav-calls")
    await page.locator("table.calls tbody tr").nth(1).wait_for()
    assert await page.get_attribute("#nav-calls", "aria-current") == "page"
    assert await page.get_attribute("#nav-approvals", "aria-current") is None
    assert await low_contrast(page) == []  # the call log
    assert await axe_serious(page) == []

    await page.set_viewport_size({"width": 390, "height": 844})
    await page.click("#menu")
    await page.wait_for_function(
        "() => document.getElementById('sidebar').getBoundingClientRect().x >= 0"
    )
    assert await low_contrast(page, "#sidebar") == []  # the phone's drawer
    assert trouble == {"errors": [], "failed": [], "dialogs": []}
