"""The answer streams into the Slack thread as it is written (chat.startStream / appendStream /
stopStream), then becomes the answer as Slack's plain post renders it, in the same message; a
synthesis that breaks half-way ends with the fallback in place of the partial text, never both;
a workspace without streaming gets one post, remembered (through the real app; the terminal's
broken stream is tested through `chatops chat`)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import (
    FakeOpenAI,
    Turn,
    answer,
    broken_stream,
    held_stream,
    tool_call,
)
from tests.fakes.ops_api import OpsAPI
from tests.fakes.slack_api import TEAM_ID, FakeSlack
from tests.slack.e2e import SlackBot, ops_bot, texts
from tests.slack.payloads import CHANNEL, mention

PARTIAL = "Partial synthesis that must not stay"
FALLBACK = "api status: healthy (the loop's own answer)"
# its first two chunks (8 characters each) try a broadcast and a link to one
ANSWER = (
    "<!here> [a](!channel) **api** is healthy: see [the runbook](https://runbooks.example/api)."
)


def status_then(synthesis: Turn):
    def respond(body: dict[str, Any]) -> Turn:
        if body.get("stream"):
            return synthesis
        if any(m["role"] == "tool" for m in body["messages"]):
            return answer(FALLBACK)
        return tool_call("ops__status", {"name": "api"})

    return respond


@pytest.fixture
async def bot(
    database_url, aiohttp_client, tmp_path: Path, ops_api: OpsAPI, fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
) -> SlackBot:  # fmt: skip
    return await ops_bot(
        aiohttp_client, database_url, tmp_path, ops_api.url, fake_slack, fake_openai.base_url
    )


def streamed(fake: FakeSlack, root: str) -> list[dict[str, Any]]:
    return [m for m in fake.thread_messages(CHANNEL, root) if "streaming" in m]


async def test_the_answer_streams_as_it_is_written_then_is_the_answer_in_place(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    fake_openai.respond_with(status_then(held_stream(ANSWER, after=2)))
    event = mention("is the api healthy?", user="U0DEV")
    root = event["event"]["ts"]
    assert await bot.send(event) == 200
    # the model is still writing: its first words are already in the thread
    live = await fake_slack.wait_for(lambda: streamed(fake_slack, root), 15)
    assert live[0]["streaming"]  # two chunks so far, made inert: no broadcast, no link
    assert live[0]["text"] == "&lt;!here&gt; [a]\\(!cha"
    [start] = fake_slack.calls("chat.startStream")
    assert start.args["thread_ts"] == root and start.args["recipient_user_id"] == "U0DEV"
    assert start.args["recipient_team_id"] == TEAM_ID
    fake_openai.release_stream()
    await bot.wait_idle()

    [message] = streamed(fake_slack, root)
    assert not message["streaming"]
    [stop] = fake_slack.calls("chat.stopStream")
    edits = [c for c in fake_slack.calls("chat.update") if c.args["ts"] == message["ts"]]
    assert stop.args["ts"] == message["ts"] and len(edits) == 1  # replaced in place, once
    kinds = [b["type"] for b in message["blocks"]]
    assert kinds == ["section", "context_actions"]  # the answer as posted, then the thumbs
    assert "<https://runbooks.example/api|the runbook>" in message["blocks"][0]["text"]["text"]
    sent = "".join(c.args.get("markdown_text") or "" for c in fake_slack.calls())
    assert "<!" not in sent and "](" not in sent  # nothing streamed could broadcast or link
    assert "<!" not in json.dumps(message)  # nor can the answer it became
    assert texts(fake_slack, root)[0].startswith(":white_check_mark: Done")


async def test_slack_thread_gets_the_fallback_and_no_partial_text(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    """The synthesis breaks after its first words were streamed: the same message ends as the
    loop's own answer; the partial text is in no message of the thread."""
    fake_openai.respond_with(status_then(broken_stream(PARTIAL + " on screen.", after=2)))
    event = mention("is the api healthy?", user="U0DEV")
    root = event["event"]["ts"]
    assert await bot.send(event) == 200
    await bot.wait_idle()
    assert len(fake_openai.streamed_requests()) == 1  # the synthesis was tried, and broke
    [start] = fake_slack.calls("chat.startStream")
    assert PARTIAL[:8] in start.args["markdown_text"]  # it was shown while it streamed ...
    thread = fake_slack.thread_messages(CHANNEL, root)
    assert PARTIAL[:8] not in json.dumps(thread)  # ... and is gone: replaced, not appended to
    answers = [m for m in thread if FALLBACK in m["text"]]
    assert len(answers) == 1 and answers[0]["text"].strip() == FALLBACK
    assert "streaming" in answers[0]  # the streamed message itself became the answer
    assert texts(fake_slack, root)[0].startswith(":white_check_mark: Done")


@pytest.mark.parametrize("error", ["not_allowed", "missing_scope"])
async def test_a_workspace_without_streaming_gets_one_post_remembered_with_one_log_line(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, caplog, error: str
) -> None:
    fake_slack.turn_off("chat.startStream", error)
    fake_openai.respond_with(status_then(answer("All quiet.")))
    caplog.set_level(logging.WARNING, logger="bot.surfaces.slack.features")
    roots = []
    for _ in range(2):
        event = mention("how are things?", user="U0DEV")
        roots.append(event["event"]["ts"])
        assert await bot.send(event) == 200
        await bot.wait_idle()
    assert len(fake_slack.calls("chat.startStream")) == 1  # tried once for the workspace
    for root in roots:
        [status, reply] = fake_slack.thread_messages(CHANNEL, root)
        assert reply["text"] == "All quiet." and reply["blocks"][-1]["type"] == "context_actions"
    lines = [r for r in caplog.records if "answer streaming" in r.getMessage()]
    assert len(lines) == 1 and error in lines[0].getMessage()


async def test_a_stream_slack_stopped_ends_as_the_answer_all_the_same(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    """Someone pressed Slack's own stop on the stream (appends are refused, stopped_by_user)
    while the bot keeps writing: the answer still lands, once, in that message."""
    fake_openai.respond_with(status_then(held_stream(ANSWER, after=1)))
    event = mention("is the api healthy?", user="U0DEV")
    root = event["event"]["ts"]
    assert await bot.send(event) == 200
    [live] = await fake_slack.wait_for(lambda: streamed(fake_slack, root), 15)
    fake_slack.user_stops(live["ts"])
    fake_openai.release_stream()
    await bot.wait_idle()
    [message] = streamed(fake_slack, root)
    assert "*api* is healthy" in message["blocks"][0]["text"]["text"]
    assert len(fake_slack.thread_messages(CHANNEL, root)) == 2  # status and the answer


async def test_an_answer_longer_than_one_stream_is_posted_in_pieces_in_its_place(
    bot: SlackBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    long = "\n\n".join(f"Paragraph {i:03d}: " + "lorem ipsum dolor " * 26 for i in range(40))
    fake_openai.respond_with(status_then(answer(long)))
    event = mention("summarise", user="U0DEV")
    root = event["event"]["ts"]
    assert await bot.send(event) == 200
    await bot.wait_idle()
    assert fake_slack.calls("chat.startStream") and fake_slack.deleted  # streamed, then replaced
    thread = fake_slack.thread_messages(CHANNEL, root)
    assert not any(m.get("streaming") for m in thread)
    shown = "\n".join(b["text"]["text"] for m in thread[1:] for b in m["blocks"]
                      if b["type"] == "section")  # fmt: skip
    numbers = [line.split(":")[0] for line in shown.split("\n") if line.startswith("Paragraph")]
    assert numbers == [f"Paragraph {i:03d}" for i in range(40)]
    assert thread[-1]["blocks"][-1]["type"] == "context_actions"  # the thumbs under the last
