"""A batch in the console, in a real browser on a real `chatops serve`: one model response asks
for two restarts that need approval; ONE card lists both, each with its own buttons, and
Approve all / Reject all. One call is approved on its own, the other rejected (Approve all /
Reject all are gone once one call is left): the approved call runs, the rejected one does not,
the model reads each outcome, and the card folds once both are decided. A second batch is
approved with one click on Approve all.

The screenshots of the docs (docs/approvals.md) are taken here: the batch card, and the edit,
request-changes and approve-with-comment dialogs opened on one of its calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.approvals.test_rules import tool_texts
from tests.browser.test_console_journey import send, watch
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_calls
from tests.fakes.ops_api import OpsAPI
from tests.server.serve_process import ServeProcess

REASON = "web stays up during the demo"


def batch_model(body: dict[str, Any]) -> Turn:
    """Ask to restart api and web in one response; then answer."""
    if body.get("stream"):
        return answer("api restarted; web was not (the approver said no).")
    if any(m["role"] == "tool" for m in body["messages"]):
        return answer("handled")
    return tool_calls(("ops__restart", {"name": "api"}), ("ops__restart", {"name": "web"}))


async def test_a_batch_card_in_the_console(
    bot: ServeProcess, browser: Any, fake_openai: FakeOpenAI, ops_api: OpsAPI, artifacts: Path
) -> None:
    fake_openai.respond_with(batch_model)
    page = await browser.new_page()
    trouble = await watch(page)
    await page.goto(bot.url + "/")
    await page.wait_for_selector('body[data-ready="thread:"]')
    await page.fill("#user", "lead")
    await page.press("#user", "Tab")

    await send(page, "restart api and web")
    batch = page.locator('.item.approval-batch[data-state="pending"]')
    calls = batch.locator(".batch-call")
    await page.wait_for_function(
        "() => document.querySelectorAll('.approval-batch .batch-call').length === 2"
    )
    assert await page.locator(".item.approval").count() == 2  # the calls, inside the one card
    assert await page.locator('#log > .item[data-kind="approval_batch"]').count() == 1
    assert await batch.locator('button[data-decision="approve_all"]').is_visible()
    shown = await batch.inner_text()
    assert '"name": "api"' in shown and '"name": "web"' in shown
    await page.screenshot(path=str(artifacts / "console-batch.png"), full_page=True)

    # the dialogs of one call (the docs show each), each cancelled: nothing decided
    web = calls.nth(1)
    await web.locator('button[data-decision="approve_edited"]').click()
    edit = page.locator("#edit-dialog")
    await edit.wait_for()
    await page.screenshot(path=str(artifacts / "console-edit-dialog.png"))
    await edit.locator('button[value="cancel"]').click()
    await edit.wait_for(state="detached")
    for decision, dialog, name in (
        ("request_changes", "#changes-dialog", "console-changes-dialog.png"),
        ("approve_comment", "#approve-dialog", "console-comment-dialog.png"),
    ):
        await web.locator(f'button[data-decision="{decision}"]').click()
        await page.locator(dialog).wait_for()
        await page.screenshot(path=str(artifacts / name))
        await page.locator(f'{dialog} button[value="cancel"]').click()
        await page.locator(dialog).wait_for(state="hidden")
    assert ops_api.calls == []

    await calls.nth(0).locator('button[data-decision="approve"]').click()
    await batch.locator('.batch-call[data-state="approved"]').wait_for()
    assert await batch.locator('button[data-decision="approve_all"]').count() == 0  # one left
    await batch.locator('button[data-decision="reject"]').click()
    await page.locator("#reject-dialog").wait_for()
    await page.fill("#reject-reason", REASON)
    await page.click("#reject-confirm")
    folded = page.locator('.item.approval-batch[data-state="decided"]')
    await folded.wait_for()
    await page.locator('.item.status[data-state="done"]').wait_for()
    assert ops_api.restarts == ["api"]
    text = await folded.inner_text()
    assert "approved" in text and "rejected" in text and REASON in text
    assert any(REASON in t for t in tool_texts(fake_openai))
    await page.screenshot(path=str(artifacts / "console-batch-decided.png"), full_page=True)

    # the approvals view lists the batch's calls one by one, as decided
    await page.goto(bot.url + "/approvals")
    await page.wait_for_selector('body[data-ready^="approvals"]')
    recent = await page.locator("#approvals-view").inner_text()
    assert recent.count("ops__restart") >= 2, recent

    await page.goto(bot.url + "/")
    await page.wait_for_selector('body[data-ready="thread:"]')
    await send(page, "restart api and web again")
    batch = page.locator('.item.approval-batch[data-state="pending"]')
    await page.wait_for_function(
        "() => document.querySelectorAll('.approval-batch[data-state=pending] .batch-call')"
        ".length === 2"
    )
    await batch.locator('button[data-decision="approve_all"]').click()
    await page.locator('.item.approval-batch[data-state="decided"]').wait_for()
    await page.locator('.item.status[data-state="done"]').wait_for()
    assert sorted(ops_api.restarts) == ["api", "api", "web"]
    assert trouble == {"errors": [], "failed": [], "dialogs": []}, json.dumps(trouble)
