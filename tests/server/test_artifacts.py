"""Artifacts end to end (DESIGN §2, seed "rich content"): a tool's HTML or Markdown document
stays out of the model's context and is attached to the answer: a file in the Slack thread
(files.getUploadURLExternal, the upload, files.completeUploadExternal), a file message in the
Feishu thread (im/v1/files, then a `file` message), a link on the console served by the app.
Real app, real connector, fake model / Slack / Feishu / HTTP API."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.server import create_app
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.http_api import FakeHttpApi
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.serving import started
from tests.fakes.slack_api import FakeSlack
from tests.feishu.e2e import DEV, FeishuBot
from tests.feishu.e2e import bot_settings as feishu_settings
from tests.server.conftest import ConsoleClient, llm_settings
from tests.slack.e2e import SlackBot
from tests.slack.e2e import bot_settings as slack_settings
from tests.slack.payloads import CHANNEL, mention

MARK = "lb-7 certificate expired at 03:14"  # deep in the documents: past any summary
INTRO = "Twelve incidents were opened this week and eleven were resolved. " * 8
REPORT = (
    "<!doctype html><html><head><title>Incidents, week 48</title></head><body>"
    f"<h1>Incidents</h1><p>{INTRO}</p><p>INC-4711: {MARK}.</p><script>alert(1)</script>"
    "</body></html>"
)
NOTES = f"# Runbook notes\n\n{INTRO}\n\n- restart the balancer when {MARK}\n"
ANSWER = "Here is the weekly incident report."


@pytest.fixture
async def reports_api() -> AsyncIterator[FakeHttpApi]:
    async with started(FakeHttpApi()) as api:
        api.route("GET", "/report", text=REPORT, headers={
            "Content-Type": "text/html; charset=utf-8",
            "Content-Disposition": 'attachment; filename="weekly-report.html"',
        })  # fmt: skip
        api.route("GET", "/notes", text=NOTES, headers={"Content-Type": "text/plain"})
        yield api


@pytest.fixture
def manifests(tmp_path: Path, reports_api: FakeHttpApi) -> Path:
    directory = tmp_path / "manifests"
    directory.mkdir()
    manifest = {
        "name": "reports",
        "base_url": reports_api.url,
        "auth": {"type": "none"},
        "actions": [
            {"name": "weekly", "description": "The weekly incident report", "path": "/report"},
            {"name": "notes", "description": "Runbook notes", "path": "/notes",
             "result": {"artifact": True}},
        ],
    }  # fmt: skip
    (directory / "reports.yaml").write_text(yaml.safe_dump(manifest))
    return directory


def report_then_answer(*tools: str):
    def respond(body: dict[str, Any]) -> Turn:
        if body.get("stream"):
            return answer(ANSWER)
        done = sum(m["role"] == "tool" for m in body["messages"])
        if done < len(tools):
            return tool_call(tools[done], {})
        return answer("the report is attached")

    return respond


def assert_model_never_saw_the_documents(fake_openai: FakeOpenAI) -> None:
    seen = json.dumps(fake_openai.requests)
    assert MARK not in seen and "<script>" not in seen
    observations = [
        m["content"] for body in fake_openai.requests for m in body["messages"]
        if m["role"] == "tool"
    ]  # fmt: skip
    assert any(o.startswith("[Artifact generated: weekly-report.html]") for o in observations)
    assert any("Incidents, week 48" in o for o in observations)  # the short summary


async def test_slack_answer_carries_the_documents_as_files(
    database_url, aiohttp_client, manifests: Path, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    settings = slack_settings(database_url=database_url, manifests=manifests, slack=fake_slack,
                              llm_url=fake_openai.base_url)  # fmt: skip
    bot = SlackBot(await aiohttp_client(create_app(settings)), fake_slack)
    fake_openai.respond_with(report_then_answer("reports__weekly", "reports__notes"))
    event = mention("send me the weekly report and the notes", user="U0DEV")
    root = event["event"]["ts"]
    assert await bot.send(event) == 200
    await bot.wait_idle()
    assert_model_never_saw_the_documents(fake_openai)
    assert [(f["name"], f["content"]) for f in fake_slack.files] == [
        ("weekly-report.html", REPORT),
        ("reports__notes.md", NOTES),
    ]
    assert {(f["channel"], f["thread_ts"]) for f in fake_slack.files} == {(CHANNEL, root)}
    assert len(fake_slack.calls("files.getUploadURLExternal")) == 2
    assert len(fake_slack.calls("files.completeUploadExternal")) == 2
    texts = [m["text"] for m in fake_slack.thread_messages(CHANNEL, root)]
    assert ANSWER in texts and not any(MARK in t for t in texts)


async def test_feishu_answer_carries_the_document_as_a_file_message(
    database_url, aiohttp_client, manifests: Path, fake_feishu: FakeFeishu,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    settings = feishu_settings(database_url=database_url, manifests=manifests, fake=fake_feishu,
                               llm_url=fake_openai.base_url)  # fmt: skip
    bot = FeishuBot(await aiohttp_client(create_app(settings)), fake_feishu)
    fake_openai.respond_with(report_then_answer("reports__weekly"))
    event = fake_feishu.message_event("send me the weekly report", user=DEV)
    root = event["event"]["message"]["message_id"]
    await bot.send(event)
    await bot.wait_idle()
    assert_model_never_saw_the_documents(fake_openai)
    [uploaded] = fake_feishu.files.values()
    assert uploaded == {"file_type": "stream", "file_name": "weekly-report.html",
                        "data": REPORT.encode()}  # fmt: skip
    kinds = [m.msg_type for m in fake_feishu.replies_to(root)]
    assert kinds[-1] == "file" and "interactive" in kinds[:-1]  # the answer card, then the file
    file_message = fake_feishu.replies_to(root)[-1]
    assert json.loads(file_message.contents[-1]) == {"file_key": next(iter(fake_feishu.files))}


async def test_console_answer_links_the_document_served_sandboxed(
    make_settings, database_url, aiohttp_client, manifests: Path, fake_openai: FakeOpenAI
) -> None:
    settings = make_settings(database_url=database_url, chatops_manifests_dir=manifests,
                             **llm_settings(fake_openai))  # fmt: skip
    client = await aiohttp_client(create_app(settings))
    console = ConsoleClient(client)
    await console.start()
    try:
        fake_openai.respond_with(report_then_answer("reports__weekly"))
        await console.send("send me the weekly report")
        item = await console.wait_item(lambda i: i["kind"] == "answer")
    finally:
        await console.close()
    assert item["data"]["markdown"] == ANSWER
    [link] = item["data"]["files"]
    assert (link["name"], link["content_type"]) == ("weekly-report.html", "text/html")
    response = await client.get(link["url"])
    assert response.status == 200 and await response.text() == REPORT
    assert response.headers["Content-Type"] == "text/html; charset=utf-8"
    assert response.headers["Content-Security-Policy"].startswith("sandbox;")
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert (await client.get("/console/api/files/" + "0" * 32)).status == 404
    assert_model_never_saw_the_documents(fake_openai)
