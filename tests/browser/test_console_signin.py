"""A public console signs its people in: the page goes to the identity provider and back, the
"you are" box shows the signed-in name and cannot be changed, a message is sent as that
person, and Sign out ends the session (the next visit signs in again)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, create_engine, select

from bot.storage.models import Run
from tests.fakes.oidc_provider import CLIENT_ID, CLIENT_SECRET, FakeOidcProvider
from tests.fakes.openai_server import FakeOpenAI, answer
from tests.server.serve_process import ServeProcess

USER = "alice@example.com"


@pytest.fixture
async def provider() -> AsyncIterator[FakeOidcProvider]:
    idp = FakeOidcProvider(user=USER)
    await idp.start()
    yield idp
    await idp.close()


async def test_a_public_console_signs_people_in_and_out(
    tmp_path: Path, browser: Any, provider: FakeOidcProvider, fake_openai: FakeOpenAI
) -> None:
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'chatops.db'}",
        "CHATOPS_MANIFESTS_DIR": str(tmp_path),
        "OPENAI_BASE_URL": fake_openai.base_url,
        "OPENAI_API_KEY": "sk-test-not-a-secret",
        "CHATOPS_MODEL": "fake-model",
        "CHATOPS_CONSOLE_PUBLIC": "true",
        "CHATOPS_CONSOLE_OIDC_ISSUER": provider.issuer,
        "CHATOPS_CONSOLE_OIDC_CLIENT_ID": CLIENT_ID,
        "CHATOPS_CONSOLE_OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "CHATOPS_CONSOLE_SESSION_SECRET": "browser-test-session-secret-71",
    }
    bot = ServeProcess(tmp_path, env)
    env["CHATOPS_CONSOLE_URL"] = bot.url  # the port is chosen before the process starts
    provider.redirect_uri = f"{bot.url}/console/signin/callback"
    fake_openai.respond_with(lambda body: answer("All quiet."))
    await bot.start()
    try:
        page = await browser.new_page()
        await page.goto(bot.url + "/")
        await page.wait_for_selector('body[data-ready="thread:"]')
        assert len(provider.authorize_requests) == 1  # the page went to sign in, and came back
        you = page.locator("#user")
        assert await you.input_value() == USER
        assert await you.evaluate("box => box.readOnly")
        await page.locator("#text").fill("status?")
        await page.keyboard.press("Enter")
        await page.wait_for_selector("text=All quiet.")
        with Session(create_engine(env["DATABASE_URL"])) as session:
            assert [r.requester for r in session.exec(select(Run)).all()] == [USER]
        await page.locator("#signout").click()
        for _ in range(300):  # signed out: the reload goes to sign in again (bounded wait)
            if len(provider.authorize_requests) == 2:
                break
            await asyncio.sleep(0.1)
        assert len(provider.authorize_requests) == 2
        await page.wait_for_selector('body[data-ready="thread:"]')
        assert await page.locator("#user").input_value() == USER
    finally:
        await bot.kill()
