"""Who RECEIVES an approval follows the workspace's approvers and groups, as who decides it does
(`CHATOPS_WORKSPACES_FILE`, issue 35 item 3): the card's copies by direct message, the reminders,
a grant that lets later calls through and an edit, through the real entry points (two Slack
workspaces installed over OAuth, signed events, clicks and modal submissions on
`/slack/events`), on SQLite and PostgreSQL.

Process-wide, `oncall` is U0LEAD and U0BEN and `leads` is U0LEAD. Workspace A has groups of its
own (`oncall`: U0ANN and U0LEAD, `leads`: U0ANN); workspace B keeps the process's groups but
lists U0BEN as its only approver. So U0BEN, B's approver, is nobody in A, and U0LEAD, an
approver in A, is nobody in B.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bot.clock import ManualClock
from bot.server import create_app
from bot.storage.models import Approval, ApprovalCard, ApprovalGrant
from bot.surfaces.slack.cards import APPROVE_ACTION, APPROVE_THREAD_ACTION, EDIT_ACTION
from bot.surfaces.slack.inbound import SLACK_INBOUND_KEY
from tests.approvals.test_edit_slack import edited
from tests.approvals.test_routing import cards_in_channel
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import FakeSlack
from tests.security.conftest import is_pending
from tests.slack.e2e import SlackBot
from tests.slack.payloads import (
    as_body,
    block_actions,
    grant_submission,
    mention,
    message,
    signed_headers,
    submitted,
)
from tests.slack.test_workspaces import card_in_channel
from tests.slack.workspaces import (
    CHANNEL_A,
    CHANNEL_B,
    TEAM_A,
    TEAM_B,
    click_from,
    from_team,
    install,
    oauth_settings,
    two_workspaces,
)

pytestmark = pytest.mark.both_databases

MANIFEST = """\
name: ops
description: Ops API of the workspace-recipient tests
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
    approvers: [oncall]
    rules:
      - name: staging by DM
        when: args.env == "staging"
        route: dm
      - name: production needs the leads
        when: args.env == "production"
        approvers: [leads]
"""

POLICY = f"""\
workspaces:
  - platform: slack
    workspace: {TEAM_A}
    approver_groups:
      oncall: [U0ANN, U0LEAD]
      leads: [U0ANN]
  - platform: slack
    workspace: {TEAM_B}
    approvers: [U0BEN]
"""
PROCESS_GROUPS = {"oncall": ["U0LEAD", "U0BEN"], "leads": ["U0LEAD"]}
TEAM_OF = {CHANNEL_A: TEAM_A, CHANNEL_B: TEAM_B}
OWN = ("U0ANN", "U0LEAD", "U0BEN")  # A's two approvers, B's one


def restarts_as_asked(body: dict[str, Any]) -> Turn:
    """The last message decides: a tool result is answered; "restart NAME on ENV" restarts."""
    last = body["messages"][-1]
    if body.get("stream") or last["role"] == "tool":
        return answer("done")
    words = str(last.get("content") or "").split()
    name, env = words[words.index("restart") + 1], words[-1]
    return tool_call("ops__restart", {"name": name, "env": env}, id=f"call_{name}_{env}")


def settings_for(
    tmp_path: Path, database_url: str, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI, *, policy: str = POLICY, **extra: Any,
) -> Any:  # fmt: skip
    path = tmp_path / "workspaces.yaml"
    path.write_text(policy)
    settings = oauth_settings(
        database_url=database_url, directory=tmp_path, ops_url=ops_api.url, slack=fake_slack,
        llm_url=fake_openai.base_url, chatops_workspaces_file=path,
        chatops_approver_groups=PROCESS_GROUPS, **extra,
    )  # fmt: skip
    (tmp_path / "manifests" / "ops.yaml").write_text(MANIFEST.format(url=ops_api.url))
    return settings


async def start(
    aiohttp_client: Any, settings: Any, fake_slack: FakeSlack, fake_openai: FakeOpenAI,
    *, clock: ManualClock | None = None, installed: bool = False,
) -> SlackBot:  # fmt: skip
    if not installed:
        two_workspaces(fake_slack)
    fake_openai.respond_with(restarts_as_asked)
    bot = SlackBot(await aiohttp_client(create_app(settings, clock=clock)), fake_slack)
    bot.lift_edit_budget()
    if not installed:
        await install(bot, fake_slack, TEAM_A)
        await install(bot, fake_slack, TEAM_B)
    return bot


async def ask(bot: SlackBot, channel: str, text: str, *, root: str | None = None) -> str:
    """U0DEV asks in `channel` (a new thread, or the thread `root`); returns the root."""
    if root is None:
        event = mention(text, user="U0DEV", channel=channel)
        root = event["event"]["ts"]
    else:
        event = message(text, user="U0DEV", channel=channel, thread_ts=root)
    assert await bot.send(from_team(event, TEAM_OF[channel])) == 200
    return root


async def press(
    bot: SlackBot, card: dict[str, Any], action: str, *, user: str, channel: str, team: str
) -> None:
    body = click_from(block_actions(card, action, user=user, channel=channel), team)
    assert await bot.send(body) == 200


async def submit(bot: SlackBot, body: str, team: str) -> Any:
    """A signed modal submission from `team`; bolt's JSON answer (None: an empty ack)."""
    body = as_body(click_from(body, team))
    response = await bot.client.post("/slack/events", data=body, headers=signed_headers(body))
    assert response.status == 200
    text = await response.text()
    await bot.app[SLACK_INBOUND_KEY].wait_idle(10)
    return json.loads(text) if text else None


def opened_for(fake: FakeSlack) -> dict[str, set[str | None]]:
    """Who got a direct message opened, with which workspace's token."""
    seen: dict[str, set[str | None]] = {}
    for call in fake.calls("conversations.open"):
        seen.setdefault(str(call.args["users"]), set()).add(fake.team_of(call))
    return seen


def copies_out(fake: FakeSlack, channel: str, since: int) -> bool:
    """Since call `since`, DM copies were sent, then the routed card's notice in `channel`'s
    thread (posted once every copy was sent)."""
    calls = fake.calls()[since:]
    opens = [i for i, c in enumerate(calls) if c.method == "conversations.open"]
    return bool(opens) and any(
        c.method == "chat.postMessage" and c.args.get("channel") == channel and i > opens[-1]
        for i, c in enumerate(calls)
    )


async def test_a_dm_routed_card_goes_to_the_workspaces_own_approvers_only(
    aiohttp_client, database_url, tmp_path, ops_api, fake_slack, fake_openai, db_rows
):
    settings = settings_for(tmp_path, database_url, ops_api, fake_slack, fake_openai)
    bot = await start(aiohttp_client, settings, fake_slack, fake_openai)

    since = len(fake_slack.calls())
    await ask(bot, CHANNEL_A, "restart api on staging")
    await fake_slack.wait_for(lambda: copies_out(fake_slack, CHANNEL_A, since), 15)
    # A's oncall is its own group: U0BEN (process-wide oncall, B's approver) gets nothing
    assert opened_for(fake_slack) == {"U0ANN": {TEAM_A}, "U0LEAD": {TEAM_A}}

    since = len(fake_slack.calls())
    await ask(bot, CHANNEL_B, "restart web on staging")
    await fake_slack.wait_for(lambda: copies_out(fake_slack, CHANNEL_B, since), 15)
    # B narrows process-wide oncall (U0LEAD, U0BEN) to U0BEN: U0LEAD gets no copy of B's card
    assert opened_for(fake_slack) == {
        "U0ANN": {TEAM_A}, "U0LEAD": {TEAM_A}, "U0BEN": {TEAM_B},
    }  # fmt: skip
    ben_cards = cards_in_channel(fake_slack, fake_slack.dms["U0BEN"])
    lead_cards = cards_in_channel(fake_slack, fake_slack.dms["U0LEAD"])
    assert len(ben_cards) == 1 and "web" in json.dumps(ben_cards[0]["blocks"])
    assert len(lead_cards) == 1 and "web" not in json.dumps(lead_cards[0]["blocks"])

    # their inboxes (App Home) are published in the approval's workspace, with its token
    await fake_slack.wait_for(lambda: set(OWN) <= set(fake_slack.homes) or None, 15)
    published = {(c.args["user_id"], fake_slack.team_of(c))
                 for c in fake_slack.calls("views.publish")}  # fmt: skip
    assert published == {("U0ANN", TEAM_A), ("U0LEAD", TEAM_A), ("U0BEN", TEAM_B)}
    ids = {row.arguments["name"]: row.id for row in db_rows(Approval)}
    ben_home, ann_home = (json.dumps(fake_slack.homes[u]) for u in ("U0BEN", "U0ANN"))
    assert ids["web"] in ben_home and ids["api"] not in ben_home
    assert ids["api"] in ann_home and ids["web"] not in ann_home

    # each copy decides its own workspace's call, for its own workspace's approver
    await press(bot, ben_cards[0], APPROVE_ACTION, user="U0BEN",
                channel=fake_slack.dms["U0BEN"], team=TEAM_B)  # fmt: skip
    await ops_api.wait_for(lambda: ops_api.restarts == ["web"])
    ann_card = cards_in_channel(fake_slack, fake_slack.dms["U0ANN"])[0]
    await press(bot, ann_card, APPROVE_ACTION, user="U0ANN",
                channel=fake_slack.dms["U0ANN"], team=TEAM_A)  # fmt: skip
    await bot.wait_idle()
    assert ops_api.restarts == ["web", "api"]
    decided = {row.arguments["name"]: row.decided_by for row in db_rows(Approval)}
    assert decided == {"api": ["U0ANN"], "web": ["U0BEN"]}


async def test_reminders_go_to_the_workspaces_own_approvers_only(
    aiohttp_client, database_url, tmp_path, ops_api, fake_slack, fake_openai, db_rows
):
    settings = settings_for(tmp_path, database_url, ops_api, fake_slack, fake_openai,
                            chatops_approval_remind_at=0.5)  # fmt: skip
    clock = ManualClock()
    bot = await start(aiohttp_client, settings, fake_slack, fake_openai, clock=clock)
    roots = {
        CHANNEL_A: await ask(bot, CHANNEL_A, "restart api on dev"),
        CHANNEL_B: await ask(bot, CHANNEL_B, "restart web on dev"),
    }
    for channel, root in roots.items():
        await fake_slack.wait_for(lambda c=channel, r=root: card_in_channel(fake_slack, c, r), 15)
    assert fake_slack.calls("conversations.open") == []  # the thread route: no DM yet

    clock.advance(settings.chatops_approval_timeout_s / 2 + 1)
    await fake_slack.wait_for(
        lambda: all(cards_in_channel(fake_slack, fake_slack.dms.get(u, "")) for u in OWN), 15
    )
    assert opened_for(fake_slack) == {
        "U0ANN": {TEAM_A}, "U0LEAD": {TEAM_A}, "U0BEN": {TEAM_B},
    }  # fmt: skip
    [to_ben] = cards_in_channel(fake_slack, fake_slack.dms["U0BEN"])
    [to_lead] = cards_in_channel(fake_slack, fake_slack.dms["U0LEAD"])
    assert "Reminder" in json.dumps(to_ben["blocks"]) and "web" in json.dumps(to_ben["blocks"])
    assert "web" not in json.dumps(to_lead["blocks"])  # A's reminder alone, never B's
    assert is_pending(to_ben)
    for _ in range(200):  # each reminder is recorded as a copy of its card (then it is done)
        if len([c for c in db_rows(ApprovalCard) if c.kind == "reminder"]) == len(OWN):
            break
        await asyncio.sleep(0.05)
    copies = {(c.user_id, c.workspace) for c in db_rows(ApprovalCard) if c.kind == "reminder"}
    assert copies == {("U0ANN", TEAM_A), ("U0LEAD", TEAM_A), ("U0BEN", TEAM_B)}


async def test_a_grant_by_someone_no_longer_an_approver_there_lets_nothing_through(
    aiohttp_client, database_url, tmp_path, ops_api, fake_slack, fake_openai, db_rows
):
    """B listed U0LEAD too when U0LEAD granted; after a restart on a file that lists U0BEN
    alone, the same call in the same thread is asked again (process-wide, U0LEAD is still
    in `oncall`, the manifest's approvers). A grant by A's own group member covers A's call."""
    wider = POLICY.replace("approvers: [U0BEN]", "approvers: [U0BEN, U0LEAD]")
    first = settings_for(tmp_path, database_url, ops_api, fake_slack, fake_openai, policy=wider)
    bot = await start(aiohttp_client, first, fake_slack, fake_openai)
    roots = {}
    for channel, team, granter in ((CHANNEL_A, TEAM_A, "U0ANN"), (CHANNEL_B, TEAM_B, "U0LEAD")):
        root = roots[channel] = await ask(bot, channel, "restart api on dev")
        card = await fake_slack.wait_for(
            lambda c=channel, r=root: card_in_channel(fake_slack, c, r), 15
        )
        before = len(fake_slack.calls("views.open"))
        await press(bot, card, APPROVE_THREAD_ACTION, user=granter, channel=channel, team=team)
        [opened] = await fake_slack.wait_for(
            lambda b=before: fake_slack.calls("views.open")[b:], 10
        )
        body = grant_submission(opened.args["view"], user=granter, grantees=["U0DEV"])
        await submit(bot, body, team)
        await bot.wait_idle()
    assert ops_api.restarts == ["api", "api"]
    assert sorted(g.granted_by for g in db_rows(ApprovalGrant)) == ["U0ANN", "U0LEAD"]

    # A: U0ANN is an `oncall` of A's own group, so the grant covers the next call
    await ask(bot, CHANNEL_A, "again: restart api on dev", root=roots[CHANNEL_A])
    await bot.wait_idle()
    assert ops_api.restarts == ["api"] * 3 and len(db_rows(Approval)) == 2

    await bot.client.close()  # B's file now lists U0BEN alone
    second = settings_for(tmp_path, database_url, ops_api, fake_slack, fake_openai)
    bot = await start(aiohttp_client, second, fake_slack, fake_openai, installed=True)
    await ask(bot, CHANNEL_B, "again: restart api on dev", root=roots[CHANNEL_B])
    cards = lambda: [  # noqa: E731
        m for m in fake_slack.thread_messages(CHANNEL_B, roots[CHANNEL_B])
        if m.get("blocks") and m["blocks"][0].get("type") == "header"
    ]  # fmt: skip
    await fake_slack.wait_for(lambda: len(cards()) == 2, 15)
    assert is_pending(cards()[-1])
    assert ops_api.restarts == ["api"] * 3  # U0LEAD's grant let nothing through
    pending = [row for row in db_rows(Approval) if row.status == "pending"]
    assert [(row.card_workspace, row.approvers) for row in pending] == [(TEAM_B, ["oncall"])]


async def test_an_edit_is_judged_with_the_workspaces_groups_and_approvers(
    aiohttp_client, database_url, tmp_path, ops_api, fake_slack, fake_openai, db_rows
):
    """In A, U0LEAD may approve `dev` (A's oncall) but an edit to production needs A's leads
    (U0ANN alone; U0LEAD is `leads` only process-wide): refused. In B, U0LEAD is no approver:
    the edit is refused too. Nothing ran; A's own lead's edit then runs."""
    settings = settings_for(tmp_path, database_url, ops_api, fake_slack, fake_openai)
    bot = await start(aiohttp_client, settings, fake_slack, fake_openai)

    async def edit(channel: str, root: str, user: str, **texts: str) -> Any:
        team = TEAM_OF[channel]
        card = await fake_slack.wait_for(lambda: card_in_channel(fake_slack, channel, root), 15)
        before = len(fake_slack.calls("views.open"))
        await press(bot, card, EDIT_ACTION, user=user, channel=channel, team=team)
        opened = fake_slack.calls("views.open")[before:]
        if not opened:  # refused before any form was shown
            return None
        view = opened[0].args["view"]
        return await submit(bot, submitted(view, edited(view, **texts), user=user), team)

    root_a = await ask(bot, CHANNEL_A, "restart api on dev")
    root_b = await ask(bot, CHANNEL_B, "restart web on dev")
    reply = await edit(CHANNEL_A, root_a, "U0LEAD", env="production")
    assert reply["response_action"] == "errors"
    assert "whose approvers are leads: you cannot approve it" in json.dumps(reply)
    reply = await edit(CHANNEL_B, root_b, "U0LEAD", name="db")
    assert reply is None or reply["response_action"] == "errors"
    assert "not one of this workspace's approvers" in json.dumps(
        [reply, list(fake_slack.ephemeral)]
    )
    assert ops_api.calls == []
    rows = db_rows(Approval)
    assert {(r.status, r.edited_by) for r in rows} == {("pending", "")}
    assert sorted(r.arguments["env"] for r in rows) == ["dev", "dev"]

    assert await edit(CHANNEL_A, root_a, "U0ANN", env="production") is None
    await ops_api.wait_for(lambda: ops_api.restarts == ["api"])
    [edited_row] = [r for r in db_rows(Approval) if r.edited_by]
    assert (edited_row.edited_by, edited_row.arguments["env"]) == ("U0ANN", "production")
