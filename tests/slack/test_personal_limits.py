"""Per-person caps through signed Slack events to the real app, on SQLite and PostgreSQL.

One person's mentions cannot take every run slot: past `CHATOPS_MAX_ACTIVE_RUNS_PER_USER`
unfinished runs, their next mention is answered in its thread (naming them and the limit) and
starts nothing, while another person's starts normally. Past
`CHATOPS_MAX_PENDING_APPROVALS_PER_USER` waiting approvals, a call that needs one more is not
asked for: the model reads why, the thread is told, nothing runs; other people's calls still get
their cards. With two apps on one PostgreSQL database, the runs are counted across both.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bot.storage.models import Approval, CallLog, Run
from bot.surfaces.slack.render import STOP_ACTION
from tests.databases import rows
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI, restart_then_answer
from tests.fakes.slack_api import FakeSlack
from tests.slack.e2e import SlackBot, card_in, ops_bot, texts, wait_card
from tests.slack.payloads import CHANNEL, mention

pytestmark = pytest.mark.both_databases  # caps counted under an advisory lock on PostgreSQL

RUN_LIMIT = "2 requests in progress"
RUN_LIMIT_ONE = "1 request in progress"


def runs_of(database_url: str, user: str) -> list[Run]:
    return [r for r in rows(database_url, Run) if r.requester == user]


async def ask_restart(bot: SlackBot, user: str) -> str:
    """`user` asks for a restart; returns the thread root once its card is pending."""
    event = mention("restart api", user=user)
    assert await bot.send(event) == 200
    root = event["event"]["ts"]
    await wait_card(bot.fake, root, pending=True)
    return root


async def refused_in_thread(bot: SlackBot, user: str, needle: str) -> str:
    """`user`'s mention is answered with a notice containing `needle`; returns its root."""
    event = mention("restart api", user=user)
    assert await bot.send(event) == 200
    root = event["event"]["ts"]
    notice = await bot.fake.wait_for(
        lambda: next((t for t in texts(bot.fake, root) if needle in t), None), 15
    )
    assert notice.startswith(f"<@{user}>")
    assert "Stop" in notice  # what to do about it
    return root


def status_of(fake: FakeSlack, root: str) -> dict[str, Any]:
    return fake.thread_messages(CHANNEL, root)[0]


async def limited_bot(
    aiohttp_client: Any, database_url: str, directory: Path, ops_api: OpsAPI, fake: FakeSlack,
    fake_openai: FakeOpenAI, **caps: Any,
) -> SlackBot:  # fmt: skip
    fake_openai.respond_with(restart_then_answer)
    return await ops_bot(aiohttp_client, database_url, directory, ops_api.url, fake,
                         fake_openai.base_url, approvers=("U0LEAD",), **caps)  # fmt: skip


async def test_one_persons_extra_mention_is_refused_while_others_start(
    database_url: str, aiohttp_client, tmp_path: Path, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    bot = await limited_bot(aiohttp_client, database_url, tmp_path, ops_api, fake_slack,
                            fake_openai, chatops_max_active_runs_per_user=2)  # fmt: skip
    first = await ask_restart(bot, "U0SPAM")
    await ask_restart(bot, "U0SPAM")
    refused = await refused_in_thread(bot, "U0SPAM", RUN_LIMIT)
    assert card_in(fake_slack, refused) is None
    assert len(runs_of(database_url, "U0SPAM")) == 2  # the third never started
    # someone else is not affected
    await ask_restart(bot, "U0OPS")
    assert [r.status for r in runs_of(database_url, "U0OPS")] == ["waiting_approval"]
    # once one of the person's runs ended, they may ask again
    assert await bot.click(status_of(fake_slack, first), STOP_ACTION, user="U0SPAM") == 200
    await fake_slack.wait_for(
        lambda: [r.status for r in runs_of(database_url, "U0SPAM")].count("cancelled") == 1, 15
    )
    await ask_restart(bot, "U0SPAM")
    assert len(runs_of(database_url, "U0SPAM")) == 3


async def test_pending_approvals_past_the_cap_are_refused_to_the_model_and_told(
    database_url: str, aiohttp_client, tmp_path: Path, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    bot = await limited_bot(aiohttp_client, database_url, tmp_path, ops_api, fake_slack,
                            fake_openai, chatops_max_pending_approvals_per_user=2)  # fmt: skip
    await ask_restart(bot, "U0SPAM")
    await ask_restart(bot, "U0SPAM")
    event = mention("restart api", user="U0SPAM")
    assert await bot.send(event) == 200
    root = event["event"]["ts"]
    notice = await fake_slack.wait_for(
        lambda: next((t for t in texts(fake_slack, root) if "not sent for approval" in t), None),
        15,
    )
    assert notice.startswith("<@U0SPAM>") and "2 approvals are already waiting" in notice
    # the run goes on: the model read why the call did not run, and answered
    run = await fake_slack.wait_for(
        lambda: next((r for r in runs_of(database_url, "U0SPAM") if r.status == "done"), None),
        15,
    )
    observations = [
        m["content"] for body in fake_openai.requests if not body.get("stream")
        for m in body["messages"] if m["role"] == "tool"
    ]  # fmt: skip
    assert any("NOT sent for approval" in text for text in observations)
    assert card_in(fake_slack, root) is None
    assert ops_api.restarts == []
    pending = [a for a in rows(database_url, Approval) if a.status == "pending"]
    assert len(pending) == 2 and {a.requester for a in pending} == {"U0SPAM"}
    logged = [c for c in rows(database_url, CallLog) if c.run_id == run.id]
    assert [c.approval_status for c in logged] == ["blocked"]
    # another person's call still gets its card
    await ask_restart(bot, "U0OPS")


async def two_apps(
    aiohttp_client: Any, database_url: str, tmp_path: Path, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI, *, per_user: int,
) -> list[SlackBot]:  # fmt: skip
    """Two processes' worth of apps (nodes a and b) on one database, `per_user` runs each."""
    apps = []
    for node in ("node-a", "node-b"):
        directory = tmp_path / node
        directory.mkdir()
        apps.append(
            await limited_bot(
                aiohttp_client,
                database_url,
                directory,
                ops_api,
                fake_slack,
                fake_openai,
                chatops_max_active_runs_per_user=per_user,
                chatops_node_name=node,
            )  # fmt: skip
        )
    return apps


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_the_run_cap_is_counted_across_two_apps_on_one_database(
    database_url: str, aiohttp_client, tmp_path: Path, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    """Two processes' worth of apps share the PostgreSQL database: the person's two runs on
    the first count on the second, whose own memory holds none of them."""
    apps = await two_apps(
        aiohttp_client, database_url, tmp_path, ops_api, fake_slack, fake_openai, per_user=2
    )
    first, second = apps
    await ask_restart(first, "U0SPAM")
    await ask_restart(first, "U0SPAM")
    await refused_in_thread(second, "U0SPAM", RUN_LIMIT)
    assert len(runs_of(database_url, "U0SPAM")) == 2
    await ask_restart(second, "U0OPS")
    assert {r.owner for r in runs_of(database_url, "U0OPS")} != {None}


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_two_apps_admitting_one_person_at_once_start_one_run(
    database_url: str, aiohttp_client, tmp_path: Path, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    """With one place left, the person's mentions reach both apps at once (repeatedly): the
    count and the insert are one step per person, so only one run starts each time."""
    apps = await two_apps(
        aiohttp_client, database_url, tmp_path, ops_api, fake_slack, fake_openai, per_user=1
    )
    for attempt in range(3):
        person = f"U0RACE{attempt}"
        events = [mention("restart api", user=person) for _ in apps]
        statuses = await asyncio.gather(*(app.send(e) for app, e in zip(apps, events, strict=True)))
        assert statuses == [200, 200]
        roots = [e["event"]["ts"] for e in events]
        await fake_slack.wait_for(
            lambda roots=roots, p=person: any(RUN_LIMIT_ONE in t for r in roots
                                              for t in texts(fake_slack, r)), 15,
        )  # fmt: skip
        assert len(runs_of(database_url, person)) == 1
