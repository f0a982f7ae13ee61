"""The approver's App Home across two real `chatops serve` processes on one PostgreSQL
database: the run and its card belong to process A; the approver opens their Home tab through
process B, which lists the approval from the database, and approves from there; A's run goes
on, and B publishes the home again, empty. Every `views.publish` is checked by the fake
Slack against slack_sdk's View model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.storage.models import Approval
from bot.surfaces.slack.cards import APPROVE_ACTION
from tests.databases import rows
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI, restart_then_answer
from tests.fakes.slack_api import FakeSlack
from tests.server.test_processes import answered, card_recorded, root_of, thread_on_two
from tests.slack.e2e import wait_card
from tests.slack.payloads import home_actions, home_opened

pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


def listed(fake: FakeSlack, user: str) -> list[str]:
    """The approval ids on `user`'s published home (from its Approve buttons)."""
    return [
        element["value"]
        for block in fake.homes.get(user, {}).get("blocks", [])
        if block.get("type") == "actions"
        for element in block["elements"]
        if element["action_id"] == APPROVE_ACTION
    ]


async def test_the_home_opened_on_the_other_process_lists_and_decides(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    async with thread_on_two(
        tmp_path, database_url, ops_api, fake_slack, fake_openai, restart_then_answer
    ) as (a, b, slack, event):
        root = root_of(event)
        assert await slack.send(a, event) == 200
        await wait_card(fake_slack, root, pending=True)
        await card_recorded(database_url)
        [approval] = rows(database_url, Approval)
        fake_slack.homes.clear()  # what A published when it asked: forget it

        assert await slack.send(b, home_opened("U0LEAD")) == 200
        await fake_slack.wait_for(lambda: listed(fake_slack, "U0LEAD") == [approval.id], 15)
        home = fake_slack.homes["U0LEAD"]
        assert "Waiting for you" in json.dumps(home)
        assert await slack.send(b, home_actions(home, approval.id, APPROVE_ACTION,
                                                user="U0LEAD")) == 200  # fmt: skip
        await answered(fake_slack, root)
        await fake_slack.wait_for(lambda: listed(fake_slack, "U0LEAD") == [], 15)
    assert ops_api.restarts == ["api"]
    [approval] = rows(database_url, Approval)
    assert (approval.status, approval.decided_by) == ("approved", ["U0LEAD"])
