"""A pending approval survives a restart of the whole server: the new app resumes the run."""

from __future__ import annotations

import asyncio

from aiohttp.test_utils import TestClient, TestServer

from bot.server import create_app
from tests.fakes.openai_server import FakeOpenAI
from tests.server.conftest import ConsoleClient, OpsAPI, llm_settings
from tests.server.test_console import restart_then_answer


async def test_pending_approval_survives_a_restart(
    make_settings, manifests_dir, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    fake_openai.respond_with(restart_then_answer)
    settings = make_settings(chatops_manifests_dir=manifests_dir, **llm_settings(fake_openai))

    first = TestClient(TestServer(create_app(settings)))
    await first.start_server()
    console = ConsoleClient(first)
    await console.start()
    sent = await console.send("restart the api service")
    assert sent.status == 202
    card = await console.wait_item(lambda i: i["kind"] == "approval")
    assert card["data"]["state"] == "pending"
    # shut the whole server down with the event stream still open: it must end, not hang
    await asyncio.wait_for(first.close(), 30)
    await console.close()
    assert ops_api.restarts == []

    second = TestClient(TestServer(create_app(settings)))
    await second.start_server()
    try:
        console = ConsoleClient(second)
        await console.start()
        decided = await console.decide(card["data"]["approval_id"], "approve", user="bob")
        assert decided.status == 200
        answer = await console.wait_item(lambda i: i["kind"] == "answer")
        assert answer["thread"] == card["thread"]
        assert ops_api.restarts == ["api"]
        await console.close()
    finally:
        await second.close()
