"""Approval policies that look at the call: the real app (`create_app`) on a manifest with CEL
rules, driven through Slack, Feishu and the console, on SQLite and PostgreSQL.

The ops connector's `restart` is free on staging, needs two leads on production (never the
requester), and anything touching `payments-db` is denied by a connector-wide rule.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.clock import ManualClock
from bot.config import Settings
from bot.server import create_app
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.fixtures import fake_openai  # noqa: F401
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.feishu.e2e import FeishuBot
from tests.feishu.e2e import bot_settings as feishu_settings
from tests.security.conftest import db_rows  # noqa: F401
from tests.security.test_console import console_settings
from tests.server.conftest import ConsoleClient
from tests.slack.e2e import SlackBot, bot_settings

DENY_RULE = "connector.never payments-db"
PRODUCTION_RULE = "two leads on production"
STAGING_RULE = "staging is free"

MANIFEST = """\
name: ops
description: Ops API of the approval-policy tests
base_url: {url}
auth: {{type: none}}
actions:
  - name: restart
    description: Restart one service in one environment
    method: POST
    path: /services/{{name}}/restart
    parameters:
      type: object
      properties: {{name: {{type: string}}, env: {{type: string}}}}
      required: [name, env]
    approval: required
    approvers: [{lead}]
    rules:
      - name: staging is free
        when: args.env == "staging"
        approval: never
        risk: low
      - name: two leads on production
        when: args.env == "production"
        approvers: [leads]
        min_approvals: 2
        allow_self_approval: false
        risk: high
        reason: production needs two leads
      - name: qa waits briefly
        when: args.env == "qa"
        timeout_s: 0.5
        on_timeout: reject
rules:
  - name: never payments-db
    when: args.name.startsWith("payments-db")
    approval: deny
    reason: payments-db changes go through the change board
"""


def write_manifest(directory: Path, ops_url: str, *, lead: str) -> Path:
    manifests = directory / "manifests"
    manifests.mkdir(exist_ok=True)
    (manifests / "ops.yaml").write_text(MANIFEST.format(url=ops_url, lead=lead))
    return manifests


@pytest.fixture
async def slack_bot(
    tmp_path: Path,
    database_url: str,
    ops_api: OpsAPI,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,  # noqa: F811
    aiohttp_client: Any,
) -> SlackBot:
    settings = bot_settings(
        database_url=database_url,
        manifests=write_manifest(tmp_path, ops_api.url, lead="U0LEAD"),
        slack=fake_slack,
        llm_url=fake_openai.base_url,
        chatops_approver_groups={"leads": ["U0LEAD", "U0LEAD2"]},
        chatops_audit_viewers="U0LEAD",
    )
    return SlackBot(await aiohttp_client(create_app(settings)), fake_slack)


@pytest.fixture
async def feishu_bot(
    tmp_path: Path,
    database_url: str,
    ops_api: OpsAPI,
    fake_feishu: FakeFeishu,
    fake_openai: FakeOpenAI,  # noqa: F811
    aiohttp_client: Any,
) -> FeishuBot:
    settings = feishu_settings(
        database_url=database_url,
        manifests=write_manifest(tmp_path, ops_api.url, lead="ou_lead"),
        fake=fake_feishu,
        llm_url=fake_openai.base_url,
        chatops_approver_groups={"leads": ["ou_lead", "ou_lead2"]},
    )
    return FeishuBot(await aiohttp_client(create_app(settings)), fake_feishu)


# --- routing and escalation -------------------------------------------------------------------

APPROVALS_CHANNEL = "C0APPROVALS"  # Slack's approvals channel; Feishu's approvals chat below
APPROVALS_CHAT = "oc_approvals"

ROUTED_MANIFEST = """\
name: ops
description: Ops API of the routing and escalation tests
base_url: {url}
auth: {{type: none}}
actions:
  - name: restart
    description: Restart one service in one environment
    method: POST
    path: /services/{{name}}/restart
    parameters:
      type: object
      properties: {{name: {{type: string}}, env: {{type: string}}}}
      required: [name, env]
    approval: required
    approvers: [leads]
    allow_self_approval: false
    rules:
      - name: production in the approvals channel
        when: args.env == "production"
        route: "channel:{channel}"
      - name: staging by DM
        when: args.env == "staging"
        route: dm
      - name: qa climbs to the manager
        when: args.env == "qa"
        approvers: [{lead}]
        timeout_s: 3600
        escalate:
          - {{after_s: 600, approvers: [{boss}], notify: paging the SRE manager}}
"""


def write_routed_manifest(
    directory: Path, ops_url: str, *, lead: str, boss: str, channel: str
) -> Path:
    manifests = directory / "manifests"
    manifests.mkdir(exist_ok=True)
    text = ROUTED_MANIFEST.format(url=ops_url, lead=lead, boss=boss, channel=channel)
    (manifests / "ops.yaml").write_text(text)
    return manifests


@pytest.fixture
def clock() -> ManualClock:
    """The approvals' time: it moves only when a test says so."""
    return ManualClock()


@pytest.fixture
def routed_slack_settings(
    tmp_path: Path,
    database_url: str,
    ops_api: OpsAPI,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,  # noqa: F811
) -> Settings:
    manifests = write_routed_manifest(
        tmp_path, ops_api.url, lead="U0LEAD", boss="U0BOSS", channel=APPROVALS_CHANNEL
    )
    return bot_settings(
        database_url=database_url,
        manifests=manifests,
        slack=fake_slack,
        llm_url=fake_openai.base_url,
        chatops_approver_groups={"leads": ["U0LEAD", "U0LEAD2"]},
    )


@pytest.fixture
async def routed_slack(
    routed_slack_settings: Settings, fake_slack: FakeSlack, clock: ManualClock, aiohttp_client: Any
) -> SlackBot:
    app = create_app(routed_slack_settings, clock=clock)
    return SlackBot(await aiohttp_client(app), fake_slack)


@pytest.fixture
async def routed_feishu(
    tmp_path: Path,
    database_url: str,
    ops_api: OpsAPI,
    fake_feishu: FakeFeishu,
    fake_openai: FakeOpenAI,  # noqa: F811
    clock: ManualClock,
    aiohttp_client: Any,
) -> FeishuBot:
    manifests = write_routed_manifest(
        tmp_path, ops_api.url, lead="ou_lead", boss="ou_boss", channel=APPROVALS_CHAT
    )
    settings = feishu_settings(
        database_url=database_url,
        manifests=manifests,
        fake=fake_feishu,
        llm_url=fake_openai.base_url,
        chatops_approver_groups={"leads": ["ou_lead", "ou_lead2"]},
    )
    return FeishuBot(await aiohttp_client(create_app(settings, clock=clock)), fake_feishu)


@pytest.fixture
async def routed_console(
    tmp_path: Path,
    database_url: str,
    ops_api: OpsAPI,
    fake_openai: FakeOpenAI,  # noqa: F811
    clock: ManualClock,
    aiohttp_client: Any,
) -> AsyncIterator[ConsoleClient]:
    manifests = write_routed_manifest(
        tmp_path, ops_api.url, lead="lead", boss="boss", channel="approvals-room"
    )
    settings = console_settings(
        database_url, manifests, fake_openai, chatops_approver_groups={"leads": ["lead", "lead2"]}
    )
    console = ConsoleClient(await aiohttp_client(create_app(settings, clock=clock)))
    await console.start()
    try:
        yield console
    finally:
        await console.close()
