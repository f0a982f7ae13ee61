"""The seats of `bot.runs.admission` on their own: places in line, leaving, lending a seat.
(Through Slack: tests/slack/test_admission.py.)"""

from __future__ import annotations

import asyncio

from bot.runs.admission import Admission


async def test_seats_go_first_come_first_served_and_places_are_counted() -> None:
    admission = Admission(2)
    seats = [admission.ask() for _ in range(5)]
    assert [s.queued for s in seats] == [False, False, True, True, True]
    assert [s.ahead for s in seats[2:]] == [0, 1, 2]
    assert (admission.working, admission.queued) == (2, 3)
    seats[0].leave()
    assert [s.queued for s in seats[2:]] == [False, True, True]
    seats[0].leave()  # again: nothing more is freed
    assert (admission.working, admission.queued) == (2, 2)
    await asyncio.wait_for(seats[2].wait(), 1)


async def test_leaving_the_line_gives_the_place_to_whoever_is_behind() -> None:
    admission = Admission(1)
    working, gone, next_one = admission.ask(), admission.ask(), admission.ask()
    gone.leave()  # e.g. stopped while queued
    assert admission.queued == 1
    working.leave()
    assert not next_one.queued and admission.working == 1
    next_one.leave()
    assert (admission.working, admission.queued) == (0, 0)


async def test_a_seat_is_lent_while_its_run_waits_for_a_person() -> None:
    admission = Admission(1)
    waiting, behind = admission.ask(), admission.ask()
    waiting.step_out()  # an approval card is out: the next run works meanwhile
    assert not behind.queued and admission.working == 1
    waiting.step_in()  # the decision came: back at once, over the limit if need be
    assert admission.working == 2
    waiting.step_out()  # two approvals at once: out once, in after both
    waiting.step_out()
    waiting.step_in()
    assert admission.working == 1
    waiting.step_in()
    assert admission.working == 2
    waiting.leave()
    behind.leave()
    assert (admission.working, admission.queued) == (0, 0)


async def test_a_run_ending_while_its_seat_is_lent_frees_nothing_twice() -> None:
    admission = Admission(1)
    lender, borrower, last = admission.ask(), admission.ask(), admission.ask()
    lender.step_out()
    lender.leave()  # it ended while waiting (stopped, expired)
    assert (admission.working, admission.queued) == (1, 1)
    lender.step_in()  # a late decision event changes nothing
    assert admission.working == 1
    borrower.leave()
    assert not last.queued
