"""PacedStream (bot/chat/streaming.py) on a recording transport: the first text goes at
once, later deltas wait for the interval and go together; a reset stops sending and hands the
fallback to `finish` as not intact; text past the transport's capacity waits for `finish`."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.chat.streaming import PacedStream
from bot.chat.threads import MessageRef, ThreadRef
from bot.chat.views import AnswerFile

THREAD = ThreadRef("test", "T1", "C1", "1.1")


@dataclass
class Transport:
    capacity: int = 1000
    sent: list[tuple[str, str]] = field(default_factory=list)
    finished: list[dict[str, object]] = field(default_factory=list)
    abandoned: list[str] = field(default_factory=list)
    fail: bool = False
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def send(self, shown: str, new: str) -> None:
        self.sent.append((shown, new))
        self.arrived.set()
        if self.fail:
            raise RuntimeError("the platform refused")

    async def finish(
        self, answer: str, *, streamed: str, intact: bool, files: Sequence[AnswerFile],
        feedback_run: str,
    ) -> MessageRef:  # fmt: skip
        self.finished.append({"answer": answer, "streamed": streamed, "intact": intact,
                              "feedback_run": feedback_run})  # fmt: skip
        return MessageRef(THREAD, "m1")

    async def abandon(self, streamed: str, note: str) -> None:
        self.abandoned.append(streamed + note)


async def test_the_first_text_goes_at_once_and_the_rest_waits_its_turn() -> None:
    transport = Transport()
    stream = PacedStream(transport, interval_s=3600)  # a second update would wait an hour
    stream.push("Hel")
    await asyncio.wait_for(transport.arrived.wait(), 10)
    stream.push("lo, ")
    stream.push("world")
    ref = await stream.finish("Hello, world", feedback_run="r1")
    assert transport.sent == [("Hel", "Hel")]  # one update in the interval, never two
    assert transport.finished == [
        {"answer": "Hello, world", "streamed": "Hel", "intact": True, "feedback_run": "r1"}
    ]
    assert ref.message_id == "m1"


async def test_deltas_that_arrive_meanwhile_go_in_one_update() -> None:
    transport = Transport()
    stream = PacedStream(transport, interval_s=0.0)
    stream.push("a")
    await asyncio.wait_for(transport.arrived.wait(), 10)
    transport.arrived.clear()
    for piece in "bcd":  # all before the flusher runs again
        stream.push(piece)
    await asyncio.wait_for(transport.arrived.wait(), 10)
    await stream.finish("abcd")
    assert transport.sent == [("a", "a"), ("abcd", "bcd")]


async def test_a_reset_stops_sending_and_the_fallback_is_not_intact() -> None:
    transport = Transport()
    stream = PacedStream(transport, interval_s=3600)
    stream.push("Partial")
    await asyncio.wait_for(transport.arrived.wait(), 10)
    stream.reset()
    stream.push(" more")  # after a reset nothing more is streamed
    await stream.finish("The fallback")
    assert transport.sent == [("Partial", "Partial")]
    assert transport.finished[0]["intact"] is False


async def test_a_failed_send_leaves_the_answer_to_finish() -> None:
    transport = Transport(fail=True)
    stream = PacedStream(transport, interval_s=0.0)
    stream.push("first")
    await asyncio.wait_for(transport.arrived.wait(), 10)
    stream.push(" second")
    await stream.finish("first second")
    assert transport.sent == [("first", "first")]
    assert transport.finished[0] == {"answer": "first second", "streamed": "",
                                     "intact": False, "feedback_run": ""}  # fmt: skip


async def test_text_past_the_capacity_waits_for_finish() -> None:
    transport = Transport(capacity=5)
    stream = PacedStream(transport, interval_s=0.0)
    stream.push("abcdefgh")
    await asyncio.wait_for(transport.arrived.wait(), 10)
    await stream.finish("abcdefgh")
    assert transport.sent == [("abcde", "abcde")]
    assert transport.finished[0]["streamed"] == "abcde"


async def test_abandon_ends_a_started_stream_only() -> None:
    quiet, started = Transport(), Transport()
    await PacedStream(quiet).abandon(" (stopped)")
    stream = PacedStream(started, interval_s=3600)
    stream.push("Half")
    await asyncio.wait_for(started.arrived.wait(), 10)
    await stream.abandon(" (stopped)")
    assert quiet.abandoned == [] and started.abandoned == ["Half (stopped)"]
