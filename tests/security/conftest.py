"""The adversarial suite's harness: the real app (`create_app`) on Slack, signed events and
clicks, FakeSlack and FakeOpenAI, an ops API behind a bearer token, on SQLite and PostgreSQL.

The ops connector's actions are the ones the attacks aim at:
- `restart`: approval by U0LEAD or U0LEAD2, "approve for this thread" allowed (the `reason`
  argument may vary), a grant lasts the default 15 minutes;
- `delete`: both leads must approve (`min_approvals: 2`) and the requester may not
  (`allow_self_approval: false`): no grant is ever possible.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlmodel import Session, select

from bot.server import create_app
from tests.fakes.fixtures import fake_openai  # noqa: F401
from tests.fakes.openai_server import Turn, answer
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.feishu.e2e import FeishuBot
from tests.feishu.e2e import bot_settings as feishu_settings
from tests.slack.e2e import SlackBot, bot_settings
from tests.slack.payloads import CHANNEL

OPS_TOKEN = "ops-token-9f8e7d6c5b4a"  # the connector's credential: masked wherever shown
LEADS = ("U0LEAD", "U0LEAD2")

MANIFEST = """\
name: ops
description: Internal ops API of the security tests
base_url: {url}
auth: {{type: bearer, token_env: OPS_TOKEN}}
actions:
  - name: get_service
    description: Show one service's status
    method: GET
    path: /services/{{name}}
    parameters: {{type: object, properties: {{name: {{type: string}}}}, required: [name]}}
  - name: restart
    description: Restart one service
    method: POST
    path: /services/{{name}}/restart
    parameters:
      type: object
      properties: {{name: {{type: string}}, reason: {{type: string}}, command: {{type: string}},
                    signature: {{type: string}}}}
      required: [name]
    approval: required
    approvers: [U0LEAD, U0LEAD2]
    grant_scope: {{vary: [reason]}}
    risk: high
  - name: delete
    description: Delete one service
    method: POST
    path: /services/{{name}}/delete
    parameters: {{type: object, properties: {{name: {{type: string}}}}, required: [name]}}
    approval: required
    approvers: [U0LEAD, U0LEAD2]
    min_approvals: 2
    allow_self_approval: false
    risk: high
"""


@pytest.fixture
def manifests(tmp_path: Path, ops_api: OpsAPI, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPS_TOKEN", OPS_TOKEN)
    directory = tmp_path / "manifests"
    directory.mkdir()
    (directory / "ops.yaml").write_text(MANIFEST.format(url=ops_api.url))
    return directory


@pytest.fixture
def settings(database_url, manifests, fake_slack, fake_openai):  # noqa: F811
    return bot_settings(
        database_url=database_url,
        manifests=manifests,
        slack=fake_slack,
        llm_url=fake_openai.base_url,
        chatops_audit_viewers="U0LEAD,U0AUDITOR",
    )


@pytest.fixture
async def bot(settings, fake_slack, aiohttp_client) -> SlackBot:
    """The app is stopped before the database and the fakes go (fixtures end in reverse)."""
    return SlackBot(await aiohttp_client(create_app(settings)), fake_slack)


@pytest.fixture
async def feishu_bot(
    database_url,
    manifests,
    fake_feishu,
    fake_openai,  # noqa: F811
    aiohttp_client,
) -> FeishuBot:
    """The same bot on Feishu (ou_lead may see audit reports); stopped before the fakes."""
    settings = feishu_settings(
        database_url=database_url,
        manifests=manifests,
        fake=fake_feishu,
        llm_url=fake_openai.base_url,
        chatops_audit_viewers="ou_lead",
    )
    return FeishuBot(await aiohttp_client(create_app(settings)), fake_feishu)


def finishing(*turns: Turn, text: str = "Done.") -> list[Turn]:
    """One run's model turns: the given tool calls, then its final answer and the synthesis."""
    return [*turns, answer(text), answer(text)]


def approval_cards(fake: FakeSlack, root: str) -> list[dict[str, Any]]:
    """The approval cards posted in a thread (by their header block), oldest first."""
    return [
        m
        for m in fake.thread_messages(CHANNEL, root)
        if m.get("blocks") and m["blocks"][0].get("type") == "header"
    ]


def is_pending(card: dict[str, Any]) -> bool:
    return any(b.get("type") == "actions" for b in card.get("blocks", []))


async def wait_cards(fake: FakeSlack, root: str, count: int) -> list[dict[str, Any]]:
    """Wait until the thread has `count` approval cards; the newest last."""
    return await fake.wait_for(lambda: len(approval_cards(fake, root)) >= count and
                               approval_cards(fake, root), 15)  # fmt: skip


def button_ids(card: dict[str, Any]) -> list[str]:
    return [
        e["action_id"]
        for b in card.get("blocks", [])
        if b.get("type") == "actions"
        for e in b["elements"]
    ]


def ephemeral_to(fake: FakeSlack, user: str) -> list[str]:
    return [note["text"] for note in fake.ephemeral if note.get("user") == user]


@pytest.fixture
def db_rows(database_url: str) -> Iterator[Any]:
    """`db_rows(Model, **where)`: rows of one table as the bot left them."""
    engine = create_engine(database_url)

    def rows(model: type, **where: Any) -> list[Any]:
        with Session(engine) as session:
            query = select(model)
            for key, value in where.items():
                query = query.where(getattr(model, key) == value)
            return list(session.exec(query).all())

    yield rows
    engine.dispose()
