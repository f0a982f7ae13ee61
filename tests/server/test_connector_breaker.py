"""A connector's circuit breaker inside the real app (`create_app`, the console, the call log,
`GET /readyz`, `chatops manifests list --connect`): an API that keeps answering 503 is not
called any more after the threshold, the model is told why and until when, and after the
cool-down one trial call that succeeds closes the breaker again."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlmodel import Session, create_engine, select

from bot.cli import main
from bot.clock import ManualClock
from bot.server import create_app
from bot.storage.models import CallLog
from tests.fakes.http_api import FakeHttpApi
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.serving import started
from tests.server.conftest import ConsoleClient, llm_settings

FAILING = re.compile(
    r"connector status is failing: 2 errors in a row; calls resume after (\d\d:\d\d:\d\d) UTC"
)


@pytest.fixture
async def fake_api() -> AsyncIterator[FakeHttpApi]:
    async with started(FakeHttpApi()) as api:
        yield api


def calls_then_answer(times: int) -> Any:
    """The model: call `status__check` `times` times (one per turn), then answer."""
    planned = [*(["call"] * times), "answer"]

    def respond(body: dict[str, Any]) -> Turn:
        if body.get("stream") or not planned:
            return answer("done")
        if planned.pop(0) == "call":
            return tool_call("status__check", {}, id=f"call_{len(planned)}")
        return answer("done")

    return respond


async def readyz(client: Any) -> dict[str, Any]:
    response = await client.get("/readyz")
    return await response.json()


@pytest.mark.both_databases  # the call log keeps the refused call
async def test_a_failing_api_trips_the_breaker_then_a_trial_call_closes_it(
    database_url: str, aiohttp_client, make_settings, tmp_path: Path,
    fake_api: FakeHttpApi, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "status.yaml").write_text(yaml.safe_dump({
        "name": "status", "base_url": fake_api.url + "/v1", "retries": 0,
        "actions": [{"name": "check", "description": "check the status", "path": "/status"}],
    }))  # fmt: skip
    fake_api.fail_next("GET", "/v1/status", status=503, count=2)
    clock = ManualClock()
    settings = make_settings(database_url=database_url, chatops_manifests_dir=manifests,
                             chatops_breaker_threshold=2, chatops_breaker_cooldown_s=90,
                             **llm_settings(fake_openai))  # fmt: skip
    client = await aiohttp_client(create_app(settings, clock=clock))
    console = ConsoleClient(client)
    await console.start()
    try:
        assert (await readyz(client))["connectors_failing"] == []
        fake_openai.respond_with(calls_then_answer(3))
        sent = await (await console.send("check the status 3 times")).json()
        await console.wait_item(lambda i: i["kind"] == "answer" and i["thread"] == sent["thread"])
        assert len(fake_api.calls("/v1/status")) == 2  # the third call was never sent
        observations = [m["content"] for m in fake_openai.requests[-2]["messages"]
                        if m["role"] == "tool"]  # fmt: skip
        assert "HTTP 503" in observations[0] and "HTTP 503" in observations[1]
        shown = FAILING.search(observations[2])
        assert shown is not None, observations[2]
        assert shown.group(1) == f"{clock.now() + timedelta(seconds=90):%H:%M:%S}"

        ready = await readyz(client)
        assert ready["ready"] is True  # a failing connector leaves the bot ready
        [failing] = ready["connectors_failing"]
        assert failing["connector"] == "status" and failing["state"] == "open"
        assert failing["errors"] == 2

        bot_url = str(client.make_url("")).rstrip("/")
        capsys.readouterr()
        code = await asyncio.to_thread(
            main, ["manifests", "list", str(manifests), "--connect", "--bot", bot_url]
        )
        assert code == 0
        listed = capsys.readouterr().out
        assert f"status\tfailing: 2 errors in a row; calls resume after {shown.group(1)} UTC" in (
            listed
        )

        with Session(create_engine(database_url)) as session:
            rows = session.exec(select(CallLog).order_by(CallLog.id)).all()  # type: ignore[arg-type]
        assert [row.result_status for row in rows] == ["error", "error", "error"]
        assert "connector status is failing" in (rows[2].error or "")

        # the cool-down passes; the API is back (it echoes): one trial call closes the breaker
        clock.advance(91)
        fake_openai.respond_with(calls_then_answer(1))
        again = await (await console.send("check again")).json()
        await console.wait_item(lambda i: i["kind"] == "answer" and i["thread"] == again["thread"])
        assert len(fake_api.calls("/v1/status")) == 3
        assert (await readyz(client))["connectors_failing"] == []
        capsys.readouterr()
        await asyncio.to_thread(
            main, ["manifests", "list", str(manifests), "--connect", "--bot", bot_url]
        )
        assert "every connector closed" in capsys.readouterr().out
    finally:
        await console.close()


def test_list_connect_without_a_bot_says_the_breakers_are_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "status.yaml").write_text(yaml.safe_dump({
        "name": "status", "base_url": "http://127.0.0.1:9/v1",
        "actions": [{"name": "check", "description": "check", "path": "/status"}],
    }))  # fmt: skip
    code = main(["manifests", "list", str(manifests), "--connect", "--bot", "http://127.0.0.1:9"])
    assert code == 0
    captured = capsys.readouterr()
    assert "status__check" in captured.out
    assert "no bot answered at http://127.0.0.1:9/readyz" in captured.err
    assert "circuit breakers unknown" in captured.err
