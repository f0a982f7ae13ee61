"""Live events change only what they change: while a user has a command selected in a code block
and a button focused, a run in another conversation leaves the conversation shown untouched (not
one DOM mutation), and a run in the same conversation adds its items below without touching the
selection, the focus or the scroll position. A screen reader hears only the new items.

A second browser tab does the typing, as a colleague (or the user's other tab) would.
"""

from __future__ import annotations

import json
from typing import Any

from tests.browser.test_console_journey import THREAD_URL, send, watch
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.server.serve_process import ServeProcess

COMMAND = "kubectl rollout restart deploy/api --namespace prod"
STEPS = "\n\n".join(f"Step {n}: check the dashboards and the logs." for n in range(1, 40))
RUNBOOK = f"Run this:\n\n```sh\n{COMMAND}\n```\n\n{STEPS}"

MARK = """() => {
  const code = document.querySelector('.item.answer:not(.live) pre code');
  const range = document.createRange();
  range.selectNodeContents(code);
  getSelection().removeAllRanges();
  getSelection().addRange(range);
  window.kept = {code, button: document.querySelector('.item.answer button.rate-up')};
  window.kept.button.focus({preventScroll: true});
  window.kept.code.scrollIntoView({block: 'center'});
  window.kept.scrollY = scrollY;
  window.mutations = 0;
  new MutationObserver(list => { window.mutations += list.length; })
    .observe(document.getElementById('log'), {subtree: true, childList: true,
      characterData: true, attributes: true});
  return getSelection().toString();
}"""

KEPT = """() => ({
  selection: getSelection().toString(),
  focused: document.activeElement === window.kept.button,
  connected: window.kept.code.isConnected,
  scrolled: scrollY === window.kept.scrollY,
  mutations: window.mutations,
})"""


def model(body: dict[str, Any]) -> Turn:
    """The runbook answers with a code block; a restart waits for its approval; else a line."""
    asked = json.dumps([m for m in body["messages"] if m["role"] == "user"][-1])
    if "restart" in asked and not body.get("stream"):
        if any(m["role"] == "tool" for m in body["messages"]):
            return answer("restarted")
        return tool_call("ops__restart", {"name": "web"}, id="call_web")
    return answer(RUNBOOK if "runbook" in asked else "You are welcome.")


async def test_selection_focus_and_scroll_survive_live_events(
    bot: ServeProcess, browser: Any, fake_openai: FakeOpenAI
) -> None:
    fake_openai.respond_with(model)
    page = await browser.new_page()
    trouble = await watch(page)
    await page.goto(bot.url + "/")
    await page.wait_for_selector('body[data-ready="thread:"]')
    await send(page, "show me the runbook")
    await page.wait_for_url(THREAD_URL)
    runbook_url = page.url
    # the answer as posted (with its thumbs), not the rendering that streams before it
    await page.locator(".item.answer button.rate-up").wait_for()
    assert await page.evaluate(MARK) == COMMAND

    # another conversation's run (a card waiting in it): nothing in this one is touched
    colleague = await browser.new_page()
    await colleague.goto(bot.url + "/")
    await colleague.wait_for_selector('body[data-ready="thread:"]')
    await send(colleague, "restart the web service")
    await colleague.locator('.item.approval[data-state="pending"]').wait_for()
    await page.locator("#threads li .badge.pending").wait_for()  # its events reached this tab
    kept = await page.evaluate(KEPT)
    assert kept == {"selection": COMMAND, "focused": True, "connected": True,
                    "scrolled": True, "mutations": 0}  # fmt: skip

    # this conversation's own run: its items arrive below, the rest stays as it was
    await colleague.goto(runbook_url)
    await colleague.wait_for_selector(f'body[data-ready="thread:{runbook_url[-32:]}"]')
    await send(colleague, "thanks")
    await page.locator(".item.answer", has_text="You are welcome.").wait_for()
    kept = await page.evaluate(KEPT)
    assert kept["mutations"] > 0  # the new items were added
    assert {k: v for k, v in kept.items() if k != "mutations"} == {
        "selection": COMMAND, "focused": True, "connected": True, "scrolled": True,
    }  # fmt: skip
    # a screen reader is told of the new items, not read the whole thread again
    said = await page.locator("#announce p").all_inner_texts()
    assert said and said[-1].startswith("Answer: You are welcome.")
    assert not [text for text in said if "runbook" in text.lower() or "Step 1" in text]
    assert await page.locator("#log[aria-live], #log [aria-live]").count() == 0
    assert trouble == {"errors": [], "failed": [], "dialogs": []}
