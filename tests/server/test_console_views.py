"""The console's approvals and call-log views through their routes: "waiting for you" is the
broker's own judgement (an approver list, four-eyes), decisions are listed after; the call log
filters as `chatops audit` does, downloads its CSV, and never shows a direct message's arguments;
every new route keeps the console's access rules (SQLite and PostgreSQL)."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from sqlmodel import Session

from bot.audit.render import csv_text
from bot.audit.report import iter_calls
from bot.chat.audit_report import AuditQuery
from bot.clock import utcnow
from bot.server import RUNTIME_KEY, create_app
from bot.storage.models import CallLog
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI, ops_manifest, restart_then_answer
from tests.server.conftest import llm_settings
from tests.server.sse import EventReader, item_is

PAGE_ROUTES = ("/", "/c/" + "a" * 32, "/approvals", "/calls", "/favicon.ico",
               "/console/static/app.js")  # fmt: skip
API_ROUTES = ("/console/api/threads", "/console/api/threads/" + "a" * 32,
              "/console/api/approvals", "/console/api/calls", "/console/api/state")  # fmt: skip


@pytest.fixture
async def client(
    make_settings, database_url, tmp_path: Path, ops_api: OpsAPI, fake_openai: FakeOpenAI,
    aiohttp_client,
) -> AsyncIterator[TestClient]:  # fmt: skip
    """Restarts may be approved by `lead` only."""
    manifests = tmp_path / "lead-manifests"
    manifests.mkdir()
    (manifests / "ops.yaml").write_text(ops_manifest(ops_api.url, approvers=["lead"]))
    settings = make_settings(
        database_url=database_url, chatops_manifests_dir=manifests, **llm_settings(fake_openai)
    )
    yield await aiohttp_client(create_app(settings))


async def approvals(client: TestClient, user: str) -> dict[str, Any]:
    response = await client.get("/console/api/approvals", params={"user": user})
    assert response.status == 200
    return await response.json()


async def test_the_approvals_view_splits_what_waits_for_you_from_the_rest(
    client: TestClient, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    fake_openai.respond_with(restart_then_answer)
    events = await EventReader(client).start()
    try:
        await client.post("/console/api/messages", json={"text": "restart api", "user": "dev"})
        card = await events.wait_for(item_is("approval", "pending"))
        approval_id = card.data["data"]["approval_id"]

        lead = await approvals(client, "lead")
        assert [i["data"]["approval_id"] for i in lead["mine"]] == [approval_id]
        # its age and expiry, as every inbox says them (the default timeout is an hour)
        assert re.fullmatch(
            r"asked \d+ s ago · expires in (59 min|1 h)", lead["mine"][0]["waiting"]
        )
        assert lead["others"] == [] and lead["recent"] == []
        dev = await approvals(client, "dev")  # the requester, and not an approver
        assert dev["mine"] == [] and [i["id"] for i in dev["others"]] == [card.data["id"]]
        assert dev["others"][0]["refusal"]  # says why not
        assert dev["others"][0]["data"]["arguments"] == card.data["data"]["arguments"]

        await client.post(f"/console/api/approvals/{approval_id}",
                          json={"decision": "approve", "user": "lead"})  # fmt: skip
        await events.wait_for(item_is("approval", "approved"))
    finally:
        await events.close()
    after = await approvals(client, "lead")
    assert after["mine"] == [] and after["others"] == []
    [decided] = after["recent"]
    assert decided["data"]["decided_by"] == ["lead"] and decided["state"] == "approved"
    await ops_api.wait_for(lambda: ops_api.restarts == ["api"])


def add_call(client: TestClient, **values: Any) -> None:
    assert client.app is not None
    with Session(client.app[RUNTIME_KEY].engine) as session:
        session.add(CallLog(at=utcnow(), tool_name="ops__restart", **values))
        session.commit()


async def test_the_call_log_filters_downloads_and_hides_direct_messages(
    client: TestClient,
) -> None:
    add_call(
        client,
        platform="console",
        channel="console",
        requester="dev",
        connector="ops",
        action="restart",
        mutating=True,
        arguments={"name": "api"},
        result_status="ok",
    )
    add_call(
        client,
        platform="console",
        channel="console",
        requester="dev",
        connector="ops",
        action="restart",
        mutating=True,
        arguments={"name": "web"},
        result_status="rejected",
        approval_status="rejected",
    )
    add_call(client, platform="slack", channel="D_ALICE", direct=True, requester="U_ALICE",
             connector="ops", action="restart", mutating=True, arguments={"name": "payroll"},
             result_status="error", error="payroll db is private")  # fmt: skip

    everything = await (await client.get("/console/api/calls")).json()
    assert [c["arguments"] for c in everything["calls"]] == [
        {"(direct message)": "hidden"},
        {"name": "web"},
        {"name": "api"},
    ]  # newest first; the direct message's arguments and error stay hidden
    assert everything["calls"][0]["error"] is None and everything["more"] is False
    assert "direct messages' arguments hidden" in everything["query"]
    rejected = await (await client.get("/console/api/calls?outcome=rejected&user=dev")).json()
    assert [c["arguments"] for c in rejected["calls"]] == [{"name": "web"}]
    paged = await (await client.get("/console/api/calls?limit=1")).json()
    assert len(paged["calls"]) == 1 and paged["more"] is True
    older = await client.get(f"/console/api/calls?before={paged['calls'][0]['id']}")
    assert len((await older.json())["calls"]) == 2

    download = await client.get("/console/api/calls?format=csv&connector=ops")
    assert download.status == 200
    assert download.headers["Content-Type"].startswith("text/csv")
    assert "attachment" in download.headers["Content-Disposition"]
    text = await download.text()
    assert client.app is not None
    engine = client.app[RUNTIME_KEY].engine
    wide = AuditQuery.window("7d", connector="ops", hide_direct=True, max_calls=None)
    assert text == csv_text(iter_calls(engine, wide))  # the audit's own CSV, rows and all
    assert "payroll" not in text
    assert len(list(csv.reader(io.StringIO(text)))) == 4
    as_json = json.loads(await (await client.get("/console/api/calls?format=json")).text())
    assert [c["arguments"].get("name") for c in as_json] == [None, "web", "api"][::-1]
    assert "payroll" not in json.dumps(as_json)

    for bad in ("since=yesterday", "outcome=maybe", "limit=-1", "format=xml", "before=x",
                "until=1d&since=2d&connector=" + "x" * 300):  # fmt: skip
        refused = await client.get("/console/api/calls?" + bad)
        assert refused.status == 400, bad
        assert (await refused.json())["error"]


async def test_every_console_route_keeps_the_access_rules(
    make_settings, manifests_dir, aiohttp_client
) -> None:
    settings = make_settings(
        chatops_manifests_dir=manifests_dir,
        chatops_console_public=True,
        chatops_console_token="t0ken-for-the-console",
    )
    client = await aiohttp_client(create_app(settings))
    for path in API_ROUTES:  # data: the token or nothing
        refused = await client.get(path)
        assert refused.status == 401, path
        answered = await client.get(path, headers={"Authorization": "Bearer t0ken-for-the-console"})
        assert answered.status in (200, 404), path
    for path in PAGE_ROUTES:  # the page and its files hold no data
        assert (await client.get(path)).status == 200, path

    local = await aiohttp_client(create_app(make_settings(chatops_manifests_dir=manifests_dir)))
    for path in API_ROUTES + PAGE_ROUTES:  # a local console refuses what came through a proxy
        proxied = await local.get(path, headers={"X-Forwarded-For": "203.0.113.9"})
        assert proxied.status == 403, path
        rebound = await local.get(path, headers={"Host": "evil.example"})
        assert rebound.status == 403, path


@pytest.mark.both_databases
async def test_the_call_log_names_each_calls_workspace_and_filters_by_it(
    client: TestClient,
) -> None:
    """One deployment, two Slack workspaces: each call says which; `workspace` (with
    `platform`) shows one alone, in the view and its downloads."""
    for team, name in (("T0AAA", "in-a"), ("T0BBB", "in-b")):
        add_call(client, platform="slack", workspace=team, channel="C0OPS", requester="U0DEV",
                 connector="ops", action="restart", mutating=True, arguments={"name": name},
                 result_status="ok")  # fmt: skip
    everything = await (await client.get("/console/api/calls")).json()
    assert sorted(c["workspace"] for c in everything["calls"]) == ["T0AAA", "T0BBB"]
    only_a = await (await client.get("/console/api/calls?platform=slack&workspace=T0AAA")).json()
    assert [c["arguments"] for c in only_a["calls"]] == [{"name": "in-a"}]
    assert "workspace slack:T0AAA only" in only_a["query"]
    text = await (await client.get("/console/api/calls?workspace=T0BBB&format=csv")).text()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["workspace"], r["arguments"]) for r in rows] == [("T0BBB", '{"name": "in-b"}')]
    too_long = await client.get("/console/api/calls?workspace=" + "x" * 300)
    assert too_long.status == 400
