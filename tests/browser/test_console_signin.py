"""A public console signs its people in (a fake OpenID provider: discovery, authorize, token,
JWKS): an unsigned request is refused and the page goes to sign in; the "you are" box shows
the signed-in name and cannot be changed; the signed-in requester cannot approve her own call
(four-eyes) whatever the page is made to send; Sign out ends the session; a signed-in approver
decides, and the call runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlmodel import Session, create_engine, select

from bot.storage.models import Run
from tests.browser.test_console_journey import THREAD_URL, send
from tests.fakes.oidc_provider import CLIENT_ID, CLIENT_SECRET, FakeOidcProvider
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI, ops_manifest
from tests.server.serve_process import ServeProcess

ALICE, LEAD = "alice@example.com", "lead@example.com"


@pytest.fixture
async def provider() -> AsyncIterator[FakeOidcProvider]:
    idp = FakeOidcProvider(user=ALICE)
    await idp.start()
    yield idp
    await idp.close()


def restart(body: dict[str, Any]) -> Turn:
    if body.get("stream") or any(m["role"] == "tool" for m in body["messages"]):
        return answer("The api is restarted.")
    return tool_call("ops__restart", {"name": "api"})


async def signed_in_again(provider: FakeOidcProvider, times: int) -> None:
    """Until the provider has seen `times` sign-ins (bounded)."""
    for _ in range(300):
        if len(provider.authorize_requests) >= times:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{len(provider.authorize_requests)} sign-ins, not {times}")


async def test_signed_in_people_approve_as_themselves(
    tmp_path: Path, browser: Any, provider: FakeOidcProvider, fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
) -> None:  # fmt: skip
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    four_eyes = ops_manifest(ops_api.url, approvers=(ALICE, LEAD)).replace(
        "    risk: high", "    allow_self_approval: false\n    risk: high"
    )
    (manifests / "ops.yaml").write_text(four_eyes)
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'chatops.db'}",
        "CHATOPS_MANIFESTS_DIR": str(manifests),
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
    fake_openai.respond_with(restart)
    await bot.start()
    try:
        async with aiohttp.ClientSession() as stranger:  # no session: refused
            refused = await stranger.get(f"{bot.url}/console/api/state")
            assert refused.status == 401
            assert (await refused.json())["signin"] == "/console/signin"
        page = await browser.new_page()
        await page.goto(bot.url + "/")
        await page.wait_for_selector('body[data-ready="thread:"]')
        assert len(provider.authorize_requests) == 1  # the page went to sign in, and came back
        you = page.locator("#user")
        assert await you.input_value() == ALICE
        assert await you.evaluate("box => box.readOnly")
        # the page's box says the lead: the server does not listen to it
        await you.evaluate(f"box => {{ box.readOnly = false; box.value = {LEAD!r}; }}")

        await send(page, "restart api")
        await page.wait_for_url(THREAD_URL)
        conversation = page.url
        card = page.locator('.item.approval[data-state="pending"]')
        await card.locator('button[data-decision="approve"]').click()
        await page.locator("#toast", has_text="someone else").wait_for()
        assert ops_api.restarts == []
        with Session(create_engine(env["DATABASE_URL"])) as session:
            assert [r.requester for r in session.exec(select(Run)).all()] == [ALICE]

        provider.user = LEAD  # Sign out; the next sign-in is the lead's
        await page.locator("#signout").click()
        await signed_in_again(provider, 2)
        await page.wait_for_selector('body[data-ready="thread:"]')
        assert await page.locator("#user").input_value() == LEAD
        await page.goto(conversation)
        card = page.locator('.item.approval[data-state="pending"]')
        await card.locator('button[data-decision="approve"]').click()
        await page.locator(".item.answer").wait_for()
        assert ops_api.restarts == ["api"]
    finally:
        await bot.kill()
