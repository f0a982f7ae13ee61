"""An approver's edit reaches the audit sinks: requested, edited (by whom, the new fingerprint
and the model's), approved, and the call that ran carries the edited fingerprint and its editor.
The real app on Slack, a file sink, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bot.server import RUNTIME_KEY, create_app
from bot.storage import outbox
from tests.approvals.conftest import write_manifest
from tests.approvals.test_edit_slack import ask, edited, open_edit, submit
from tests.approvals.test_rules import restart
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.slack.e2e import SlackBot, bot_settings

pytestmark = pytest.mark.both_databases


async def test_an_edit_is_an_event_and_the_call_carries_the_edited_fingerprint(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI, aiohttp_client: Any,
) -> None:  # fmt: skip
    audit_file = tmp_path / "audit.jsonl"
    settings = bot_settings(
        database_url=database_url, manifests=write_manifest(tmp_path, ops_api.url, lead="U0LEAD"),
        slack=fake_slack, llm_url=fake_openai.base_url,
        chatops_audit_sink_file=str(audit_file), chatops_audit_sink_interval_s=0.02,
    )  # fmt: skip
    bot = SlackBot(await aiohttp_client(create_app(settings)), fake_slack)
    fake_openai.script(*restart("api", "dev"))
    _root, card = await ask(bot, fake_slack, "restart api on dev")
    view = await open_edit(bot, fake_slack, card, user="U0LEAD")
    await submit(bot, view, edited(view, name="web"), user="U0LEAD")
    await bot.wait_idle()
    assert ops_api.restarts == ["web"]
    db = bot.app[RUNTIME_KEY].db

    async def drained() -> None:
        while await db.run(outbox.pending_events) != 0:  # noqa: ASYNC110 - the sender's table
            await asyncio.sleep(0.02)

    await asyncio.wait_for(drained(), 20)
    events = [json.loads(line) for line in audit_file.read_text().splitlines()]
    assert [e["activity_name"] for e in events] == [
        "Approval Requested", "Approval Edited", "Approval Decided", "Update", "Update",
    ]  # fmt: skip
    requested, edit, decided, _started, ran = events
    assert edit["actor"]["user"]["uid"] == "U0LEAD"
    assert edit["unmapped"]["outcome"] == "edited" and edit["status_id"] == 0
    assert edit["unmapped"]["model_fingerprint"] == requested["unmapped"]["fingerprint"]
    assert edit["unmapped"]["fingerprint"] != requested["unmapped"]["fingerprint"]
    assert decided["unmapped"]["fingerprint"] == edit["unmapped"]["fingerprint"]
    assert ran["unmapped"]["fingerprint"] == edit["unmapped"]["fingerprint"]
    assert ran["unmapped"]["edited_by"] == "U0LEAD" and ran["unmapped"]["outcome"] == "ok"
    assert '"web"' not in audit_file.read_text()  # the edited arguments themselves never go out
