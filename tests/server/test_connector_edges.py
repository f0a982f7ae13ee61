"""Connectors inside the real app (`create_app`, the console, the app's one client session, the
call log, `chatops audit`): an echoed query credential never reaches the thread, the call log
or the audit report, and no cookie travels from one connector's call to another's."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
import yaml
from aiohttp.test_utils import TestClient
from sqlmodel import Session, create_engine, select
from yarl import URL

from bot.cli import main
from bot.server import create_app
from bot.storage.models import CallLog
from tests.fakes.http_api import FakeHttpApi
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.serving import started
from tests.server.conftest import ConsoleClient, llm_settings

QUERY_SECRET = "k/ey+va=lue/Z9 x"


@pytest.fixture
async def fake_api() -> AsyncIterator[FakeHttpApi]:
    async with started(FakeHttpApi()) as api:
        yield api


def write(directory: Path, manifest: dict[str, Any]) -> None:
    directory.mkdir(exist_ok=True)
    (directory / f"{manifest['name']}.yaml").write_text(yaml.safe_dump(manifest))


def calls_then_answer(*calls: tuple[str, dict[str, Any]]) -> Any:
    """The model: make `calls` one per turn, then answer; the synthesis streams 'done'."""

    def respond(body: dict[str, Any]) -> Turn:
        if body.get("stream"):
            return answer("done")
        made = sum(1 for m in body["messages"] if m["role"] == "tool")
        if made < len(calls):
            return tool_call(*calls[made], id=f"call_{made}")
        return answer("done")

    return respond


@pytest.fixture
async def console_on(
    database_url, aiohttp_client, make_settings, tmp_path: Path, fake_openai: FakeOpenAI
) -> Any:
    """Starts the app with the given environment; `database_url` first, so the app is shut
    down before its schema is dropped."""

    async def start(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> ConsoleClient:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        settings = make_settings(database_url=database_url,
                                 chatops_manifests_dir=tmp_path / "manifests",
                                 **llm_settings(fake_openai))  # fmt: skip
        client: TestClient = await aiohttp_client(create_app(settings))
        console = ConsoleClient(client)
        await console.start()
        opened.append(console)
        return console

    opened: list[ConsoleClient] = []
    yield start
    for console in opened:
        await console.close()


async def test_an_echoed_query_credential_reaches_no_thread_call_log_or_audit(
    console_on, fake_api: FakeHttpApi, fake_openai: FakeOpenAI, tmp_path: Path,
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    fake_api.route("GET", "/v1/lookup", status=404, text="No route for ", echo_path=True)
    write(tmp_path / "manifests", {
        "name": "legacy", "base_url": fake_api.url + "/v1", "retries": 0,
        "auth": {"type": "query", "param": "key", "value_env": "LEGACY_KEY"},
        "actions": [{"name": "lookup", "description": "look up", "path": "/lookup"}],
    })  # fmt: skip
    fake_openai.respond_with(calls_then_answer(("legacy__lookup", {})))
    console = await console_on(monkeypatch, {"LEGACY_KEY": QUERY_SECRET})
    sent = await (await console.send("look it up")).json()
    await console.wait_item(lambda i: i["kind"] == "answer" and i["thread"] == sent["thread"])
    on_the_wire = fake_api.calls("/v1/lookup")[0].raw_path.split("key=")[1]
    assert unquote(on_the_wire) == QUERY_SECRET  # sent whole, percent-encoded (RFC 3986)
    forms = {QUERY_SECRET, on_the_wire, URL.build(query={"k": QUERY_SECRET}).raw_query_string[2:]}

    seen_by_model = json.dumps(fake_openai.requests)
    shown = json.dumps(console.items) + json.dumps(console.frames)
    with Session(create_engine(database_url)) as session:
        row = session.exec(select(CallLog)).one()
    assert row.result_status == "error" and "key=[REDACTED]" in (row.error or "")
    monkeypatch.setenv("DATABASE_URL", database_url)
    capsys.readouterr()
    assert main(["audit", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["errors"] and "key=[REDACTED]" in report["errors"][0]["error"]
    everywhere = [seen_by_model, shown, row.observation, row.error or "",
                  json.dumps(report), caplog.text]  # fmt: skip
    for text in everywhere:
        for form in forms:
            assert form not in text


async def test_a_cookie_set_for_one_connector_is_never_sent_by_another(
    console_on, fake_api: FakeHttpApi, fake_openai: FakeOpenAI, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The admin API answers with a session cookie; the app's one client session must not keep
    it for the reporting connector on the same host, nor for the admin connector's next call.
    (By host name: aiohttp's default jar ignores cookies from IP addresses.)"""
    host = fake_api.url.replace("127.0.0.1", "localhost")
    fake_api.route("GET", "/admin/login", json_body={"ok": True},
                   headers={"Set-Cookie": "session=admin-session-cookie; Path=/"})  # fmt: skip
    write(tmp_path / "manifests", {
        "name": "admin", "base_url": host + "/admin",
        "auth": {"type": "bearer", "token_env": "ADMIN_TOKEN"},
        "actions": [{"name": "login", "description": "log in", "path": "/login"}],
    })  # fmt: skip
    write(tmp_path / "manifests", {
        "name": "reports", "base_url": host + "/reports",
        "actions": [{"name": "list", "description": "list reports", "path": "/list"}],
    })  # fmt: skip
    fake_openai.respond_with(calls_then_answer(("admin__login", {}), ("reports__list", {}),
                                               ("admin__login", {})))  # fmt: skip
    console = await console_on(monkeypatch, {"ADMIN_TOKEN": "adm1n-t0ken"})
    sent = await (await console.send("list the reports")).json()
    await console.wait_item(lambda i: i["kind"] == "answer" and i["thread"] == sent["thread"])
    paths = [r.path for r in fake_api.requests]
    assert paths == ["/admin/login", "/reports/list", "/admin/login"]
    assert [r.headers.get("Cookie") for r in fake_api.requests] == [None, None, None]
