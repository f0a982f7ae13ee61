"""MCP results beyond text in the real app (`create_app`, the console, the fake model, the call
log), against the SDK server `tests/fakes/mcp_rich_server.py` over stdio: an image reaches a
model that reads images as an image part, and never the call log; a model that does not is
told it was not shown; a long call's progress shows in the status message while it runs."""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlmodel import Session, create_engine, select

from bot.engine.execution import IMAGES_NOT_SHOWN
from bot.server import create_app
from bot.storage.models import CallLog
from tests.fakes.mcp_rich_server import PNG
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.server.conftest import ConsoleClient, llm_settings

RICH_SERVER = Path(__file__).parents[1] / "fakes" / "mcp_rich_server.py"
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


def rich_manifest(directory: Path) -> None:
    manifest = {
        "name": "rich", "type": "mcp", "command": [sys.executable, str(RICH_SERVER)],
        "timeout_s": 30, "tools": [{"match": "*", "approval": "never"}],
    }  # fmt: skip
    (directory / "rich.yaml").write_text(yaml.safe_dump(manifest))


def call_then_answer(name: str, args: dict[str, Any]) -> Callable[[dict[str, Any]], Turn]:
    def respond(body: dict[str, Any]) -> Turn:
        if body.get("stream"):
            return answer("Here it is.")
        if any(m["role"] == "tool" for m in body["messages"]):
            return answer("done")
        return tool_call(name, args, id="call_rich")

    return respond


def image_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        part
        for message in body["messages"]
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


async def run_console(client: Any, text: str, within: float = 60) -> ConsoleClient:
    console = ConsoleClient(client)
    await console.start()
    assert (await console.send(text)).status == 202
    await console.wait_item(lambda item: item["kind"] == "answer", within)
    return console


@pytest.mark.both_databases  # the call log row is the proof the bytes stay out
async def test_an_image_reaches_a_vision_model_as_an_image_part_and_not_the_call_log(
    aiohttp_client, make_settings, database_url: str, manifests_dir: Path, fake_openai: FakeOpenAI
) -> None:
    rich_manifest(manifests_dir)
    settings = make_settings(
        database_url=database_url,
        chatops_manifests_dir=manifests_dir,
        chatops_llm_abilities="tool_call,json_mode,vision",
        **llm_settings(fake_openai),
    )
    client = await aiohttp_client(create_app(settings))
    fake_openai.respond_with(call_then_answer("rich__chart", {"service": "api"}))
    await (await run_console(client, "show the api chart")).close()

    after = next(body for body in fake_openai.requests if image_parts(body))
    messages = after["messages"]
    tool_at = next(i for i, m in enumerate(messages) if m["role"] == "tool")
    assert messages[tool_at]["content"] == "CPU of api, last hour\n[image 1 (image/png, 70 bytes)]"
    follow = messages[tool_at + 1]  # right after the tool results: the API insists
    assert follow["role"] == "user"
    assert follow["content"] == [
        {"type": "text", "text": "Image 1 returned by rich__chart:"},
        {"type": "image_url", "image_url": {"url": PNG_URL}},
    ]
    with Session(create_engine(database_url)) as session:
        row = session.exec(select(CallLog)).one()
    assert row.tool_name == "rich__chart" and row.result_status == "ok"
    assert "[image 1 (image/png, 70 bytes)]" in (row.observation or "")
    stored = " ".join(str(value) for value in row.model_dump().values())
    assert base64.b64encode(PNG).decode()[:24] not in stored


async def test_a_model_without_vision_gets_the_words_and_is_told_it_was_not_shown(
    aiohttp_client, make_settings, manifests_dir: Path, fake_openai: FakeOpenAI
) -> None:
    rich_manifest(manifests_dir)
    settings = make_settings(chatops_manifests_dir=manifests_dir, **llm_settings(fake_openai))
    client = await aiohttp_client(create_app(settings))
    fake_openai.respond_with(call_then_answer("rich__chart", {"service": "api"}))
    await (await run_console(client, "show the api chart")).close()

    assert not any(image_parts(body) for body in fake_openai.requests)
    tool_message = next(
        m for body in fake_openai.requests for m in body["messages"] if m["role"] == "tool"
    )
    assert tool_message["content"] == (
        f"CPU of api, last hour\n[image 1 (image/png, 70 bytes)]\n{IMAGES_NOT_SHOWN}"
    )


async def test_progress_shows_in_the_status_while_the_call_runs(
    aiohttp_client, make_settings, manifests_dir: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    rich_manifest(manifests_dir)
    settings = make_settings(chatops_manifests_dir=manifests_dir, **llm_settings(fake_openai))
    client = await aiohttp_client(create_app(settings))
    hold = tmp_path / "hold"
    fake_openai.respond_with(call_then_answer("rich__migrate", {"hold": str(hold)}))
    console = ConsoleClient(client)
    await console.start()
    try:
        assert (await console.send("migrate the rows")).status == 202

        def migrating(item: dict[str, Any]) -> bool:
            steps = item["data"].get("steps") or [] if item["kind"] == "status" else []
            return any(step["detail"] == "2 of 3 (67%): checking rows" for step in steps)

        status = await console.wait_item(migrating, 30)
        [step] = status["data"]["steps"]
        assert (step["label"], step["state"]) == ("rich__migrate", "running")
        progress = [
            f for f in console.frames if f[1].get("type") == "iteration"
            and f[1].get("status") == "progress"
        ]  # fmt: skip
        assert progress[0][1]["message"] == "copying rows"  # the escape sequence cleaned away
        assert (progress[0][1]["progress"], progress[0][1]["total"]) == (1, 3)

        hold.touch()
        done = await console.wait_item(
            lambda i: i["kind"] == "status" and i["data"]["state"] == "done", 30
        )
        [step] = done["data"]["steps"]
        assert (step["state"], step["detail"]) == ("done", "")  # progress ends with the call
    finally:
        await console.close()
