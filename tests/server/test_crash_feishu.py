"""`kill -9` right after Feishu's acknowledgements, with real `chatops serve` processes on
SQLite: Feishu is FakeFeishu (encrypted, signed webhook pushes), the model FakeOpenAI, the
target system the fake ops API. The Slack twin is in test_crash.py (on PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bot.storage.models import Approval, InboxEvent, Message
from tests.databases import rows
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI, restart_then_answer
from tests.feishu.e2e import DEV, LEAD, manifest, wait_card
from tests.server.serve_process import ServeProcess, feishu_serve_env, serving
from tests.server.test_crash import RESTARTED, each_restart_at_most_once_and_logged


@pytest.fixture
def env(tmp_path: Path, database_url: str, ops_api, fake_feishu, fake_openai) -> dict[str, str]:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "ops.yaml").write_text(manifest(ops_api.url))
    return feishu_serve_env(
        database_url=database_url,
        manifests=manifests,
        fake=fake_feishu,
        llm_url=fake_openai.base_url,
    ) | {  # one person asks for every run here: lift the per-person caps (not the point)
        "CHATOPS_MAX_ACTIVE_RUNS_PER_USER": "100",
        "CHATOPS_MAX_PENDING_APPROVALS_PER_USER": "100",
    }


def events_url(process: ServeProcess) -> str:
    return f"{process.url}/feishu/events"


def thread_text(fake: FakeFeishu, root: str) -> str:
    """Everything the bot shows in the thread now (text messages and cards, latest versions)."""
    return json.dumps([m.content for m in fake.replies_to(root)], ensure_ascii=False)


async def said(fake: FakeFeishu, root: str, *needles: str) -> None:
    await fake.wait_for(lambda f: any(n in thread_text(f, root) for n in needles), 30)


async def test_acknowledged_feishu_mentions_and_clicks_survive_a_kill_right_after_the_ack(
    tmp_path: Path,
    env: dict[str, str],
    database_url: str,
    fake_feishu: FakeFeishu,
    fake_openai: FakeOpenAI,
    ops_api: OpsAPI,
) -> None:
    """Five approval cards are clicked and twenty new mentions arrive at once; the bot is
    killed the moment the last acknowledgement is back. Each was stored before Feishu got its
    200: every click's decision is recorded, every mention's message is stored and its thread
    answered (a card, or the restart notice if its run had begun), no restart ran twice or
    went unlogged, and nothing is left in the inbox."""
    fake_openai.respond_with(restart_then_answer)
    clicked = [fake_feishu.message_event(f"restart api ({i})", user=DEV) for i in range(5)]
    later = [fake_feishu.message_event(f"restart api later ({i})", user=DEV) for i in range(20)]

    def root(event: dict[str, Any]) -> str:
        return event["event"]["message"]["message_id"]

    async with serving(tmp_path, env) as first:
        url = events_url(first)
        for event in clicked:
            assert (await fake_feishu.push(url, event))[0] == 200
        cards = [await wait_card(fake_feishu, root(e), pending=True) for e in clicked]
        answers = await asyncio.gather(
            *(
                fake_feishu.push(url, fake_feishu.card_action(c.message_id, "approve", user=LEAD))
                for c in cards
            ),
            *(fake_feishu.push(url, event) for event in later),
        )
        await first.kill()
    assert [status for status, _ in answers] == [200] * 25

    async with serving(tmp_path, env) as second:
        await second.wait_log("recovery done", 60)
        for event in clicked:  # approved: the restart ran and was answered, or was cut short
            await said(fake_feishu, root(event), "Restarted", RESTARTED)
        for event in later:  # a card, or (if its run had begun) the restart notice
            await said(fake_feishu, root(event), "Approval needed", RESTARTED)
        await second.stop()

    assert [a.status for a in rows(database_url, Approval) if a.decided_by] == ["approved"] * 5
    stored = {m.text for m in rows(database_url, Message) if m.role == "user"}
    assert {f"restart api later ({i})" for i in range(20)} <= stored
    assert rows(database_url, InboxEvent) == []  # every acknowledged event was processed
    each_restart_at_most_once_and_logged(database_url, ops_api, runs=5)
