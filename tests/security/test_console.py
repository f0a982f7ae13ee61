"""Hole 5: the web console is reached only by whom it should be.

A same-host reverse proxy connects from 127.0.0.1 with a loopback Host, so a local console
refuses anything carrying a forwarding header. A public console needs its token (it will not
start without one) and checks it on every API request. And whoever reaches the console decides
only the approvals whose card the console posted: never a Slack or Feishu card.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from bot.cli import main
from bot.config import Settings
from bot.server import create_app
from bot.storage.models import Approval, Run
from bot.surfaces.console.signin import TOKEN_USER
from tests.fakes.openai_server import FakeOpenAI, answer, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.security.conftest import finishing, is_pending, wait_cards
from tests.server.conftest import ConsoleClient, llm_settings
from tests.slack.e2e import SlackBot
from tests.slack.payloads import mention

TOKEN = "console-token-5f1d0c9b8a7e6d5c"
PROXY_HEADERS = [
    {"Forwarded": "for=203.0.113.7;proto=https"},
    {"X-Forwarded-For": "203.0.113.7"},
    {"X-Forwarded-Host": "localhost"},
    {"X-Forwarded-Proto": "https"},
    {"X-Real-IP": "203.0.113.7"},
]


def console_settings(database_url: str, manifests: Path, llm: FakeOpenAI, **extra: Any):
    return Settings(
        _env_file=None,
        database_url=database_url,
        chatops_manifests_dir=manifests,
        **llm_settings(llm),
        **extra,
    )


@pytest.fixture
async def local_console(database_url, manifests, fake_openai, aiohttp_client) -> TestClient:
    return await aiohttp_client(create_app(console_settings(database_url, manifests, fake_openai)))


async def test_a_proxied_request_never_reaches_a_local_console(local_console: TestClient) -> None:
    """Behind nginx's default proxy_pass the peer is 127.0.0.1 and the Host passes: the
    forwarding headers are what tells the console the request started elsewhere."""
    for headers in PROXY_HEADERS:
        for method, path, body in (
            ("GET", "/", None),
            ("GET", "/console/api/state", None),
            ("GET", "/console/api/events", None),
            ("POST", "/console/api/messages", {"text": "restart api"}),
            ("POST", "/console/api/approvals/any", {"decision": "approve", "user": "mallory"}),
        ):
            response = await local_console.request(method, path, json=body, headers=headers)
            assert response.status == 403, (headers, path)
            assert "proxy" in await response.text()
    assert (await local_console.get("/console/api/state")).status == 200  # direct: allowed


def test_a_public_console_without_a_token_does_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CHATOPS_CONSOLE_PUBLIC", "true")
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'bot.db'}")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert main(["serve", "--host", "127.0.0.1", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert "CHATOPS_CONSOLE_PUBLIC=true needs CHATOPS_CONSOLE_TOKEN" in err
    assert "Traceback" not in err


async def test_a_public_console_answers_only_its_token(
    database_url, manifests, fake_openai: FakeOpenAI, ops_api: OpsAPI, aiohttp_client, db_rows
) -> None:
    settings = console_settings(
        database_url,
        manifests,
        fake_openai,
        chatops_console_public=True,
        chatops_console_token=TOKEN,
    )
    client: TestClient = await aiohttp_client(create_app(settings))
    assert (await client.get("/")).status == 200  # the page holds no data: it asks for the token
    for sent in ({}, {"Authorization": "Bearer guessed"}, {"Authorization": f"Basic {TOKEN}"}):
        for method, path in (("GET", "/console/api/state"), ("GET", "/console/api/events")):
            refused = await client.request(method, path, headers=sent)
            assert refused.status == 401 and "needs its token" in await refused.text()
        decided = await client.post(
            "/console/api/approvals/x", json={"decision": "approve"}, headers=sent
        )
        assert decided.status == 401
    bearer = {"Authorization": f"Bearer {TOKEN}", **PROXY_HEADERS[1]}  # behind a proxy: fine
    assert (await client.get("/console/api/state", headers=bearer)).status == 200

    fake_openai.script(*finishing(tool_call("ops__restart", {"name": "api"})))
    console = ConsoleClient(client, headers=bearer)
    await console.start()
    try:
        sent = await console.send("restart api", user="alice")
        assert sent.status == 202
        card = await console.wait_item(
            lambda i: i["kind"] == "approval" and i["data"]["state"] == "pending"
        )
        # a shared token names nobody: the name the page sends is not believed, so nobody
        # holding the token can pass for an approver (sign-in does that: test_console_signin)
        decided = await console.decide(card["data"]["approval_id"], "approve", user="U0LEAD")
        assert decided.status == 403
        assert ops_api.restarts == []
        [run] = db_rows(Run)
        assert run.requester == TOKEN_USER  # not "alice", whatever the page said
    finally:
        await console.close()


async def test_the_console_cannot_decide_another_platforms_approval(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI, db_rows
) -> None:
    """A card posted on Slack, approved through the console API (which trusts a typed user
    name) as a lead: refused, and nothing runs."""
    fake_openai.script(tool_call("ops__restart", {"name": "api"}), answer("x"), answer("x"))
    event = mention("restart api", user="U0DEV")
    root = event["event"]["ts"]
    await bot.send(event)
    [card] = await wait_cards(fake_slack, root, 1)
    [approval] = db_rows(Approval)
    for decision in ("approve", "approve_thread", "reject"):
        response = await bot.client.post(
            f"/console/api/approvals/{approval.id}",
            json={"decision": decision, "user": "U0LEAD"},
        )
        assert response.status == 403
        body = json.loads(await response.text())
        assert body["status"] == "wrong_platform" and "posted in slack" in body["message"]
    assert [a.status for a in db_rows(Approval)] == ["pending"]
    assert is_pending(card) and ops_api.restarts == []


def test_the_console_page_sends_its_token_and_never_puts_it_in_a_url() -> None:
    """The page takes the token from the link's fragment, keeps it in the browser, takes it
    out of the address bar, and sends it as a header on every API call (the event stream is
    read with fetch: EventSource cannot send a header, and a token in a URL would be logged).
    Every request of every module goes through api.js's `request`, which adds the header."""
    from tests.server.console_page import SCRIPTS, script

    api = script("api.js")
    assert 'location.hash.startsWith("#token=")' in api
    assert "history.replaceState" in api
    assert '{"Authorization": "Bearer " + token}' in api
    assert api.count("fetch(") == 1
    assert "return fetch(url, Object.assign({}, opts, {headers: headers(opts.headers)}));" in api
    for name in SCRIPTS:
        source = script(name)
        assert "new EventSource(" not in source and "?token" not in source, name
        assert "XMLHttpRequest" not in source and "sendBeacon" not in source, name
        if name != "api.js":
            assert "fetch(" not in source, name
