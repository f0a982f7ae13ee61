"""`kill -9` at the worst moments, with real `chatops serve` processes on SQLite and PostgreSQL:
Slack is FakeSlack, the model FakeOpenAI, the target system the fake ops API. Each scenario runs
on one backend (a process is slow to start): two on PostgreSQL, where a restarted process adopts
what the killed one left by its lease, two on SQLite, where the one process takes it back."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import create_engine, update
from sqlmodel import Session

from bot.cli import main
from bot.runs.recovery import RECOVERY_CONCURRENCY, REPOSTED_NOTE
from bot.storage.models import Approval, CallLog, InboxEvent, Message, Run
from bot.surfaces.slack.cards import APPROVE_ACTION
from tests.databases import rows
from tests.fakes.openai_server import FakeOpenAI, Turn, answer
from tests.fakes.ops_api import OpsAPI, restart_then_answer
from tests.fakes.slack_api import FakeSlack
from tests.server.serve_process import SlackSender, serve_env, serving
from tests.slack.e2e import manifest, texts, wait_card
from tests.slack.payloads import mention

RESTARTED = "The bot restarted while it was working on this"


ON_POSTGRESQL = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


@pytest.fixture
def env(tmp_path: Path, database_url: str, ops_api, fake_slack, fake_openai) -> dict[str, str]:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "ops.yaml").write_text(manifest(ops_api.url))
    return serve_env(
        database_url=database_url,
        manifests=manifests,
        slack_url=fake_slack.url,
        llm_url=fake_openai.base_url,
        # one person asks for every run here: lift the per-person caps (they are not the point)
        CHATOPS_MAX_ACTIVE_RUNS_PER_USER="100",
        CHATOPS_MAX_PENDING_APPROVALS_PER_USER="100",
    )


@ON_POSTGRESQL
async def test_a_call_that_reached_the_system_before_a_kill_is_in_the_call_log(
    tmp_path: Path,
    env: dict[str, str],
    database_url: str,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The restart reached the ops service, then the bot was killed before the answer came
    back: the write-ahead row is there, the audit says "outcome unknown", and the next
    process adopts the run without running the restart again: the model is told its outcome
    is unknown, and the thread gets the answer (never the restart notice)."""
    fake_openai.respond_with(restart_then_answer)
    event = mention("restart api", user="U0DEV")
    root = event["event"]["ts"]
    async with aiohttp.ClientSession() as http:
        slack = SlackSender(http)
        async with serving(tmp_path, env) as first:
            assert await slack.send(first, event) == 200
            card = await wait_card(fake_slack, root, pending=True)
            ops_api.hold()
            assert await slack.click(first, card, APPROVE_ACTION, user="U0LEAD") == 200
            await ops_api.wait_for(lambda: ops_api.restarts == ["api"])
            await first.kill()
        ops_api.release()

        [row] = rows(database_url, CallLog)
        assert (row.tool_name, row.result_status, row.approvers) == (
            "ops__restart",
            "started",
            ["U0LEAD"],
        )
        monkeypatch.setenv("DATABASE_URL", database_url)
        out = tmp_path / "audit.json"
        assert main(["audit", "--format", "json", "--out", str(out)]) == 0
        report = json.loads(out.read_text())
        assert report["totals"]["unknown"] == 1
        assert [c["result_status"] for c in report["mutating_calls"]] == ["started"]
        assert main(["audit"]) == 0
        assert "outcome unknown" in capsys.readouterr().out

        async with serving(tmp_path, env) as second:  # adopts the run and goes on
            await fake_slack.wait_for(lambda: any("is back" in t for t in texts(fake_slack, root)))
            await second.stop()
    assert ops_api.restarts == ["api"]  # never run again
    assert not any(RESTARTED in t for t in texts(fake_slack, root))
    told = [m.get("content") or "" for r in fake_openai.requests for m in r["messages"]]
    assert any("was started before the bot restarted" in t for t in told)  # outcome unknown
    [row] = rows(database_url, CallLog)
    assert row.result_status == "started"  # the log still says what is known: it went out


def quiet(body: dict[str, Any]) -> Turn:
    return answer("All quiet." if body.get("stream") else "nothing to do")


async def test_killed_while_posting_the_answer_the_thread_never_gets_the_restart_notice(
    tmp_path: Path,
    env: dict[str, str],
    database_url: str,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:
    """Slack has the answer but the bot was killed before it heard back: one outcome, the
    answer (posted again, saying why), never "the bot restarted, ask again" beside it."""
    fake_openai.respond_with(quiet)
    # the answer streams, then its message is edited into the answer: that edit is held
    fake_slack.hold("chat.update", when=lambda args: "All quiet" in args.get("text", ""))
    event = mention("anything on fire?", user="U0DEV")
    root = event["event"]["ts"]
    async with aiohttp.ClientSession() as http:
        async with serving(tmp_path, env) as first:
            assert await SlackSender(http).send(first, event) == 200
            await fake_slack.wait_for(lambda: fake_slack.held("chat.update"))
            await first.kill()
        fake_slack.release()
        async with serving(tmp_path, env) as second:
            await second.wait_log("recovery done")
            await second.stop()
    said = texts(fake_slack, root)
    answers = [t for t in said if "All quiet" in t]
    assert len(answers) == 2 and REPOSTED_NOTE.strip("_") in answers[1]
    assert not any(RESTARTED in t for t in said)
    assert [r.status for r in rows(database_url, Run)] == ["done"]


@ON_POSTGRESQL  # its Feishu twin (test_crash_feishu.py) runs on SQLite
async def test_acknowledged_mentions_and_clicks_survive_a_kill_right_after_the_ack(
    tmp_path: Path,
    env: dict[str, str],
    database_url: str,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
) -> None:
    """Five approvals are clicked and twenty new mentions arrive at once; the bot is killed the
    moment the last 200 is back. Every one of them was stored before its 200: each click's
    decision is recorded, each mention's message is stored and its thread answered (a card, or
    the restart notice if its run had begun), and no restart ran twice or went unlogged."""
    fake_openai.respond_with(restart_then_answer)
    clicked = [mention(f"restart api ({i})", user="U0DEV") for i in range(5)]
    later = [mention(f"restart api later ({i})", user="U0DEV") for i in range(20)]
    async with aiohttp.ClientSession() as http:
        slack = SlackSender(http)
        async with serving(tmp_path, env) as first:
            for event in clicked:
                assert await slack.send(first, event) == 200
            cards = [await wait_card(fake_slack, e["event"]["ts"], pending=True) for e in clicked]
            statuses = await asyncio.gather(
                *(slack.click(first, card, APPROVE_ACTION, user="U0LEAD") for card in cards),
                *(slack.send(first, event) for event in later),
            )
            await first.kill()
        assert statuses == [200] * 25
        async with serving(tmp_path, env) as second:
            await second.wait_log("recovery done", 60)
            for event in clicked:  # approved: the restart ran and was answered, or was cut short
                await said(fake_slack, event, lambda t: "Restarted" in t or RESTARTED in t)
            for event in later:  # a card, or (if its run had begun) the restart notice
                await said(fake_slack, event, lambda t: "Approval needed" in t or RESTARTED in t)
            for _ in range(300):  # bounded: the threads can be told before the inbox drains
                if not rows(database_url, InboxEvent):
                    break
                await asyncio.sleep(0.1)
            await second.stop()
    assert [a.status for a in rows(database_url, Approval) if a.decided_by] == ["approved"] * 5
    stored = {m.text for m in rows(database_url, Message) if m.role == "user"}
    assert {f"restart api later ({i})" for i in range(20)} <= stored
    assert rows(database_url, InboxEvent) == []  # every acknowledged event was processed
    each_restart_at_most_once_and_logged(database_url, ops_api, runs=5)


def each_restart_at_most_once_and_logged(database_url: str, ops_api: OpsAPI, runs: int) -> None:
    """The call log is write-ahead: every restart the ops API received has its row, a row may
    stand for a call the kill cut off before it went out, and no run called restart twice. A
    kill right after the approvals may leave none running (their runs end with the notice)."""
    logged = [c for c in rows(database_url, CallLog) if c.tool_name == "ops__restart"]
    assert len(ops_api.restarts) <= len(logged) <= runs
    assert len({c.run_id for c in logged}) == len(logged)


async def said(fake: FakeSlack, event: dict[str, Any], predicate: Callable[[str], bool]) -> None:
    """Wait until the thread was told: a bound for a lost message, not a latency target (a
    restarted process recovers 25 threads at once, on a loaded CI machine slowly)."""
    root = event["event"]["ts"]
    await fake.wait_for(lambda: any(predicate(t) for t in texts(fake, root)), 90)


async def test_start_up_listens_first_and_recovers_in_the_background(
    tmp_path: Path,
    env: dict[str, str],
    database_url: str,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:
    """Twelve runs were mid-step, each stopped by its requester (the stop recorded), when the
    bot was killed. The next process must answer /healthz (saying it is recovering) while
    Slack is too slow to take the twelve status edits and notices, work on a bounded number of
    threads at a time, and tell every thread once Slack answers again."""
    fake_openai.hold()  # every run waits for the model
    events = [mention(f"what broke? ({i})", user="U0DEV") for i in range(12)]
    async with aiohttp.ClientSession() as http:
        async with serving(tmp_path, env) as first:
            slack = SlackSender(http)
            assert await asyncio.gather(*(slack.send(first, e) for e in events)) == [200] * 12
            await fake_openai.wait_for_requests(12, 60)
            await first.kill()
        stop_every_run(database_url, by="U0DEV")  # acknowledged stops: they end the runs
        fake_slack.hold("chat.update")
        fake_slack.hold("chat.postMessage")
        async with serving(tmp_path, env) as second:
            async with http.get(f"{second.url}/healthz") as health:
                assert health.status == 200
                body = await health.json()
                assert (body["ok"], body["recovering"]) == (True, True)
            # a bounded number of threads at a time: that many edits wait on Slack, no more
            await fake_slack.wait_for(lambda: held(fake_slack) == RECOVERY_CONCURRENCY, 30)
            with contextlib.suppress(TimeoutError):  # a ninth would come at once; none does
                await fake_slack.wait_for(lambda: held(fake_slack) > RECOVERY_CONCURRENCY, 2)
            assert held(fake_slack) == RECOVERY_CONCURRENCY
            fake_slack.release()
            await second.wait_log("recovery done", 60)
            async with http.get(f"{second.url}/healthz") as health:
                body = await health.json()
                assert body["ok"] is True and "recovering" not in body
            await second.stop()
    fake_openai.release()
    for event in events:
        assert any("stopped this run" in t for t in texts(fake_slack, event["event"]["ts"]))
    assert {r.status for r in rows(database_url, Run)} == {"cancelled"}


def stop_every_run(database_url: str, *, by: str) -> None:
    engine = create_engine(database_url)
    try:
        with Session(engine) as session:
            session.execute(update(Run).values(stopped_by=by))
            session.commit()
    finally:
        engine.dispose()


def held(fake: FakeSlack) -> int:
    """Slack calls the bot is waiting on (made while Slack holds its answers)."""
    return len(fake.held("chat.update")) + len(fake.held("chat.postMessage"))
