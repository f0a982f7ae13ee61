"""Issue 26, items 3 and 4: no secret leaks through another connector, and a failed model call
fails the run without showing the key.

The real app on Slack (signed events), on SQLite and PostgreSQL. The ops API's answer carries
another connector's token, the Slack bot token and the model key; none of them may reach the
model's prompt, the call log, any message, update or stream chunk at Slack, or the log.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from bot.config import Settings
from bot.redaction import install_log_redaction
from bot.server import RUNTIME_KEY, create_app
from bot.storage.models import CallLog, Run
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, error, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack
from tests.security.conftest import OPS_TOKEN
from tests.server.conftest import ConsoleClient, llm_settings
from tests.slack.e2e import SlackBot, bot_settings, texts
from tests.slack.payloads import CHANNEL, SIGNING_SECRET, mention

MODEL_KEY = "sk-test-not-a-secret"  # what `bot_settings` sets as OPENAI_API_KEY
BILLING_TOKEN = "billing-token-5a4b3c2d1e0f"  # connector B's credential
BILLING = """\
name: billing
description: Billing API
base_url: {url}
auth: {{type: bearer, token_env: BILLING_TOKEN}}
actions:
  - name: invoices
    description: List invoices
    method: GET
    path: /services/{{name}}
    parameters: {{type: object, properties: {{name: {{type: string}}}}, required: [name]}}
"""
SECRETS = (BILLING_TOKEN, BOT_TOKEN, MODEL_KEY, SIGNING_SECRET, OPS_TOKEN)


def leaked(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


@pytest.fixture
def two_connectors(manifests: Path, ops_api: OpsAPI, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BILLING_TOKEN", BILLING_TOKEN)
    (manifests / "billing.yaml").write_text(BILLING.format(url=ops_api.url))
    return manifests


def slack_traffic(fake: FakeSlack) -> str:
    """Every argument the bot sent to Slack (messages, updates, stream chunks), not headers."""
    return json.dumps([call.args for call in fake.calls()])


async def test_a_tool_result_carrying_other_secrets_shows_none_of_them(
    two_connectors: Path, database_url: str, fake_slack: FakeSlack, fake_openai: FakeOpenAI,
    ops_api: OpsAPI, aiohttp_client: Any, db_rows: Any, caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    """The ops API answers with billing's token, the Slack bot token and the model key; the
    model's answer also spells the bot token out across two stream chunks."""
    ops_api.extra = {"debug": f"billing={BILLING_TOKEN} slack {BOT_TOKEN} model={MODEL_KEY}"}
    settings = bot_settings(
        database_url=database_url, manifests=two_connectors, slack=fake_slack,
        llm_url=fake_openai.base_url,
    )  # fmt: skip
    bot = SlackBot(await aiohttp_client(create_app(settings)), fake_slack)
    uninstall = install_log_redaction(bot.app[RUNTIME_KEY].redactor)  # as `chatops serve` does
    request.addfinalizer(uninstall)  # pytest's handlers outlive this test
    fake_openai.script(
        tool_call("ops__get_service", {"name": "api"}),
        answer("api is degraded"),
        Turn(content=f"api is degraded; its token is {BOT_TOKEN} and {MODEL_KEY}.", chunk_chars=7),
    )
    event = mention("how is api?", user="U0DEV")
    await bot.send(event)
    await bot.wait_idle()
    logging.getLogger("test").warning("the answer had %s in it", BOT_TOKEN)

    assert [run.status for run in db_rows(Run)] == ["done"]
    assert "degraded" in json.dumps(fake_openai.requests)  # the result did reach the model
    assert leaked(json.dumps(fake_openai.requests)) == []
    [row] = db_rows(CallLog)
    assert leaked(json.dumps([row.arguments, row.observation, row.error])) == []
    assert leaked(slack_traffic(fake_slack)) == []
    assert any("[REDACTED]" in text for text in texts(fake_slack, event["event"]["ts"]))
    assert leaked(caplog.text) == []
    assert leaked(json.dumps([run.answer for run in db_rows(Run)])) == []
    calls = await bot.client.get("/console/api/calls")  # the console's call log
    assert calls.status == 200 and "get_service" in (listed := await calls.text())
    assert leaked(listed) == []
    capsys.readouterr()
    monkeypatch.setenv("DATABASE_URL", database_url)
    assert await asyncio.to_thread(main, ["audit", "--since", "1d", "--format", "csv"]) == 0
    report = capsys.readouterr().out
    assert "get_service" in report and leaked(report) == []


async def test_the_console_shows_none_of_the_secrets_a_result_carries(
    two_connectors: Path, database_url: str, fake_openai: FakeOpenAI, ops_api: OpsAPI,
    aiohttp_client: Any,
) -> None:  # fmt: skip
    """Through the console: its run events (steps, streamed answer) and items (status, answer)
    carry none of the secrets the ops API's answer and the model's answer hold."""
    ops_api.extra = {"debug": f"billing={BILLING_TOKEN} model={MODEL_KEY}"}
    settings = Settings(
        _env_file=None, database_url=database_url, chatops_manifests_dir=two_connectors,
        **llm_settings(fake_openai),
    )  # fmt: skip
    console = ConsoleClient(await aiohttp_client(create_app(settings)))
    await console.start()
    try:
        fake_openai.script(
            tool_call("ops__get_service", {"name": "api"}),
            answer("api is degraded"),
            Turn(content=f"degraded; billing uses {BILLING_TOKEN} now.", chunk_chars=5),
        )
        await console.send("how is api?")
        done = await console.wait_item(
            lambda i: i["kind"] == "status" and i["data"]["state"] == "done", 15
        )
        assert done is not None
        answer_item = await console.wait_item(lambda i: i["kind"] == "answer", 15)
        assert "[REDACTED]" in answer_item["data"]["markdown"]
        assert leaked(json.dumps(console.frames)) == [] and leaked(json.dumps(console.items)) == []
        streamed = "".join(data.get("content") or "" for _, data in console.frames)
        assert BILLING_TOKEN not in streamed
        state = await console.client.get("/console/api/state")
        assert leaked(await state.text()) == []
    finally:
        await console.close()


async def test_a_key_refused_while_the_answer_is_written_fails_the_run(
    settings: Any, fake_slack: FakeSlack, fake_openai: FakeOpenAI, aiohttp_client: Any,
    db_rows: Any,
) -> None:  # fmt: skip
    """The loop's call went through, then the synthesis is refused (401, the key echoed): the
    run is failed, not answered with the loop's text, and the key is nowhere."""
    bot = SlackBot(await aiohttp_client(create_app(settings)), fake_slack)
    fake_openai.script(
        answer("api looks fine"), error(401, message=f"Incorrect API key provided: {MODEL_KEY}")
    )
    event = mention("how is api?", user="U0DEV")
    await bot.send(event)
    await bot.wait_idle()

    [run] = db_rows(Run)
    assert run.status == "failed"
    shown = " ".join(texts(fake_slack, event["event"]["ts"]))
    assert "refused the key (401): check OPENAI_API_KEY" in shown
    assert MODEL_KEY not in slack_traffic(fake_slack)


async def test_a_refused_key_fails_the_run_and_names_the_host_never_the_key(
    settings: Any, fake_slack: FakeSlack, fake_openai: FakeOpenAI, aiohttp_client: Any,
    db_rows: Any, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """The model endpoint answers 401 and echoes the key in its error: the run is failed, the
    status says so, the thread names the host and OPENAI_API_KEY, and nobody sees the key."""
    bot = SlackBot(await aiohttp_client(create_app(settings)), fake_slack)
    fake_openai.script(error(401, message=f"Incorrect API key provided: {MODEL_KEY}"))
    event = mention("how is api?", user="U0DEV")
    await bot.send(event)
    await bot.wait_idle()

    [run] = db_rows(Run)
    assert run.status == "failed" and MODEL_KEY not in (run.error or "")
    assert run.answer in (None, "")
    shown = texts(fake_slack, event["event"]["ts"])
    assert any("failed" in text.lower() for text in shown), shown
    assert not any(text.startswith("Done") for text in shown)
    notice = " ".join(shown)
    assert "127.0.0.1" in notice and "OPENAI_API_KEY" in notice and "401" in notice
    assert MODEL_KEY not in slack_traffic(fake_slack)
    assert MODEL_KEY not in caplog.text
    assert db_rows(CallLog) == []


async def test_an_unreachable_model_fails_the_run_and_names_the_url(
    database_url: str, manifests: Path, fake_slack: FakeSlack, aiohttp_client: Any, db_rows: Any
) -> None:
    """Nothing listens where OPENAI_BASE_URL points: the run fails and the thread says which
    URL could not be reached."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    settings = bot_settings(
        database_url=database_url, manifests=manifests, slack=fake_slack, llm_url=url
    )
    bot = SlackBot(await aiohttp_client(create_app(settings)), fake_slack)
    event = mention("how is api?", user="U0DEV")
    await bot.send(event)
    await bot.wait_idle()

    [run] = db_rows(Run)
    assert run.status == "failed"
    notice = " ".join(texts(fake_slack, event["event"]["ts"]))
    assert url in notice and "could not be reached" in notice


def live_answer(fake: FakeSlack, root: str) -> str:
    """The text of the answer message still being streamed ("" before it starts)."""
    for message in fake.thread_messages(CHANNEL, root):
        if message.get("streaming"):
            return str(message.get("text") or "")
    return ""


async def test_a_secret_split_across_two_stream_chunks_never_shows(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    """The model writes the bot token in its answer, cut in two by the stream (8 characters a
    chunk), and stops after the first half: the thread shows the text before it, never the
    half; once the stream goes on the token is masked in place."""
    text = f"api is fine; token {BOT_TOKEN} ok"
    fake_openai.script(
        tool_call("ops__get_service", {"name": "api"}),
        answer("api is fine"),
        Turn(content=text, hold_after=4),  # "api is fine; token xoxb-fake-bot", then held
    )
    event = mention("how is api?", user="U0DEV")
    root = event["event"]["ts"]
    await bot.send(event)
    shown = await fake_slack.wait_for(lambda: "token" in live_answer(fake_slack, root)
                                      and live_answer(fake_slack, root), 15)  # fmt: skip
    assert "xoxb" not in shown and "fine; token" in shown
    fake_openai.release_stream()
    await bot.wait_idle()
    sent = "".join(c.args.get("markdown_text") or "" for c in fake_slack.calls())
    assert BOT_TOKEN not in sent and BOT_TOKEN not in slack_traffic(fake_slack)
    assert any("token [REDACTED] ok" in t.replace("\\", "") for t in texts(fake_slack, root))


async def test_the_console_shows_a_refused_key_as_a_failed_run(
    manifests: Path, database_url: str, fake_openai: FakeOpenAI, aiohttp_client: Any, db_rows: Any
) -> None:
    """Through the console: the endpoint refuses the key and echoes it; the run's status ends
    failed, the console names the host and OPENAI_API_KEY, and never shows the key."""
    settings = Settings(
        _env_file=None, database_url=database_url, chatops_manifests_dir=manifests,
        **llm_settings(fake_openai),
    )  # fmt: skip
    console = ConsoleClient(await aiohttp_client(create_app(settings)))
    await console.start()
    try:
        fake_openai.script(error(401, message=f"Incorrect API key provided: {MODEL_KEY}"))
        await console.send("how is api?")
        await console.wait_item(
            lambda i: i["kind"] == "status" and i["data"]["state"] == "failed", 15
        )
        await console.wait_item(lambda i: "refused the key" in json.dumps(i), 15)
        shown = json.dumps(console.items) + json.dumps(console.frames)
        assert "127.0.0.1 refused the key (401): check OPENAI_API_KEY" in shown
        assert MODEL_KEY not in shown
        assert not any(i["kind"] == "answer" for i in console.items.values())
        assert [run.status for run in db_rows(Run)] == ["failed"]
    finally:
        await console.close()
