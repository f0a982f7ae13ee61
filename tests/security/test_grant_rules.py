"""Issue 26, item 2: a thread grant is bound to the rule it was made under.

`ops__scale` is approved by the on-call (group `oncall`), and "approve for this thread" lets
`replicas` vary; rules send big scales, nights and contractors' calls to the lead. A grant the
on-call made covers a later call only while that call, evaluated now, resolves to the same rule
and the on-call is still one of its approvers. Driven through signed Slack clicks on the card's
"Approve for this thread" and the console's decision route, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import create_engine, update
from sqlmodel import Session, select

from bot.clock import ManualClock, utcnow
from bot.server import create_app
from bot.storage.models import ApprovalGrant, CallLog
from bot.surfaces.slack.cards import APPROVE_ACTION, APPROVE_THREAD_ACTION
from tests.fakes.openai_server import FakeOpenAI, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.security.conftest import approval_cards, ephemeral_to, finishing, is_pending, wait_cards
from tests.security.test_console import console_settings
from tests.security.test_grants import grant_for_thread
from tests.server.conftest import ConsoleClient
from tests.server.serve_process import SlackSender, serve_env, serving
from tests.server.test_processes import runs_ended
from tests.slack.e2e import SlackBot, bot_settings
from tests.slack.payloads import grant_submission, mention, message

BIG = "big scale needs the lead"
NIGHT = "nights go to the lead"
CONTRACTORS = "contractors need the lead"
REPO = Path(__file__).resolve().parents[2]

MANIFEST = """\
name: ops
description: Ops API of the grant-rule tests
base_url: {url}
auth: {{type: none}}
actions:
  - name: scale
    description: Scale one service
    method: POST
    path: /services/{{name}}/restart
    parameters:
      type: object
      properties: {{name: {{type: string}}, replicas: {{type: integer}}}}
      required: [name, replicas]
    approval: required
    approvers: [oncall]
    grant_scope: {{vary: [replicas]}}
    rules:
      - name: big scale needs the lead
        when: args.replicas > 10
        approvers: [{lead}]
      - name: nights go to the lead
        when: time.hour >= 22 || time.hour < 6
        approvers: [{lead}]
      - name: contractors need the lead
        when: requesters.exists(r, r.startsWith("{contractor}"))
        approvers: [{lead}]
"""


NIGHT_RULE = """\
      - name: nights go to the lead
        when: time.hour >= 22 || time.hour < 6
        approvers: [{lead}]
"""


def write_manifest(
    directory: Path, url: str, *, lead: str, contractor: str, nights: bool = True
) -> Path:
    """`nights=False`: without the night rule, for a bot on the wall clock (a serve process),
    whose result must not depend on the hour the suite runs at."""
    manifests = directory / "grant-rule-manifests"
    manifests.mkdir(exist_ok=True)
    template = MANIFEST if nights else MANIFEST.replace(NIGHT_RULE, "")
    assert nights or template != MANIFEST
    text = template.format(url=url, lead=lead, contractor=contractor)
    (manifests / "ops.yaml").write_text(text)
    return manifests


@pytest.fixture
def clock() -> ManualClock:
    """Noon UTC, ahead of the wall clock (so nothing compared with it looks past due)."""
    now = utcnow()
    noon = datetime(now.year, now.month, now.day, 12, tzinfo=UTC) + timedelta(days=1)
    return ManualClock(noon)


@pytest.fixture
def slack_settings(tmp_path, database_url, ops_api, fake_slack, fake_openai) -> Any:
    return bot_settings(
        database_url=database_url,
        manifests=write_manifest(tmp_path, ops_api.url, lead="U0LEAD", contractor="U0EXT"),
        slack=fake_slack,
        llm_url=fake_openai.base_url,
        chatops_approver_groups={"oncall": ["U0ONCALL"]},
    )


@pytest.fixture
async def bot(slack_settings, fake_slack, clock, aiohttp_client) -> SlackBot:
    return SlackBot(await aiohttp_client(create_app(slack_settings, clock=clock)), fake_slack)


def scales(*replicas: int) -> list[Any]:
    """The model's turns: one run per scale of `api`, each then answering."""
    return [
        turn
        for count in replicas
        for turn in finishing(tool_call("ops__scale", {"name": "api", "replicas": count}))
    ]


async def oncall_grants(bot: SlackBot, *, grantees: list[str]) -> tuple[str, dict]:
    """U0DEV asks to scale api; the on-call approves it for the thread, for `grantees`."""
    event = mention("scale api", user="U0DEV")
    root = event["event"]["ts"]
    await bot.send(event)
    [card] = await wait_cards(bot.fake, root, 1)
    offered = copy.deepcopy(card)
    await grant_for_thread(bot, card, user="U0ONCALL", grantees=grantees)
    await bot.wait_idle()
    return root, offered


async def the_lead_is_asked(
    bot: SlackBot, fake_slack: FakeSlack, ops_api: OpsAPI, root: str, *, ran: int
) -> None:
    """A new card is pending; the on-call's approve on it is refused, nothing ran; the lead's
    approve runs it."""
    cards = await wait_cards(fake_slack, root, 2)
    card = cards[-1]
    assert is_pending(card)
    assert len(ops_api.restarts) == ran
    await bot.click(card, APPROVE_ACTION, user="U0ONCALL")
    assert refused_to(fake_slack, "U0ONCALL")
    assert len(ops_api.restarts) == ran
    await bot.click(card, APPROVE_ACTION, user="U0LEAD")
    await bot.wait_idle()
    assert len(ops_api.restarts) == ran + 1


def refused_to(fake_slack: FakeSlack, user: str) -> bool:
    return any("not one of the approvers" in t for t in ephemeral_to(fake_slack, user))


def call_rows(database_url: str) -> list[CallLog]:
    engine = create_engine(database_url)
    try:
        with Session(engine) as session:
            rows = session.exec(select(CallLog).where(CallLog.tool_name == "ops__scale"))
            return sorted(rows.all(), key=lambda row: row.at)
    finally:
        engine.dispose()


async def test_a_grant_does_not_cover_a_call_a_rule_sends_to_the_lead(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI,
    database_url: str, db_rows,
) -> None:  # fmt: skip
    """The issue's reproduction: granted at replicas=2, replicas=3 runs unasked, replicas=50
    posts a card only the lead may approve."""
    fake_openai.script(*scales(2, 3, 50))
    root, card = await oncall_grants(bot, grantees=["U0DEV"])
    assert "except replicas, which may differ" in json.dumps(card["blocks"])

    await bot.send(message("a bit more", user="U0DEV", thread_ts=root))
    await bot.wait_idle()
    assert len(ops_api.restarts) == 2 and len(approval_cards(fake_slack, root)) == 1

    await bot.send(message("now 50", user="U0DEV", thread_ts=root))
    await the_lead_is_asked(bot, fake_slack, ops_api, root, ran=2)
    rows = call_rows(database_url)
    assert [r.approval_status for r in rows] == ["approved", "thread_grant", "approved"]
    assert rows[2].approvers == ["U0LEAD"] and rows[2].policy_rule == BIG
    [grant] = db_rows(ApprovalGrant)  # bound to the static policy and its approvers
    assert grant.policy_rule == "" and grant.approvers == ["oncall"]


async def test_a_grant_made_by_day_does_not_cover_the_night(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI,
    clock: ManualClock, database_url: str,
) -> None:  # fmt: skip
    fake_openai.script(*scales(2, 2))
    root, _ = await oncall_grants(bot, grantees=["U0DEV"])
    clock.advance(11 * 3600)  # 23:00: the same call now falls under the night rule
    await bot.send(message("again", user="U0DEV", thread_ts=root))
    await the_lead_is_asked(bot, fake_slack, ops_api, root, ran=1)
    assert call_rows(database_url)[-1].policy_rule == NIGHT


async def test_a_grant_does_not_cover_a_contractor_joining_the_request(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI,
    database_url: str,
) -> None:  # fmt: skip
    """Granted for U0DEV and U0EXT1; once the contractor's message is part of the request the
    contractors' rule applies, and the on-call's grant does not reach it."""
    fake_openai.script(*scales(2, 2))
    root, _ = await oncall_grants(bot, grantees=["U0DEV", "U0EXT1"])
    await bot.send(message("same again", user="U0EXT1", thread_ts=root))
    await the_lead_is_asked(bot, fake_slack, ops_api, root, ran=1)
    assert call_rows(database_url)[-1].policy_rule == CONTRACTORS


async def test_a_grant_ends_when_the_granter_is_no_longer_an_approver(
    bot: SlackBot, slack_settings: Any, fake_slack: FakeSlack, fake_openai: FakeOpenAI,
    ops_api: OpsAPI, clock: ManualClock, aiohttp_client: Any,
) -> None:  # fmt: skip
    """The on-call rotates (CHATOPS_APPROVER_GROUPS changes, the bot restarts): the old
    on-call's grant no longer covers the same call."""
    fake_openai.script(*scales(2, 2))
    root, _ = await oncall_grants(bot, grantees=["U0DEV"])
    await bot.client.close()
    rotated = slack_settings.model_copy(
        update={"chatops_approver_groups": {"oncall": ["U0ONCALL2"]}}
    )
    second = SlackBot(await aiohttp_client(create_app(rotated, clock=clock)), fake_slack)
    await second.send(message("again", user="U0DEV", thread_ts=root))
    cards = await wait_cards(fake_slack, root, 2)
    assert is_pending(cards[-1]) and len(ops_api.restarts) == 1
    await second.click(cards[-1], APPROVE_ACTION, user="U0ONCALL")
    assert len(ops_api.restarts) == 1
    await second.click(cards[-1], APPROVE_ACTION, user="U0ONCALL2")
    await second.wait_idle()
    assert len(ops_api.restarts) == 2


async def test_a_grant_that_records_no_rule_covers_nothing(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, ops_api: OpsAPI,
    database_url: str,
) -> None:  # fmt: skip
    """A grant row from before grants were bound to their rule (no rule recorded)."""
    fake_openai.script(*scales(2, 2))
    root, _ = await oncall_grants(bot, grantees=["U0DEV"])
    engine = create_engine(database_url)
    with Session(engine) as session:
        session.execute(update(ApprovalGrant).values(policy_rule=None, approvers=None))
        session.commit()
    engine.dispose()
    await bot.send(message("again", user="U0DEV", thread_ts=root))
    cards = await wait_cards(fake_slack, root, 2)
    assert is_pending(cards[-1]) and len(ops_api.restarts) == 1


@pytest.fixture
async def console(tmp_path, database_url, ops_api, fake_openai, clock, aiohttp_client) -> Any:
    manifests = write_manifest(tmp_path, ops_api.url, lead="lead", contractor="ext-")
    settings = console_settings(
        database_url, manifests, fake_openai, chatops_approver_groups={"oncall": ["oncall"]}
    )
    console = ConsoleClient(await aiohttp_client(create_app(settings, clock=clock)))
    await console.start()
    yield console
    await console.close()


async def test_a_console_grant_does_not_cover_a_call_a_rule_sends_to_the_lead(
    console: ConsoleClient, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    fake_openai.script(*scales(2, 50))
    thread = json.loads(await (await console.send("scale api", user="alice")).text())["thread"]
    first = await console.wait_item(
        lambda i: i["kind"] == "approval" and i["data"]["state"] == "pending"
    )
    url = f"/console/api/approvals/{first['data']['approval_id']}"
    granted = await console.client.post(
        url, json={"decision": "approve_thread", "user": "oncall", "grantees": ["alice"]}
    )
    assert granted.status == 200
    await console.wait_item(lambda i: i["kind"] == "answer")
    assert len(ops_api.restarts) == 1

    await console.send("now 50", thread=thread, user="alice")
    second = await console.wait_item(
        lambda i: (
            i["kind"] == "approval" and i["data"]["approval_id"] != first["data"]["approval_id"]
        )
    )
    assert second["data"]["state"] == "pending"
    url = f"/console/api/approvals/{second['data']['approval_id']}"
    refused = await console.client.post(url, json={"decision": "approve", "user": "oncall"})
    assert refused.status == 403 and json.loads(await refused.text())["status"] == "unauthorized"
    assert len(ops_api.restarts) == 1
    approved = await console.client.post(url, json={"decision": "approve", "user": "lead"})
    assert approved.status == 200
    await ops_api.wait_for(lambda: len(ops_api.restarts) == 2)


def explain(manifest: Path, args: dict, *extra: str, oncall: str = "U0ONCALL") -> list[str]:
    """`chatops manifests explain` as an operator runs it: the `grant` lines it prints."""
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "CHATOPS_APPROVER_GROUPS": json.dumps({"oncall": [oncall]}),
    }
    command = [str(Path(sys.executable).parent / "chatops"), "manifests", "explain",
               str(manifest / "ops.yaml"), "scale", "--args", json.dumps(args), *extra]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith("grant")]


def test_explain_says_whether_a_grant_covers_a_call_and_why(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, "https://ops.example.com", lead="U0LEAD",
                              contractor="U0EXT")  # fmt: skip
    day, night = "2026-12-03T12:00:00Z", "2026-12-03T23:00:00Z"
    grant = ("--user", "U0DEV", "--granter", "U0ONCALL", "--grant-args",
             json.dumps({"name": "api", "replicas": 2}), "--grant-at", day)  # fmt: skip
    made, covers = explain(manifest, {"name": "api", "replicas": 3}, *grant, "--at", day)
    assert made == "grant made: by U0ONCALL under the static policy (no rule matched), for U0DEV"
    assert covers.startswith("grant covers this call: yes: granted by U0ONCALL")

    _, covers = explain(manifest, {"name": "api", "replicas": 50}, *grant, "--at", day)
    assert covers == (
        f"grant covers this call: no: the call now resolves to rule {BIG!r}, the grant was "
        "made under the static policy (no rule matched)"
    )
    _, covers = explain(manifest, {"name": "api", "replicas": 2}, *grant, "--at", night)
    assert covers.startswith(f"grant covers this call: no: the call now resolves to rule {NIGHT!r}")
    both = ("--user", "U0EXT1", "--grant-user", "U0DEV", "--grantee", "U0DEV",
            "--grantee", "U0EXT1")  # fmt: skip
    _, covers = explain(manifest, {"name": "api", "replicas": 2}, *grant, "--at", day, *both)
    assert covers.startswith(
        f"grant covers this call: no: the call now resolves to rule {CONTRACTORS!r}"
    )
    _, covers = explain(manifest, {"name": "api", "replicas": 2}, *grant, "--at", day,
                        oncall="U0ONCALL2")  # fmt: skip
    assert covers == (
        "grant covers this call: no: U0ONCALL granted it but is not (or no longer) one of the "
        "approvers of the static policy (no rule matched) (oncall)"
    )
    _, covers = explain(manifest, {"name": "db", "replicas": 2}, *grant, "--at", day)
    assert "the arguments differ from the granted call beyond grant_scope.vary" in covers


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_across_serve_processes_a_grant_does_not_cover_a_call_a_rule_sends_to_the_lead(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> None:  # fmt: skip
    """The issue's reproduction on two real `chatops serve` processes sharing PostgreSQL: the
    on-call's thread grant is made through A; the thread's next run, on B, scales to 50: B
    posts a card only the lead may approve (the on-call's click on B is refused), and the
    call-log row names the rule."""
    fake_openai.script(*scales(2, 50))
    manifests = write_manifest(
        tmp_path, ops_api.url, lead="U0LEAD", contractor="U0EXT", nights=False
    )
    env = serve_env(
        database_url=database_url, manifests=manifests, slack_url=fake_slack.url,
        llm_url=fake_openai.base_url, chatops_approver_groups='{"oncall": ["U0ONCALL"]}',
    )  # fmt: skip
    event = mention("scale api", user="U0DEV")
    root = event["event"]["ts"]
    async with (
        aiohttp.ClientSession() as http,
        serving(tmp_path, env | {"CHATOPS_NODE_NAME": "a"}) as a,
        serving(tmp_path, env | {"CHATOPS_NODE_NAME": "b"}) as b,
    ):
        slack = SlackSender(http)
        assert await slack.send(a, event) == 200
        [card] = await wait_cards(fake_slack, root, 1)
        assert await slack.click(a, card, APPROVE_THREAD_ACTION, user="U0ONCALL") == 200
        view = await fake_slack.wait_for(lambda: fake_slack.calls("views.open"), 15)
        submitted = grant_submission(view[-1].args["view"], user="U0ONCALL", grantees=["U0DEV"])
        assert await slack.send(a, submitted) == 200
        await runs_ended(database_url, 1)
        assert ops_api.restarts == ["api"]

        assert await slack.send(b, message("now 50", user="U0DEV", thread_ts=root)) == 200
        cards = await wait_cards(fake_slack, root, 2)
        assert is_pending(cards[-1]) and ops_api.restarts == ["api"]
        assert await slack.click(b, cards[-1], APPROVE_ACTION, user="U0ONCALL") == 200
        await fake_slack.wait_for(lambda: refused_to(fake_slack, "U0ONCALL"), 15)
        assert ops_api.restarts == ["api"]
        assert await slack.click(b, cards[-1], APPROVE_ACTION, user="U0LEAD") == 200
        await runs_ended(database_url, 2)
    assert ops_api.restarts == ["api", "api"]
    rows = call_rows(database_url)
    assert [r.approval_status for r in rows] == ["approved", "approved"]
    assert rows[1].approvers == ["U0LEAD"] and rows[1].policy_rule == BIG
