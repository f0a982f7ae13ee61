"""Answers as a daily user reads them: a table keeps its column alignment, a code block its
language (named above it, `class="language-…"` on the code) and gets a Copy button that puts
its text on the clipboard, a quote is set off. While the answer streams in, it is shown
rendered, grown in place: never a raw `**` or `|---|`, and the paragraph shown first is the same
element at the end (no whole-block swap). Scrolled up, news below offers "Jump to latest".
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from tests.browser.test_console_journey import THREAD_URL, send, watch
from tests.fakes.openai_server import FakeOpenAI, Turn, answer
from tests.server.serve_process import ServeProcess

COMMAND = "kubectl -n prod get pods"
ANSWER = (
    "The **api** service is healthy.\n\n"
    "| pod | restarts | age |\n|:--|--:|:-:|\n| api-1 | 0 | 2d |\n| api-2 | 12 | 5h |\n\n"
    f"```bash\n{COMMAND}\n```\n\n"
    "> Restarts above 10 are worth a look.\n"
)
STEPS = "\n\n".join(f"Step {n}: check the dashboards." for n in range(1, 60))

WATCH = """() => {
  window.snapshots = [];
  window.firstParagraph = null;
  new MutationObserver(() => {
    const live = document.querySelector('[data-kind="live"] .markdown');
    if (!live) return;
    window.snapshots.push(live.innerText);
    const p = live.querySelector('p');
    if (p && !window.firstParagraph) window.firstParagraph = p;
    if (window.firstParagraph && window.firstParagraph.isConnected) window.keptParagraph = true;
    if (window.firstParagraph && !window.firstParagraph.isConnected && live.querySelector('p'))
      window.swapped = window.swapped || [window.firstParagraph.outerHTML, live.innerHTML];
  }).observe(document.getElementById('log'), {childList: true, subtree: true,
    characterData: true});
}"""


def model(body: dict[str, Any]) -> Turn:
    asked = json.dumps([m for m in body["messages"] if m["role"] == "user"][-1])
    text = STEPS if "steps" in asked else "Noted." if "thanks" in asked else ANSWER
    return dataclasses.replace(answer(text), chunk_chars=3, chunk_delay_s=0.01)


async def test_markdown_fidelity(
    bot: ServeProcess, browser: Any, fake_openai: FakeOpenAI, artifacts: Path
) -> None:
    fake_openai.respond_with(model)
    await browser.grant_permissions(["clipboard-read", "clipboard-write"], origin=bot.url)
    page = await browser.new_page()
    trouble = await watch(page)
    await page.goto(bot.url + "/")
    await page.wait_for_selector('body[data-ready="thread:"]')
    await send(page, "thanks in advance")
    await page.wait_for_url(THREAD_URL)
    await page.locator('.item.status[data-state="done"]').wait_for()
    await page.evaluate(WATCH)
    await send(page, "how is the api?")
    body = page.locator(".item.answer:not(.live) .markdown")
    await body.locator("blockquote").wait_for()

    # streamed: rendered as it grew, never a half-made mark, the first paragraph kept
    snapshots = await page.evaluate("window.snapshots")
    assert len(set(snapshots)) >= 3, snapshots
    assert not [s for s in snapshots if "**" in s or "|--" in s or "```" in s], snapshots
    kept = await page.evaluate("[window.keptParagraph, window.swapped]")
    assert kept == [True, None], kept

    # the table keeps its alignment; the code its language; the quote is styled
    cells = await body.locator("th, td").evaluate_all(
        "els => els.map(e => [e.textContent, getComputedStyle(e).textAlign])"
    )
    assert cells[:3] == [["pod", "left"], ["restarts", "right"], ["age", "center"]]
    assert cells[4] == ["0", "right"]
    code = body.locator("pre code")
    assert await code.get_attribute("class") == "language-bash"
    assert await body.locator(".code-bar .lang").inner_text() == "bash"
    quote_border = await body.locator("blockquote").evaluate(
        "e => getComputedStyle(e).borderLeftStyle"
    )
    assert quote_border == "solid"

    # Copy puts the code on the clipboard
    await body.locator(".code-bar button.copy").click()
    await body.locator(".code-bar button.copy", has_text="Copied").wait_for()
    assert (await page.evaluate("navigator.clipboard.readText()")).strip() == COMMAND
    await page.screenshot(path=str(artifacts / "1-markdown.png"), full_page=True)

    # a long answer, scrolled up: news below offers "Jump to latest", which goes there
    await send(page, "list the steps")
    await page.locator(".item.answer:not(.live)", has_text="Step 59").wait_for()
    await page.evaluate("window.scrollTo(0, 0)")
    assert await page.locator("#jump").is_hidden()
    colleague = await browser.new_page()
    await colleague.goto(page.url)
    await colleague.wait_for_selector(f'body[data-ready="thread:{page.url[-32:]}"]')
    await send(colleague, "thanks")
    await page.locator("#jump").wait_for(state="visible")
    assert await page.evaluate("scrollY") == 0  # the reader's place is kept
    await page.click("#jump")
    await page.wait_for_function("innerHeight + scrollY >= document.body.scrollHeight - 40")
    await page.locator("#jump").wait_for(state="hidden")
    assert trouble == {"errors": [], "failed": [], "dialogs": []}
