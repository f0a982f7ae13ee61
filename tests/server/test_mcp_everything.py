"""The npm reference server `@modelcontextprotocol/server-everything` in the real app
(`create_app`, the console, the fake model) over stdio: its tiny image reaches a model that reads
images as an image part, a model that does not gets the words only, and its long-running
operation's progress shows in the status message while it runs. Skipped, saying why, without
node or the package `make test` installs (tests/mcp_reference)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bot.engine.execution import IMAGES_NOT_SHOWN
from bot.server import create_app
from tests.connectors.test_mcp_everything import TINY_IMAGE_PREFIX, node_command
from tests.fakes.openai_server import FakeOpenAI
from tests.server.conftest import ConsoleClient, llm_settings
from tests.server.test_mcp_rich import call_then_answer, image_parts, run_console

TINY_TEXT = (
    "Here's the image you requested:\n[image 1 (image/png, 3.9 KB)]\n"
    "The image above is the MCP logo."
)


def everything_manifest(directory: Path) -> None:
    manifest = {
        "name": "everything", "type": "mcp", "command": [*node_command(), "stdio"],
        "timeout_s": 30, "tools": [{"match": "*", "approval": "never"}],
    }  # fmt: skip
    (directory / "everything.yaml").write_text(yaml.safe_dump(manifest))


async def test_its_image_reaches_a_vision_model_as_an_image_part(
    aiohttp_client, make_settings, manifests_dir: Path, fake_openai: FakeOpenAI
) -> None:
    everything_manifest(manifests_dir)
    settings = make_settings(
        chatops_manifests_dir=manifests_dir,
        chatops_llm_abilities="tool_call,json_mode,vision",
        **llm_settings(fake_openai),
    )
    client = await aiohttp_client(create_app(settings))
    fake_openai.respond_with(call_then_answer("everything__get-tiny-image", {}))
    await (await run_console(client, "show me the logo")).close()

    after = next(body for body in fake_openai.requests if image_parts(body))
    messages = after["messages"]
    tool_at = next(i for i, m in enumerate(messages) if m["role"] == "tool")
    assert messages[tool_at]["content"] == TINY_TEXT
    follow = messages[tool_at + 1]
    assert follow["role"] == "user"
    text, image = follow["content"]
    assert text == {"type": "text", "text": "Image 1 returned by everything__get-tiny-image:"}
    assert image["type"] == "image_url"
    assert image["image_url"]["url"].startswith("data:image/png;base64," + TINY_IMAGE_PREFIX)


async def test_a_model_without_vision_gets_the_words_only(
    aiohttp_client, make_settings, manifests_dir: Path, fake_openai: FakeOpenAI
) -> None:
    everything_manifest(manifests_dir)
    settings = make_settings(chatops_manifests_dir=manifests_dir, **llm_settings(fake_openai))
    client = await aiohttp_client(create_app(settings))
    fake_openai.respond_with(call_then_answer("everything__get-tiny-image", {}))
    await (await run_console(client, "show me the logo")).close()

    assert not any(image_parts(body) for body in fake_openai.requests)
    tool_message = next(
        m for body in fake_openai.requests for m in body["messages"] if m["role"] == "tool"
    )
    assert tool_message["content"] == f"{TINY_TEXT}\n{IMAGES_NOT_SHOWN}"
    assert TINY_IMAGE_PREFIX not in str(fake_openai.requests)


async def test_its_progress_shows_in_the_status_while_the_call_runs(
    aiohttp_client, make_settings, manifests_dir: Path, fake_openai: FakeOpenAI
) -> None:
    everything_manifest(manifests_dir)
    settings = make_settings(chatops_manifests_dir=manifests_dir, **llm_settings(fake_openai))
    client = await aiohttp_client(create_app(settings))
    args = {"duration": 6, "steps": 3}  # a step each 2 s: the status is seen mid-call
    fake_openai.respond_with(call_then_answer("everything__trigger-long-running-operation", args))
    console = ConsoleClient(client)
    await console.start()
    try:
        assert (await console.send("run the long operation")).status == 202

        def running(item: dict[str, Any]) -> bool:
            steps = item["data"].get("steps") or [] if item["kind"] == "status" else []
            return any(step["detail"].startswith("1 of 3 (33%)") for step in steps)

        status = await console.wait_item(running, 30)
        [step] = status["data"]["steps"]
        assert (step["label"], step["state"]) == ("everything__trigger-long-running-operation",
                                                  "running")  # fmt: skip
        done = await console.wait_item(
            lambda i: i["kind"] == "status" and i["data"]["state"] == "done", 30
        )
        [step] = done["data"]["steps"]
        assert (step["state"], step["detail"]) == ("done", "")
    finally:
        await console.close()
