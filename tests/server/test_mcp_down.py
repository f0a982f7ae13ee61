"""An MCP server that is down at start-up: the bot starts without its tools, says so
(`/readyz`, the console, the log), retries it, and adds its tools when it comes up.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import aiohttp
import yaml

from bot.runtime import build_runtime
from bot.server import RUNTIME_KEY, create_app
from tests.connectors.conftest import MCP_SERVER_SCRIPT
from tests.fakes.openai_server import FakeOpenAI, answer, tool_call
from tests.server.conftest import ConsoleClient, llm_settings
from tests.server.serve_process import serving

# Starts the fake MCP server once the flag file exists; before that exits 4, saying why.
WAIT_FOR_FLAG = (
    "import os, sys\n"
    "flag, script = sys.argv[1:3]\n"
    "if not os.path.exists(flag):\n"
    "    sys.stderr.write('no flag file yet\\n')\n"
    "    sys.exit(4)\n"
    "os.execv(sys.executable, [sys.executable, script])\n"
)


def late_manifest(directory: Path, flag: Path) -> None:
    command = [sys.executable, "-c", WAIT_FOR_FLAG, str(flag), str(MCP_SERVER_SCRIPT)]
    # trusted to mark its reads: `echo` then runs without an approval card
    manifest = {"name": "late", "type": "mcp", "description": "the late server",
                "command": command, "timeout_s": 30, "trust_annotations": True}  # fmt: skip
    (directory / "late.yaml").write_text(yaml.safe_dump(manifest))


def echo_then_answer(body: dict) -> dict:
    if body.get("stream"):
        return answer("It echoed.")
    if any(m["role"] == "tool" for m in body["messages"]):
        return answer("done")
    return tool_call("late__echo", {"text": "hi"}, id="call_echo")


async def test_a_server_down_at_start_is_reported_retried_and_its_tools_added(
    aiohttp_client, make_settings, manifests_dir: Path, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    flag = tmp_path / "flag"
    late_manifest(manifests_dir, flag)
    settings = make_settings(
        chatops_manifests_dir=manifests_dir,
        chatops_mcp_retry_max_s=0.2,
        **llm_settings(fake_openai),
    )
    client = await aiohttp_client(create_app(settings))
    runtime = client.app[RUNTIME_KEY]
    assert "ops__restart" in runtime.tools and "late__echo" not in runtime.tools

    ready = await client.get("/readyz")
    assert ready.status == 200
    body = await ready.json()
    assert body["ready"] is True
    [down] = body["connectors_down"]
    assert (down["connector"], down["reason"], down["retrying"]) == (
        "late", "exited with status 4", True,
    )  # fmt: skip
    state = await (await client.get("/console/api/state")).json()
    assert state["connectors_down"][0]["reason"] == (
        "exited with status 4; the last lines of its stderr: no flag file yet"
    )

    flag.touch()
    assert runtime.connectors is not None
    await runtime.connectors.wait_until(lambda: not runtime.connectors_down, 60)
    assert "late__echo" in runtime.tools
    assert (await (await client.get("/readyz")).json())["connectors_down"] == []
    echo = runtime.tools.get("late__echo")
    assert echo is not None and "(late: the late server)" in echo.description

    fake_openai.respond_with(echo_then_answer)
    console = ConsoleClient(client)
    await console.start()
    try:
        assert (await console.send("echo hi")).status == 202
        await console.wait_item(lambda item: item["kind"] == "answer", 30)
    finally:
        await console.close()
    tool_message = next(
        m for body in fake_openai.requests for m in body["messages"] if m["role"] == "tool"
    )
    assert "echo: hi" in tool_message["content"]


async def test_shutdown_cancels_the_retries(make_settings, manifests_dir: Path, tmp_path: Path):
    late_manifest(manifests_dir, tmp_path / "never")
    settings = make_settings(chatops_manifests_dir=manifests_dir, chatops_mcp_retry_max_s=0.2)
    async with aiohttp.ClientSession() as http:
        runtime = await build_runtime(settings, http)
        assert runtime.connectors is not None
        tasks = runtime.connectors.recovery.tasks
        assert len(tasks) == 1 and not tasks[0].done()
        await runtime.connectors.wait_until(lambda: runtime.connectors_down[0].attempts >= 2, 60)
        await runtime.close()
    assert all(task.done() for task in tasks)


async def test_serve_starts_with_a_server_down_and_says_which(
    tmp_path: Path, manifests_dir: Path
) -> None:
    """A real `chatops serve`: one MCP manifest points at a server that is not there."""
    (manifests_dir / "gone.yaml").write_text(
        yaml.safe_dump({"name": "gone", "type": "mcp", "command": [str(tmp_path / "missing")]})
    )
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}",
        "CHATOPS_MANIFESTS_DIR": str(manifests_dir),
        "CHATOPS_MCP_RETRY_MAX_S": "0.5",
    }
    async with serving(tmp_path, env) as bot:
        warning = await bot.wait_log("MCP server unreachable")
        assert "gone.yaml: MCP server unreachable: 'gone' cannot be started" in warning
        assert "(connector 'gone' left out)" in warning
        await bot.wait_log("MCP server 'gone': retrying in the background")
        async with aiohttp.ClientSession() as http, http.get(bot.url + "/readyz") as ready:
            assert ready.status == 200
            body = await ready.json()
        assert [d["connector"] for d in body["connectors_down"]] == ["gone"]
        assert await bot.stop() == 0
    log = "".join(bot.log)
    assert "bad connector manifest" not in log and "Traceback" not in log
    assert "Task was destroyed" not in log and "ops__restart" in log
    assert json.dumps(body)  # the readiness body is plain JSON
