"""The web console end to end: the real app, the fake model, a fake ops API and the console API."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.server import RUNTIME_KEY, create_app
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.server.conftest import ConsoleClient, OpsAPI, llm_settings


def restart_then_answer(body: dict[str, Any]) -> Turn:
    """The model: restart `api` first; once it has a tool result, answer; synthesis streams."""
    if body.get("stream"):
        return answer("The api service was restarted.")
    last = body["messages"][-1]
    if last["role"] == "tool":
        return answer("Done: api restarted.")
    return tool_call("ops__restart", {"name": "api"}, id="call_restart")


def _approval(item: dict[str, Any]) -> bool:
    return item["kind"] == "approval"


async def test_request_approve_answer(
    console: ConsoleClient, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    fake_openai.respond_with(restart_then_answer)
    response = await console.send("please restart the api service")
    assert response.status == 202
    sent = await response.json()
    assert sent["outcome"] == "started"
    thread = sent["thread"]

    card = await console.wait_item(lambda i: _approval(i) and i["data"]["state"] == "pending")
    assert card["thread"] == thread
    assert card["data"]["tool_name"] == "ops__restart"
    assert card["data"]["risk"] == "high"
    assert card["data"]["requester"] == "alice"
    assert json.loads(card["data"]["arguments"]) == {"name": "api"}
    assert ops_api.restarts == []  # nothing runs before a human says so
    status = await console.wait_item(lambda i: i["kind"] == "status" and i["thread"] == thread)
    assert status["data"]["state"] in ("running", "waiting_approval")

    decided = await console.decide(card["data"]["approval_id"], "approve", user="bob")
    assert decided.status == 200
    assert (await decided.json())["status"] == "decided"

    answer_item = await console.wait_item(lambda i: i["kind"] == "answer")
    assert answer_item["thread"] == thread
    assert "restarted" in answer_item["data"]["markdown"]
    assert ops_api.restarts == ["api"]
    card = await console.wait_item(lambda i: _approval(i) and i["data"]["state"] == "approved")
    assert card["data"]["decided_by"] == ["bob"]
    await console.wait_item(
        lambda i: i["kind"] == "status" and i["thread"] == thread and i["data"]["state"] == "done"
    )

    steps = console.of_thread(thread, "step")
    assert any(
        (e["type"], e["status"], e.get("tool_name")) == ("iteration", "done", "ops__restart")
        for e in steps
    )
    assert any((e["type"], e["status"]) == ("approval", "waiting") for e in steps)
    answer = console.of_thread(thread, "answer")
    streamed = "".join(e["content"] for e in answer if e["status"] == "delta")
    assert streamed == "The api service was restarted."

    again = await console.decide(card["data"]["approval_id"], "reject", user="carol")
    assert again.status == 409
    assert (await again.json())["status"] == "already_decided"


async def test_reject_with_reason_reaches_the_model(
    console: ConsoleClient, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    fake_openai.respond_with(restart_then_answer)
    await console.send("restart the api service")
    card = await console.wait_item(lambda i: _approval(i) and i["data"]["state"] == "pending")

    decided = await console.decide(
        card["data"]["approval_id"], "reject", user="bob", reason="not during the release"
    )
    assert decided.status == 200

    await console.wait_item(lambda i: i["kind"] == "answer")
    card = await console.wait_item(lambda i: _approval(i) and i["data"]["state"] == "rejected")
    assert card["data"]["decision_reason"] == "not during the release"
    assert ops_api.restarts == []
    tool_messages = [
        m for body in fake_openai.requests for m in body["messages"] if m["role"] == "tool"
    ]
    assert any("not during the release" in str(m["content"]) for m in tool_messages)


async def test_decisions_that_change_nothing(console: ConsoleClient) -> None:
    missing = await console.decide("no-such-approval", "approve")
    assert missing.status == 404
    assert (await missing.json())["status"] == "not_found"
    bad = await console.decide("no-such-approval", "maybe")
    assert bad.status == 400
    empty = await console.send("   ")
    assert empty.status == 400


async def test_state_lists_tools_surfaces_and_no_banner(console: ConsoleClient) -> None:
    state = await (await console.client.get("/console/api/state")).json()
    assert state["llm_configured"] is True
    assert state["banner"] is None
    assert {"ops__get_service", "ops__restart"} <= set(state["tools"])
    assert state["surfaces"] == ["console"]
    app = console.client.app
    assert app is not None
    assert "ops__restart" in app[RUNTIME_KEY].tools


def audit_then_answer(body: dict[str, Any]) -> Turn:
    if body.get("stream"):
        return answer("Here is what the audit log says.")
    if body["messages"][-1]["role"] == "tool":
        return answer("Reported.")
    return tool_call("audit__report", {"since": "7d"}, id="call_audit")


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_audit_tool_is_built_in_and_guarded_by_viewers(
    console: ConsoleClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.respond_with(audit_then_answer)
    await console.send("who approved restarts last week?", user="mallory")
    await console.wait_item(lambda i: i["kind"] == "answer")
    observations = [
        m["content"] for body in fake_openai.requests for m in body["messages"]
        if m["role"] == "tool"
    ]  # fmt: skip
    assert observations
    assert all("not allowed to see audit reports" in str(text) for text in observations)


def restart_once(body: dict[str, Any]) -> Turn:
    """Like `restart_then_answer`, but answers once anything came back (a tool or an interrupt)."""
    if body.get("stream"):
        return answer("Restarted, and noted your message.")
    if any(m["role"] == "tool" for m in body["messages"]):
        return answer("Done.")
    return tool_call("ops__restart", {"name": "api"}, id="call_restart")


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_reply_during_a_run_is_an_interrupt(
    console: ConsoleClient, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    fake_openai.respond_with(restart_once)
    thread = (await (await console.send("restart the api service")).json())["thread"]
    card = await console.wait_item(lambda i: _approval(i) and i["data"]["state"] == "pending")

    reply = await console.send("and tell me when it is back", thread=thread)
    assert reply.status == 202
    sent = await reply.json()
    assert (sent["thread"], sent["outcome"]) == (thread, "interrupt")
    # acknowledged where it was sent: after the card, as an interrupt the agent will read
    mine = await console.wait_item(
        lambda i: i["id"] == sent["id"] and i["data"]["outcome"] == "interrupt"
    )
    assert mine["kind"] == "message" and mine["position"] > card["position"]

    await console.decide(card["data"]["approval_id"], "approve", user="bob")
    await console.wait_item(lambda i: i["kind"] == "answer" and i["thread"] == thread)
    seen = [
        str(m.get("content")) for body in fake_openai.requests for m in body["messages"]
        if m["role"] == "user"
    ]  # fmt: skip
    assert any("[USER INTERRUPT]" in text and "tell me when it is back" in text for text in seen)
    assert ops_api.restarts == ["api"]


async def test_read_only_mode_blocks_mutating_calls_before_any_card(
    aiohttp_client, make_settings, manifests_dir, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    settings = make_settings(
        chatops_manifests_dir=manifests_dir, chatops_read_only=True, **llm_settings(fake_openai)
    )
    console = ConsoleClient(await aiohttp_client(create_app(settings)))
    await console.start()
    try:
        fake_openai.respond_with(restart_then_answer)
        await console.send("restart the api service")
        await console.wait_item(lambda i: i["kind"] == "answer")
        assert not [i for i in console.items.values() if _approval(i)]
        assert ops_api.restarts == []
        tool_results = [
            str(m["content"]) for body in fake_openai.requests for m in body["messages"]
            if m["role"] == "tool"
        ]  # fmt: skip
        assert any("read-only mode" in text for text in tool_results)
    finally:
        await console.close()
