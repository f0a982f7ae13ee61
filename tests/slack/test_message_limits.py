"""Long answers and audit reports against a fake Slack that refuses what Slack refuses
(`msg_blocks_too_long` past about 12,500 characters across a message's blocks): they are split
to fit, and when Slack refuses anyway they degrade (smaller pieces, a file, plain text) instead
of failing the run or leaving the person who asked in silence."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlmodel import Session, create_engine, select

from bot.clock import utcnow
from bot.server import RUNTIME_KEY, create_app
from bot.storage.models import CallLog, Run
from tests.fakes.openai_server import FakeOpenAI, answering
from tests.fakes.slack_api import FakeSlack
from tests.slack.e2e import SlackBot, bot_settings
from tests.slack.payloads import CHANNEL, mention, slash_command

# 50,000 characters: numbered paragraphs, so the test can tell that nothing was lost
LONG_ANSWER = "\n\n".join(f"Paragraph {i:03d}: " + "lorem ipsum dolor " * 26 for i in range(100))


@pytest.fixture
async def bot(
    database_url, aiohttp_client, tmp_path, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> SlackBot:
    (tmp_path / "manifests").mkdir()
    settings = bot_settings(database_url=database_url, manifests=tmp_path / "manifests",
                            slack=fake_slack, llm_url=fake_openai.base_url,
                            chatops_audit_viewers="U0AUDIT")  # fmt: skip
    return SlackBot(await aiohttp_client(create_app(settings)), fake_slack)


async def ask(bot: SlackBot, database_url: str) -> tuple[str, Run]:
    event = mention("summarise everything", user="U0DEV")
    assert await bot.send(event) == 200
    await bot.wait_idle()
    with Session(create_engine(database_url)) as session:
        [run] = session.exec(select(Run)).all()
    return event["event"]["ts"], run


def answer_messages(fake: FakeSlack, root: str) -> list[dict[str, Any]]:
    """The thread's messages after the status message (the bot's first reply)."""
    return fake.thread_messages(CHANNEL, root)[1:]


def sections(messages: list[dict[str, Any]]) -> list[str]:
    """The text of every section block (the last message also carries the feedback buttons)."""
    return [b["text"]["text"] for m in messages for b in m["blocks"] if b["type"] == "section"]


def paragraphs_in(text: str) -> list[str]:
    return [line.split(":")[0] for line in text.split("\n") if line.startswith("Paragraph ")]


async def test_a_50000_character_answer_is_split_under_every_limit(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, database_url: str
) -> None:
    fake_openai.respond_with(answering(LONG_ANSWER))
    root, run = await ask(bot, database_url)
    assert run.status == "done"
    messages = answer_messages(fake_slack, root)
    assert len(messages) >= 5  # 50,000 characters at under 12,000 a message
    shown = "\n".join(sections(messages))
    assert paragraphs_in(shown) == [f"Paragraph {i:03d}" for i in range(100)]
    refused = [c for c in fake_slack.calls("chat.postMessage") if "error" in str(c.status)]
    assert refused == []


async def test_a_refused_message_goes_again_in_smaller_pieces(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, database_url: str
) -> None:
    """Slack's limits are partly undocumented: when it refuses what we counted as fitting, the
    message is posted again in smaller pieces and the run still ends with its answer."""
    arm = lambda: fake_slack.fail_next("chat.postMessage", error="msg_blocks_too_long")  # noqa: E731
    fake_openai.respond_with(answering(LONG_ANSWER, on_synthesis=arm))
    root, run = await ask(bot, database_url)
    assert run.status == "done"
    shown = "\n".join(sections(answer_messages(fake_slack, root)))
    assert paragraphs_in(shown) == [f"Paragraph {i:03d}" for i in range(100)]
    assert fake_slack.files == []


async def test_when_smaller_pieces_are_refused_too_the_answer_is_a_file(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, database_url: str
) -> None:
    arm = lambda: fake_slack.fail_next("chat.postMessage", error="invalid_blocks", count=2)  # noqa: E731
    fake_openai.respond_with(answering(LONG_ANSWER, on_synthesis=arm))
    root, run = await ask(bot, database_url)
    assert run.status == "done"
    [shared] = fake_slack.files
    assert shared["content"] == LONG_ANSWER.strip()
    assert (shared["channel"], shared["thread_ts"]) == (CHANNEL, root)
    assert any("attached as a file" in m["text"] for m in answer_messages(fake_slack, root))


async def test_when_the_upload_is_refused_the_answer_is_plain_text(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, database_url: str
) -> None:
    def arm() -> None:
        fake_slack.fail_next("chat.postMessage", error="msg_blocks_too_long", count=2)
        fake_slack.fail_next("files.getUploadURLExternal", error="missing_scope")

    fake_openai.respond_with(answering(LONG_ANSWER, on_synthesis=arm))
    root, run = await ask(bot, database_url)
    assert run.status == "done"
    plain = [m for m in answer_messages(fake_slack, root) if not m["blocks"]]
    assert paragraphs_in("\n".join(m["text"] for m in plain)) == [
        f"Paragraph {i:03d}" for i in range(100)
    ]
    assert all(len(m["text"]) <= 3000 for m in plain)


def seed_mutating_calls(bot: SlackBot, count: int) -> None:
    runtime = bot.app[RUNTIME_KEY]
    now = utcnow()
    with Session(runtime.engine) as session:
        for i in range(count):
            session.add(CallLog(
                at=now - timedelta(minutes=i + 1), run_id=f"R{i}", tool_call_id=f"c{i}",
                platform="slack", channel=CHANNEL, requester="U0DEV", connector="k8s",
                action="restart_deployment", tool_name="k8s__restart_deployment", mutating=True,
                arguments={"deployment": f"checkout-service-{i}", "namespace": "production",
                           "reason": "rolling restart after the config change " * 2},
                approval_status="approved", approvers=["U0LEAD"], result_status="error",
                error=f"deployment checkout-service-{i} did not become ready in time",
            ))  # fmt: skip
        session.commit()


async def test_an_audit_report_of_many_calls_fits_and_says_how_many_are_left_out(
    bot: SlackBot, fake_slack: FakeSlack
) -> None:
    """Past about 75 calls the report used to cross Slack's block-text limit."""
    seed_mutating_calls(bot, 150)
    assert await bot.send(slash_command("7d share", user="U0AUDIT")) == 200
    [post] = fake_slack.calls("chat.postMessage")
    blocks = str(post.args["blocks"])
    assert "more mutating calls: `chatops audit --format csv` lists them all" in blocks
    assert "checkout-service-0" in blocks
    assert fake_slack.ephemeral == []
    assert len(fake_slack.messages) == 1  # accepted: posted, not refused


async def test_an_audit_report_slack_refuses_goes_as_a_file_and_a_failure_is_told(
    bot: SlackBot, fake_slack: FakeSlack
) -> None:
    seed_mutating_calls(bot, 20)
    fake_slack.fail_next("chat.postMessage", error="msg_blocks_too_long")
    assert await bot.send(slash_command("7d k8s share", user="U0AUDIT")) == 200
    [shared] = fake_slack.files
    assert shared["content"].startswith("# Audit report") and shared["channel"] == CHANNEL
    fake_slack.fail_next("chat.postMessage", error="channel_not_found")
    assert await bot.send(slash_command("7d k8s share", user="U0AUDIT")) == 200
    [note] = fake_slack.ephemeral
    assert note["user"] == "U0AUDIT" and "channel_not_found" in note["text"]
