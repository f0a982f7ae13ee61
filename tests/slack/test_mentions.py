"""Nothing the model or a tool writes can mention people on Slack, and the status message shows
the newest steps: through the real app, signed events and the fake Slack."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call, tool_calls
from tests.fakes.slack_api import FakeSlack
from tests.slack.e2e import SlackBot, ops_bot, wait_card
from tests.slack.payloads import CHANNEL, mention

INJECTED = (
    "Done. [click](!channel) [me](!here) [all](!everyone) [lead](@U0LEAD) "
    "[team](!subteam^S0TEAM) ![pic](!channel) <!channel> <@U0LEAD> <!subteam^S0TEAM|@ops> "
    "and [the runbook](https://runbooks.example/api)."
)
BROADCAST = re.compile(r"<(?:!channel|!here|!everyone|@U|@W|!subteam)")


@pytest.fixture
async def bot(
    database_url, aiohttp_client, tmp_path, ops_api, fake_slack: FakeSlack, fake_openai
) -> SlackBot:
    return await ops_bot(aiohttp_client, database_url, tmp_path, ops_api.url, fake_slack,
                         fake_openai.base_url, approvers=("U0LEAD",))  # fmt: skip


@pytest.fixture
async def classic_bot(
    database_url, aiohttp_client, tmp_path, ops_api, fake_slack: FakeSlack, fake_openai
) -> SlackBot:
    """The bot with the classic status checklist (`CHATOPS_STATUS_STYLE=classic`)."""
    return await ops_bot(aiohttp_client, database_url, tmp_path, ops_api.url, fake_slack,
                         fake_openai.base_url, approvers=("U0LEAD",),
                         chatops_status_style="classic")  # fmt: skip


async def test_an_answer_cannot_mention_or_broadcast(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(answer(INJECTED), answer(INJECTED))
    event = mention("status?", user="U0DEV")
    await bot.send(event)
    await bot.wait_idle()
    [status, reply] = fake_slack.thread_messages(CHANNEL, event["event"]["ts"])
    sent = json.dumps([reply["text"], reply["blocks"]])
    assert not BROADCAST.search(sent), sent
    assert "<https://runbooks.example/api|the runbook>" in reply["blocks"][0]["text"]["text"]
    assert "click (!channel)" in reply["blocks"][0]["text"]["text"]  # still readable


def parallel_lookups(count: int) -> Any:
    """The model: `count` lookups at once, then a restart (which waits for approval)."""

    def respond(body: dict[str, Any]) -> Turn:
        done = sum(1 for m in body["messages"] if m["role"] == "tool")
        if done == 0:
            return tool_calls(*[("ops__get_service", {"name": f"svc{i}"}) for i in range(count)])
        return tool_call("ops__restart", {"name": "api"}, id="call_restart")

    return respond


async def test_the_status_message_shows_the_newest_step_and_sums_up_the_oldest(
    classic_bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    """120 steps do not fit one section: the running one (the newest, waiting for approval) is
    what people watch, so it is shown, and the oldest are counted in a first line."""
    fake_openai.respond_with(parallel_lookups(120))
    event = mention("look at every service, then restart api", user="U0DEV")
    root = event["event"]["ts"]
    await classic_bot.send(event)
    await wait_card(fake_slack, root, pending=True)

    def waiting_status() -> str | None:
        status = fake_slack.thread_messages(CHANNEL, root)[0]
        text = "\n".join(b["text"]["text"] for b in status["blocks"] if b["type"] == "section")
        return text if ":raised_hand: `ops__restart`" in text else None

    text = await fake_slack.wait_for(waiting_status, 15)
    steps = text.split("\n", 2)[-1].split("\n")  # after the title and headline
    assert re.fullmatch(r"\u2026 \d+ earlier steps", steps[0])
    assert steps[-1].startswith(":raised_hand: `ops__restart`")
    # Slack's limit is per section block (the title's section and the steps' section apart)
    status = fake_slack.thread_messages(CHANNEL, root)[0]
    assert all(len(b["text"]["text"]) <= 3000 for b in status["blocks"] if b["type"] == "section")


async def test_the_plan_keeps_the_newest_tasks_and_counts_the_earlier_ones(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    """The same 120 steps as a plan: the newest tasks (the approval wait last but one, in
    progress, then the restart it gates, pending) and the plan's title counts the rest."""
    fake_openai.respond_with(parallel_lookups(120))
    event = mention("look at every service, then restart api", user="U0DEV")
    root = event["event"]["ts"]
    await bot.send(event)
    await wait_card(fake_slack, root, pending=True)

    def waiting_plan() -> dict[str, Any] | None:
        status = fake_slack.thread_messages(CHANNEL, root)[0]
        plan = next((b for b in status["blocks"] if b["type"] == "plan"), None)
        titles = [t["title"] for t in (plan or {}).get("tasks") or []]
        # the restart's step is shown as soon as it is planned; its approval task follows in a
        # later (throttled) edit, which may land after the card is posted
        return plan if titles[-2:] == ["Approval for ops__restart", "ops__restart"] else None

    plan = await fake_slack.wait_for(waiting_plan, 15)
    assert re.search(r"\(\u2026 \d+ earlier\)", plan["title"])
    approval, restart = plan["tasks"][-2:]
    assert (approval["title"], approval["status"]) == ("Approval for ops__restart", "in_progress")
    assert restart["status"] == "pending"
    assert {t["status"] for t in plan["tasks"][:-2]} <= {"complete", "error"}  # some: rate limit
    assert len(plan["tasks"]) <= 20


async def test_card_arguments_show_non_ascii_text_as_written(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    """`json.dumps` escapes non-ASCII by default: an approver would read `\\u65e5\\u672c`."""
    fake_openai.script(tool_call("ops__restart", {"name": "api-日本-café"}))
    event = mention("restart api-日本-café", user="U0DEV")
    await bot.send(event)
    card = await wait_card(fake_slack, event["event"]["ts"], pending=True)
    shown = json.dumps(card["blocks"], ensure_ascii=False)
    assert "api-日本-café" in shown and "\\\\u65e5" not in shown


async def test_a_long_reason_full_of_entities_is_never_cut_mid_entity(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    """The agent's reason on the card: escaped after it was cut, `&` became `&amp;` and the
    section limit then cut in the middle of one (`&am`). Now it is shown as plain text."""
    reason = "R&D <ops> & " * 600  # 7,200 characters, each `&`/`<`/`>` 4-5 once escaped
    from dataclasses import replace

    turn = tool_call("ops__restart", {"name": "api"})
    fake_openai.script(replace(turn, content=reason))
    event = mention("restart api", user="U0DEV")
    await bot.send(event)
    card = await wait_card(fake_slack, event["event"]["ts"], pending=True)
    shown = json.dumps(card["blocks"], ensure_ascii=False)
    assert "R&D <ops> & R&D" in shown  # as written: no entity to cut in half
    assert "&amp" not in shown and "&lt" not in shown
