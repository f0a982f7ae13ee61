"""Edit, then approve, and request changes, in the console's dialogs, in a real browser on a real
`chatops serve`: a bad edit is refused inside the dialog (nothing decided), the edited call is
what runs; a request for changes runs nothing and the model reads it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.approvals.test_rules import tool_texts
from tests.browser.test_console_journey import restart_model, send, watch
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI
from tests.server.serve_process import ServeProcess

GUIDANCE = "check the web service's health first"


async def test_edit_then_approve_and_request_changes_in_the_console(
    bot: ServeProcess, browser: Any, fake_openai: FakeOpenAI, ops_api: OpsAPI, artifacts: Path
) -> None:
    fake_openai.respond_with(restart_model)
    page = await browser.new_page()
    trouble = await watch(page)
    await page.goto(bot.url + "/")
    await page.wait_for_selector('body[data-ready="thread:"]')
    await page.fill("#user", "lead")
    await page.press("#user", "Tab")

    await send(page, "restart the api service")
    card = page.locator('.item.approval[data-state="pending"]')
    await card.locator('button[data-decision="approve_edited"]').click()
    dialog = page.locator("#edit-dialog")
    await dialog.wait_for()
    field = dialog.locator("#edit-arg-0")
    assert await field.input_value() == "api"
    assert "name (required)" in await dialog.inner_text()

    await field.fill("")  # a bad edit: the required argument emptied
    await dialog.locator("#edit-confirm").click()
    problem = dialog.locator('.field-error[data-name="name"]')
    await problem.wait_for()
    assert await problem.inner_text() == "required"
    assert await dialog.is_visible() and ops_api.calls == []
    await page.screenshot(path=str(artifacts / "1-edit-refused.png"), full_page=True)

    await field.fill("web")
    await dialog.locator("#edit-confirm").click()
    await dialog.wait_for(state="detached")
    approved = page.locator('.item.approval[data-state="approved"]')
    await approved.wait_for()
    await page.locator('.item.status[data-state="done"]').wait_for()
    assert ops_api.restarts == ["web"]
    await approved.locator("details.full summary").click()  # decided: folded, details on demand
    await approved.locator("pre.arguments").wait_for()
    shown = await approved.inner_text()
    assert "Edited by lead" in shown and '~ name: "api" -> "web"' in shown
    assert '"name": "web"' in shown
    await page.screenshot(path=str(artifacts / "2-edited-and-approved.png"), full_page=True)
    assert any("EDITED" in t for t in tool_texts(fake_openai))

    await page.click("#new")
    await send(page, "restart the api service again")
    card = page.locator('.item.approval[data-state="pending"]')
    await card.locator('button[data-decision="request_changes"]').click()
    await page.locator("#changes-dialog").wait_for()
    await page.fill("#changes-text", GUIDANCE)
    await page.click("#changes-confirm")
    asked = page.locator('.item.approval[data-state="changes_requested"]')
    await asked.wait_for()
    await page.locator('.item.status[data-state="done"]').wait_for()
    assert GUIDANCE in await asked.inner_text()
    assert ops_api.restarts == ["web"]  # nothing more ran
    assert any(GUIDANCE in t and "asked for changes" in t for t in tool_texts(fake_openai))
    await page.screenshot(path=str(artifacts / "3-changes-requested.png"), full_page=True)

    # the refused edit's 422 is the only failed request (chromium logs it as a console error)
    assert [f.split()[0] for f in trouble["failed"]] == ["422"] and trouble["dialogs"] == []
    assert all("status of 422" in e for e in trouble["errors"])
