"""`chatops chat` end to end: the real CLI, the fake OpenAI server and the fake HTTP API."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest

from bot.cli import main
from tests.connectors.conftest import write_manifest
from tests.fakes.http_api import FakeHttpApi
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call

SECRET = "ops-t0ken-n3ver-shown"
SERVICE = {"type": "object", "properties": {"service": {"type": "string"}}, "required": ["service"]}


def ops_manifest(base_url: str) -> dict:
    restart_params = {
        "type": "object",
        "properties": {"service": {"type": "string"}, "reason": {"type": "string"}},
        "required": ["service"],
    }
    return {
        "name": "ops",
        "base_url": base_url,
        "auth": {"type": "bearer", "token_env": "OPS_TOKEN"},
        "actions": [
            {"name": "status", "description": "Status of a service", "method": "GET",
             "path": "/services/{service}", "parameters": SERVICE},
            {"name": "restart", "description": "Restart a service", "method": "POST",
             "path": "/services/{service}/restart", "parameters": restart_params, "risk": "high"},
        ],
    }  # fmt: skip


@pytest.fixture
def chat_env(tmp_path: Path, fake_api: FakeHttpApi, fake_openai: FakeOpenAI, monkeypatch) -> Path:
    """A manifests dir on the fake API, and the LLM settings pointing at the fake OpenAI."""
    directory = tmp_path / "manifests"
    write_manifest(directory, ops_manifest(fake_api.url))
    fake_api.route("GET", "/services/checkout", json_body={"service": "checkout",
                                                           "status": "stuck"})  # fmt: skip
    fake_api.route("POST", "/services/checkout/restart", json_body={"restarted": True})
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-secret")
    monkeypatch.setenv("CHATOPS_MODEL", "fake-model")
    monkeypatch.setenv("OPS_TOKEN", SECRET)
    return directory


def script_restart(fake_openai: FakeOpenAI, final: str) -> None:
    restart = tool_call("ops__restart", {"service": "checkout", "reason": "stuck"})
    fake_openai.script(
        tool_call("ops__status", {"service": "checkout"}),
        dataclasses.replace(restart, content="Checkout is stuck; a restart should clear it."),
        answer("loop answer"),
        answer(final),  # the streamed synthesis
    )


async def run_cli(*argv: str) -> int:
    """`chatops ...` in a worker thread, so the fakes keep serving on this loop."""
    return await asyncio.to_thread(main, list(argv))


async def test_chat_with_approve_all_runs_the_mutating_call(
    chat_env: Path, fake_api: FakeHttpApi, fake_openai: FakeOpenAI, capsys
) -> None:
    script_restart(fake_openai, "Checkout was stuck, so I restarted it.")
    code = await run_cli("chat", "--manifests", str(chat_env), "--approve", "all",
                         "restart", "checkout", "if", "it", "is", "stuck")  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out == "Checkout was stuck, so I restarted it.\n"
    fake_openai.assert_complete()
    assert fake_openai.requests[0]["messages"][-1]["content"] == ("restart checkout if it is stuck")
    assert len(fake_api.calls("/services/checkout/restart", "POST")) == 1
    assert fake_api.requests[0].headers["Authorization"] == f"Bearer {SECRET}"
    assert '-> ops__status {"service": "checkout"}' in err
    assert "<- ops__status (ok)" in err
    assert "approved ops__restart (--approve all)" in err
    assert "<- ops__restart (ok)" in err
    assert SECRET not in out + err


async def test_chat_with_approve_none_rejects_and_tells_the_model(
    chat_env: Path, fake_api: FakeHttpApi, fake_openai: FakeOpenAI, capsys
) -> None:
    script_restart(fake_openai, "I did not restart checkout: the restart was rejected.")
    code = await run_cli("chat", "--manifests", str(chat_env), "--approve", "none",
                         "restart checkout")  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out == "I did not restart checkout: the restart was rejected.\n"
    assert fake_api.calls("/services/checkout/restart") == []  # never sent
    assert len(fake_api.calls("/services/checkout", "GET")) == 1  # read-only: no approval
    told = [m["content"] for m in fake_openai.messages(2) if m["role"] == "tool"]
    assert "`ops__restart` was REJECTED by the user" in told[-1] and "NOT run" in told[-1]
    assert "Do not retry the same call" in told[-1]
    assert "rejected ops__restart (--approve none)" in err
    assert "<- ops__restart (blocked)" in err


async def test_chat_without_an_llm_names_the_variables(tmp_path: Path, capsys) -> None:
    code = await run_cli("chat", "--manifests", str(tmp_path), "hello")
    _, err = capsys.readouterr()
    assert code == 2
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CHATOPS_MODEL"):
        assert name in err
    assert "Traceback" not in err


async def test_chat_with_bad_manifests_fails_readably(
    chat_env: Path, fake_openai: FakeOpenAI, monkeypatch, capsys
) -> None:
    (chat_env / "broken.yaml").write_text(
        "name: broken\nbase_url: https://a.example.com\nactions:\n"
        "  - {name: x, description: d, path: /x, method: GET, retry: 3}\n"
    )
    monkeypatch.delenv("OPS_TOKEN")
    code = await run_cli("chat", "--manifests", str(chat_env), "hello")
    _, err = capsys.readouterr()
    assert code == 2
    assert "broken.yaml: action 'x' (actions[0]): field 'retry': unknown field" in err
    assert "Traceback" not in err
    assert fake_openai.requests == []  # nothing reached the model


async def test_chat_with_a_missing_secret_names_the_variable(
    chat_env: Path, fake_openai: FakeOpenAI, monkeypatch, capsys
) -> None:
    monkeypatch.delenv("OPS_TOKEN")
    fake_openai.script(answer("I have no ops tools."), answer("I cannot reach the ops API."))
    code = await run_cli("chat", "--manifests", str(chat_env), "hello")
    out, err = capsys.readouterr()
    assert code == 0
    assert "ops.yaml: environment variable OPS_TOKEN is not set (connector 'ops' left out)" in err
    assert "tools" not in fake_openai.requests[0]  # the connector's tools were not offered
    assert out == "I cannot reach the ops API.\n"


async def chat_subprocess(directory: Path, stdin: bytes, *argv: str) -> tuple[int, str, str]:
    """`python -m bot.cli chat --approve ask ...` with our stdin, as a user would run it."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "chat", "--manifests", str(directory), *argv,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=dict(os.environ),
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_chat_asks_at_the_prompt_and_runs_after_yes(
    chat_env: Path, fake_api: FakeHttpApi, fake_openai: FakeOpenAI
) -> None:
    script_restart(fake_openai, "Restarted checkout.")
    code, out, err = await chat_subprocess(chat_env, b"y\n", "--approve", "ask", "fix checkout")
    assert code == 0, err
    assert out.strip() == "Restarted checkout."
    card = err[err.index("=== approval needed ===") :]
    assert "tool:      ops__restart" in card
    assert "connector: ops/restart" in card
    assert "risk:      high" in card
    assert "reason:    Checkout is stuck; a restart should clear it." in card
    assert '"service": "checkout"' in card and '"reason": "stuck"' in card
    assert "Approve this call? [y/N]" in card
    assert err.count("=== approval needed ===") == 1  # the read-only status call did not ask
    assert len(fake_api.calls("/services/checkout/restart", "POST")) == 1
    assert SECRET not in out + err


async def test_chat_rejection_at_the_prompt_sends_the_reason_to_the_model(
    chat_env: Path, fake_api: FakeHttpApi, fake_openai: FakeOpenAI
) -> None:
    script_restart(fake_openai, "I left checkout alone.")
    code, out, err = await chat_subprocess(
        chat_env, b"n\nwrong service, restart payments\n", "--approve", "ask", "fix checkout"
    )
    assert code == 0, err
    assert out.strip() == "I left checkout alone."
    assert fake_api.calls("/services/checkout/restart") == []
    told = [m["content"] for m in fake_openai.messages(2) if m["role"] == "tool"]
    assert "Reason: wrong service, restart payments." in told[-1]
    assert "Do not retry" in told[-1]


async def test_chat_exits_non_zero_when_the_model_fails(
    chat_env: Path, fake_openai: FakeOpenAI, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("CHATOPS_LLM_MAX_RETRIES", "0")
    fake_openai.fail_next(status=500)
    code = await run_cli("chat", "--manifests", str(chat_env), "hello")
    out, err = capsys.readouterr()
    assert code == 1
    assert "the model endpoint 127.0.0.1 answered with an error (500)" in out


async def test_chat_names_the_host_of_a_refused_key_never_the_key(
    chat_env: Path, fake_openai: FakeOpenAI, monkeypatch, capsys
) -> None:
    """The endpoint answers 401 and echoes the key: the terminal names the host and the variable
    to check, exits non-zero, and prints the key nowhere (answer, step lines, log)."""
    from tests.fakes.openai_server import error

    monkeypatch.setenv("CHATOPS_LLM_MAX_RETRIES", "0")
    fake_openai.script(error(401, message="Incorrect API key provided: sk-test-not-a-secret"))
    code = await run_cli("chat", "--manifests", str(chat_env), "hello")
    out, err = capsys.readouterr()
    assert code == 1
    assert "127.0.0.1 refused the key (401): check OPENAI_API_KEY" in out
    assert "sk-test-not-a-secret" not in out + err
    assert "Traceback" not in err


async def test_chat_compacts_with_the_compact_model_and_keeps_the_facts(
    chat_env: Path, fake_api: FakeHttpApi, fake_openai: FakeOpenAI, capsys, monkeypatch
) -> None:
    """CHATOPS_COMPACT_MODEL and REACT_CONTEXT_BUDGET_TOKENS reach the engine: a long run is
    compacted by the named model, and the fact its summary kept reaches the loop's model."""
    from tests.engine.helpers import is_compaction

    fact = "lock held by job 9912 since 03:14"
    fake_api.route("GET", "/services/checkout", json_body={"status": "stuck", "why": fact,
                                                           "log": "x " * 900})  # fmt: skip
    fake_api.route("GET", "/services/cart", json_body={"status": "ok", "log": "y " * 900})
    monkeypatch.setenv("CHATOPS_COMPACT_MODEL", "cheap-model")
    monkeypatch.setenv("REACT_CONTEXT_BUDGET_TOKENS", "1500")
    monkeypatch.setenv("REACT_COMPLETION_CHECK_MIN_TOOLS", "10")

    def summarise(body: dict) -> Turn:
        return answer("checkout: " + fact if fact in body["messages"][1]["content"] else "-")

    fake_openai.answer_when(is_compaction, summarise)
    fake_openai.script(
        tool_call("ops__status", {"service": "checkout"}),
        *(tool_call("ops__status", {"service": "cart"}) for _ in range(2)),
        answer("loop answer"),
        answer("Checkout is stuck on a lock held by job 9912."),
    )
    code = await run_cli("chat", "--manifests", str(chat_env), "--approve", "none",
                         "why", "is", "checkout", "stuck")  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "context compacted" in err
    compactions = [body for body in fake_openai.requests if is_compaction(body)]
    assert compactions and {body["model"] for body in compactions} == {"cheap-model"}
    loop = [b for b in fake_openai.requests if not is_compaction(b) and not b.get("stream")]
    assert {body["model"] for body in loop} == {"fake-model"}
    last = loop[-1]["messages"]
    assert not any(fact in str(m["content"]) for m in last if m["role"] == "tool")
    assert any(m["role"] == "user" and fact in m["content"] for m in last)


async def test_chat_prints_the_fallback_when_the_answer_stream_breaks(
    chat_env: Path, fake_openai: FakeOpenAI, capsys
) -> None:
    from tests.fakes.openai_server import broken_stream

    fake_openai.script(
        tool_call("ops__status", {"service": "checkout"}),
        answer("checkout is stuck (loop answer)"),
        broken_stream("A polished answer that breaks off", after=2),
    )
    code = await run_cli("chat", "--manifests", str(chat_env), "status of checkout")
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out == "checkout is stuck (loop answer)\n"  # replaced, never appended to
    assert "answer broke off" in err and "A polished" not in out + err


async def test_chat_queues_its_audit_events_for_the_sink_serve_ships(
    chat_env: Path, fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch, capsys
) -> None:
    """`chatops chat` has no sender of its own: its events wait in the outbox of the shared
    database, and the sender `chatops serve` runs ships them (here: that sender, directly)."""
    from bot.audit.sinks.sender import SenderPacing, SinkSender
    from bot.audit.sinks.targets import FileSink
    from bot.storage import outbox
    from bot.storage.database import Database, create_db_engine

    url = f"sqlite:///{tmp_path / 'shared.db'}"
    audit_file = tmp_path / "audit.jsonl"
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("CHATOPS_AUDIT_SINK_FILE", str(audit_file))
    script_restart(fake_openai, "Restarted checkout.")
    code = await run_cli("chat", "--manifests", str(chat_env), "--approve", "all", "restart")
    assert code == 0, capsys.readouterr().err
    engine = create_db_engine(url)
    db = Database(engine)
    try:
        sink = FileSink(audit_file)
        sender = SinkSender(db, [sink], holder="serve", pacing=SenderPacing(batch=100))
        assert await sender.send_once(sink) == 6
        await sender.close()
        assert await db.run(outbox.pending_events) == 0
    finally:
        db.close()
        engine.dispose()
    events = [json.loads(line) for line in audit_file.read_text().splitlines()]
    assert [e["unmapped"]["outcome"] for e in events] == [
        "in progress", "ok", "pending", "approved", "in progress", "ok",
    ]  # fmt: skip
    assert {e["src_endpoint"]["svc_name"] for e in events} == {"terminal"}
    assert SECRET not in audit_file.read_text()
