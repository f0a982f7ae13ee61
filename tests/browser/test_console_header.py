"""The console's header says which model answers, and says so plainly when none is configured
(it named the default model, which nothing would ever call)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.browser.conftest import ServeProcess
from tests.server.serve_process import serving


async def test_the_header_names_the_model_or_says_there_is_none(
    tmp_path: Path, bot: ServeProcess, browser: Any
) -> None:
    page = await browser.new_page()
    await page.goto(bot.url + "/")
    await page.wait_for_selector('body[data-ready="thread:"]')
    assert (await page.locator("#meta").inner_text()).startswith("model fake-model \u00b7")

    bare = tmp_path / "bare"
    bare.mkdir()
    env = {"DATABASE_URL": f"sqlite:///{bare / 'chatops.db'}", "CHATOPS_MANIFESTS_DIR": str(bare)}
    async with serving(bare, env) as unconfigured:
        await page.goto(unconfigured.url + "/")
        await page.wait_for_selector('body[data-ready="thread:"]')
        meta = await page.locator("#meta").inner_text()
        assert meta.startswith("no model configured \u00b7") and "gpt" not in meta
        await unconfigured.stop()
