"""Two real `chatops serve` processes on one PostgreSQL database behind one fake Slack: events
alternate between them, clicks, replies and stops land on the process that does not own the
run, and the owner is killed (`kill -9`) during a model call, during a tool call and while an
approval is pending. Every run is finished by one of them, each tool runs at most once, and
each thread shows one status message, its card and one answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.storage.models import Approval, CallLog, Message, Run, RunMail
from bot.surfaces.slack.cards import APPROVE_ACTION
from bot.surfaces.slack.render import STOP_ACTION
from tests.databases import rows
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import ANSWER, OpsAPI, restart_then_answer
from tests.fakes.slack_api import FakeSlack
from tests.server.serve_process import ServeProcess, SlackSender, serve_env, serving
from tests.server.test_crash import RESTARTED
from tests.slack.e2e import card_in, manifest, texts, wait_card
from tests.slack.payloads import CHANNEL, mention, message

pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)

ANSWERED = "is back"  # the answer (ANSWER), as the thread shows it
LEASE_S = "3"  # a beat a second: a lapsed lease is noticed within a few seconds


def env_for(
    tmp_path: Path, database_url: str, ops: OpsAPI, slack: FakeSlack, llm: FakeOpenAI, node: str,
    **extra: str,
) -> dict[str, str]:  # fmt: skip
    """A serve process's environment on the fakes; `extra`: more settings (by field name)."""
    manifests = tmp_path / "manifests"
    manifests.mkdir(exist_ok=True)
    (manifests / "ops.yaml").write_text(manifest(ops.url))
    return serve_env(
        database_url=database_url, manifests=manifests, slack_url=slack.url,
        llm_url=llm.base_url, chatops_lease_s=LEASE_S, chatops_node_name=node, **extra,
    )  # fmt: skip


@asynccontextmanager
async def two_processes(
    tmp_path: Path, database_url: str, ops: OpsAPI, slack: FakeSlack, llm: FakeOpenAI,
    *, same_host: bool = True, **extra: str,
) -> AsyncIterator[tuple[ServeProcess, ServeProcess]]:  # fmt: skip
    """Two serve processes on one database; `same_host=False` names their hosts apart, so a
    killed one is noticed by its lapsed lease only (not by its pid being gone). `extra`: more
    settings of both (by field name)."""
    nodes = ("", "") if same_host else ("node-a", "node-b")
    env_a = env_for(tmp_path, database_url, ops, slack, llm, nodes[0], **extra)
    env_b = env_for(tmp_path, database_url, ops, slack, llm, nodes[1], **extra)
    async with serving(tmp_path, env_a) as a, serving(tmp_path, env_b) as b:
        await a.wait_log("recovery done")
        await b.wait_log("recovery done")
        try:
            yield a, b
        except BaseException:  # what each process said, for whoever reads the failure
            for name, process in (("A", a), ("B", b)):
                said = [line for line in process.log if "HTTP Request" not in line]
                print(f"--- process {name} (pid {process.pid}) ---\n" + "".join(said[-80:]))
            raise
        for process in (a, b):
            if process._proc is not None and process._proc.returncode is None:
                await process.stop()


@asynccontextmanager
async def thread_on_two(
    tmp_path: Path, database_url: str, ops: OpsAPI, slack: FakeSlack, llm: FakeOpenAI,
    model: Callable[[dict[str, Any]], Turn], *, same_host: bool = True,
) -> AsyncIterator[tuple[ServeProcess, ServeProcess, SlackSender, dict[str, Any]]]:  # fmt: skip
    """Two processes, a sender of signed Slack requests, and the mention that starts the
    thread (not sent yet): "restart api", with `model` as the model."""
    llm.respond_with(model)
    event = mention("restart api", user="U0DEV")
    async with (
        aiohttp.ClientSession() as http,
        two_processes(tmp_path, database_url, ops, slack, llm, same_host=same_host) as (a, b),
    ):
        yield a, b, SlackSender(http), event


def root_of(event: dict[str, Any]) -> str:
    return event["event"]["ts"]


async def answered(fake: FakeSlack, root: str, timeout: float = 45) -> None:  # noqa: ASYNC109
    await fake.wait_for(lambda: any(ANSWERED in t for t in texts(fake, root)), timeout)


async def runs_ended(database_url: str, count: int, *, timeout_s: float = 30.0) -> None:
    """The answer shows before its run's last write: wait (bounded) for every run to end."""
    for _ in range(int(timeout_s * 10)):
        ended = [r for r in rows(database_url, Run) if r.status in ("done", "cancelled", "failed")]
        if len(ended) >= count:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"runs did not end: {[r.status for r in rows(database_url, Run)]}")


async def card_recorded(database_url: str) -> None:
    """The bot has written down where its card is (it posts the card, then records it)."""
    for _ in range(100):
        if any(a.card_message_id for a in rows(database_url, Approval)):
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the card was never recorded")


async def reply_reached_run(database_url: str, text: str) -> None:
    """The reply is in the run's hands: stored as the thread's message by the run's process,
    or as mail the run's process has taken. Until then a run may rightly end without it (and
    the reply then starts the thread's next run): under load that is a matter of timing."""
    for _ in range(300):
        stored = any(text in m.text for m in rows(database_url, Message))
        mail = rows(database_url, RunMail)
        if stored and all(m.taken_by for m in mail):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the reply {text!r} never reached the run")


def coherent(fake: FakeSlack, root: str) -> None:
    """One status message (the first), the card, one answer; no restart notice."""
    said = texts(fake, root)
    assert len(said) == 3, said
    assert sum(ANSWERED in t for t in said) == 1, said
    assert card_in(fake, root, pending=False) is not None
    assert not any(RESTARTED in t for t in said)


async def answered_coherently(fake: FakeSlack, database_url: str, root: str) -> None:
    """The thread's one run ends with its answer, and the thread is coherent."""
    await answered(fake, root)
    await runs_ended(database_url, 1)
    coherent(fake, root)


def each_restart_once(database_url: str, ops: OpsAPI, runs: int) -> None:
    logged = [c for c in rows(database_url, CallLog) if c.tool_name == "ops__restart"]
    assert len(ops.restarts) == runs == len(logged)
    assert {c.result_status for c in logged} == {"ok"}
    assert len({c.run_id for c in logged}) == runs


async def test_events_alternate_and_clicks_on_the_other_process_resume_the_owner(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    """Six threads, mentions alternated between the two processes; each card is approved on
    the process that does not own the run (one of them on both at once): each owner resumes
    its run, each restart runs once, and every thread is coherent."""
    fake_openai.respond_with(restart_then_answer)
    events = [mention(f"restart api ({i})", user="U0DEV") for i in range(6)]
    async with (
        aiohttp.ClientSession() as http,
        two_processes(tmp_path, database_url, ops_api, fake_slack, fake_openai) as (a, b),
    ):
        slack = SlackSender(http)
        sides = [(a, b) if i % 2 == 0 else (b, a) for i in range(len(events))]
        for event, (owner, _) in zip(events, sides, strict=True):
            assert await slack.send(owner, event) == 200
        cards = [await wait_card(fake_slack, root_of(e), pending=True) for e in events]
        clicks = [
            slack.click(other, c, APPROVE_ACTION, user="U0LEAD")
            for c, (_, other) in zip(cards, sides, strict=True)
        ]  # noqa: E501
        clicks.append(slack.click(sides[0][0], cards[0], APPROVE_ACTION, user="U0LEAD"))
        assert await asyncio.gather(*clicks) == [200] * 7
        for event in events:
            await answered(fake_slack, root_of(event))
        await runs_ended(database_url, 6)
        for event in events:
            coherent(fake_slack, root_of(event))
    each_restart_once(database_url, ops_api, 6)
    runs = rows(database_url, Run)
    assert [r.status for r in runs] == ["done"] * 6
    assert len({r.owner for r in runs}) == 2  # both processes did work
    assert [a.status for a in rows(database_url, Approval)] == ["approved"] * 6


async def test_the_same_event_delivered_to_both_processes_starts_one_run(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    """Slack retries an event on the other process, and a mention and a reply of one new
    thread arrive at both at once: one run between them, the reply read by it."""
    fake_openai.respond_with(restart_then_answer)
    event = mention("restart api", user="U0DEV")
    root = root_of(event)
    reply = message("and be quick", user="U0DEV", thread_ts=root)
    async with (
        aiohttp.ClientSession() as http,
        two_processes(tmp_path, database_url, ops_api, fake_slack, fake_openai) as (a, b),
    ):
        slack = SlackSender(http)
        sent = await asyncio.gather(
            slack.send(a, event), slack.send(b, event), slack.send(b, reply), slack.send(a, reply)
        )
        assert sent == [200] * 4
        card = await wait_card(fake_slack, root, pending=True)
        await reply_reached_run(database_url, "and be quick")
        assert await slack.click(a, card, APPROVE_ACTION, user="U0LEAD") == 200
        await answered(fake_slack, root)
        await asyncio.sleep(1)  # a second run would have posted its status message by now
    coherent(fake_slack, root)
    assert len(rows(database_url, Run)) == 1
    each_restart_once(database_url, ops_api, 1)
    read = [m.get("content") or "" for r in fake_openai.requests for m in r["messages"]]
    assert any("and be quick" in t for t in read)


def reply_then_restart(body: dict[str, Any]) -> Turn:
    """Restart `api`; when the thread's reply ("also web") has been read, restart `web` too."""
    if body.get("stream"):
        return answer(ANSWER)
    said = " ".join(str(m.get("content") or "") for m in body["messages"])
    done = sum(1 for m in body["messages"] if m["role"] == "tool")
    if done == 0:
        return tool_call("ops__restart", {"name": "api"}, id="call_api")
    if "also web" in said and done == 1:
        return tool_call("ops__restart", {"name": "web"}, id="call_web")
    return answer("restarted")


async def test_a_reply_on_the_non_owner_reaches_the_run(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    """While the run waits for its approval on A, a reply in the thread reaches B: it is the
    run's interrupt (no second run), read before the next step."""
    async with thread_on_two(
        tmp_path, database_url, ops_api, fake_slack, fake_openai, reply_then_restart
    ) as (a, b, slack, event):
        root = root_of(event)
        assert await slack.send(a, event) == 200
        card = await wait_card(fake_slack, root, pending=True)
        reply = message("also web please", user="U0DEV", thread_ts=root)
        assert await slack.send(b, reply) == 200
        await reply_reached_run(database_url, "also web please")
        assert await slack.click(b, card, APPROVE_ACTION, user="U0LEAD") == 200
        second = await fake_slack.wait_for(lambda: second_card(fake_slack, root), 30)
        assert await slack.click(b, second, APPROVE_ACTION, user="U0LEAD") == 200
        await answered(fake_slack, root)
        await runs_ended(database_url, 1)  # the answer shows before the run's last write
    assert ops_api.restarts == ["api", "web"]
    runs = rows(database_url, Run)
    assert [r.status for r in runs] == ["done"]


def second_card(fake: FakeSlack, root: str) -> dict[str, Any] | None:
    cards = [
        m for m in fake.thread_messages(CHANNEL, root)
        if m.get("blocks") and m["blocks"][0].get("type") == "header"
        and any(b.get("type") == "actions" for b in m["blocks"])
    ]  # fmt: skip
    return cards[0] if cards and "web" in str(cards[0]["blocks"]) else None


async def test_a_stop_on_the_non_owner_stops_the_run(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    """The requester presses Stop; the click reaches B while A owns the run: A stops it, its
    approval is cancelled, nothing runs, and the thread says who stopped it. Someone else's
    Stop on B is refused."""
    async with thread_on_two(
        tmp_path, database_url, ops_api, fake_slack, fake_openai, restart_then_answer
    ) as (a, b, slack, event):
        root = root_of(event)
        assert await slack.send(a, event) == 200
        await wait_card(fake_slack, root, pending=True)
        status = fake_slack.thread_messages(CHANNEL, root)[0]
        assert await slack.click(b, status, STOP_ACTION, user="U0EVE") == 200
        await asyncio.sleep(0.5)
        assert [r.stopped_by for r in rows(database_url, Run)] == [None]
        assert await slack.click(b, status, STOP_ACTION, user="U0DEV") == 200
        await fake_slack.wait_for(
            lambda: any("stopped this run" in t for t in texts(fake_slack, root)), 30
        )
        await fake_slack.wait_for(lambda: card_in(fake_slack, root, pending=False), 30)
    [run] = rows(database_url, Run)
    assert (run.status, run.stopped_by) == ("cancelled", "U0DEV")
    assert [a.status for a in rows(database_url, Approval)] == ["cancelled"]
    assert ops_api.restarts == []


async def test_owner_killed_during_a_model_call_the_other_finishes_the_run(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    async with thread_on_two(
        tmp_path, database_url, ops_api, fake_slack, fake_openai, restart_then_answer
    ) as (a, b, slack, event):
        root = root_of(event)
        fake_openai.hold()
        assert await slack.send(a, event) == 200
        await fake_openai.wait_for_requests(1, 30)
        await a.kill()
        fake_openai.release()
        card = await wait_card(fake_slack, root, pending=True)  # B asked the model again
        assert await slack.click(b, card, APPROVE_ACTION, user="U0LEAD") == 200
        await answered_coherently(fake_slack, database_url, root)
    each_restart_once(database_url, ops_api, 1)
    [run] = rows(database_url, Run)
    assert run.status == "done" and run.owner is not None and f":{b.pid}:" in run.owner


async def test_owner_killed_during_a_tool_call_the_call_is_not_run_again(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    async with thread_on_two(
        tmp_path, database_url, ops_api, fake_slack, fake_openai, restart_then_answer
    ) as (a, b, slack, event):
        root = root_of(event)
        assert await slack.send(a, event) == 200
        card = await wait_card(fake_slack, root, pending=True)
        ops_api.hold()
        assert await slack.click(a, card, APPROVE_ACTION, user="U0LEAD") == 200
        await ops_api.wait_for(lambda: ops_api.restarts == ["api"])
        await a.kill()
        ops_api.release()
        await answered_coherently(fake_slack, database_url, root)
    assert ops_api.restarts == ["api"]  # never again
    [row] = [c for c in rows(database_url, CallLog) if c.tool_name == "ops__restart"]
    assert row.result_status == "started"  # the outcome is unknown, and the log says so
    told = [m.get("content") or "" for r in fake_openai.requests for m in r["messages"]]
    assert any("was started before the bot restarted" in t for t in told)
    assert [r.status for r in rows(database_url, Run)] == ["done"]


async def test_owner_killed_while_an_approval_is_pending_its_lease_lapses_and_the_other_adopts(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    """On different hosts (only the lease tells), A is killed with a card pending: B adopts
    the run once A's lease lapsed, the same card stays, a click on it resumes the run on B."""
    async with thread_on_two(
        tmp_path,
        database_url,
        ops_api,
        fake_slack,
        fake_openai,
        restart_then_answer,
        same_host=False,
    ) as (a, b, slack, event):
        root = root_of(event)
        assert await slack.send(a, event) == 200
        card = await wait_card(fake_slack, root, pending=True)
        await card_recorded(database_url)  # (a kill before that would post the card again)
        await a.kill()
        await b.wait_log("adopted run", 30)  # after the lease (3 s) lapsed
        assert await slack.click(b, card, APPROVE_ACTION, user="U0LEAD") == 200
        await answered_coherently(fake_slack, database_url, root)
    each_restart_once(database_url, ops_api, 1)
    assert len(rows(database_url, Approval)) == 1  # the same card, not a second one
