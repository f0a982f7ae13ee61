"""A surface that takes every step (the web console) is not held to the run manager's one edit a
second, which exists for the chat platforms' rate limits: its status message changes as each
step happens, here under an interval of an hour that would otherwise hold every edit back."""

from __future__ import annotations

from tests.fakes.openai_server import answer, tool_call
from tests.runs.conftest import Harness, wait_until_waiting

AN_HOUR = 3600.0


async def test_a_surface_that_takes_every_step_gets_each_edit_at_once(harness: Harness) -> None:
    harness.fake.script(
        tool_call("ops__restart", {"service": "api"}), answer("restarted"), answer("Restarted.")
    )
    app = await harness.app(status_interval_s=AN_HOUR)
    app.surface.status_edit_interval_s = 0.0
    await app.manager.dispatch(harness.message("restart api"))
    card = await app.surface.wait_for_card()
    await wait_until_waiting(app)  # an hour early, were the edits coalesced
    decided = await app.broker.decide(card.approval_id, "U_LEAD", "approve", platform="test")
    assert decided.status == "decided"
    assert await app.surface.wait_for_answer() == "Restarted."
    await app.manager.wait_idle(10)
    views = [call.payload for call in app.surface.of("update_status")]
    headlines = [view.headline for view in views]
    assert "Waiting for approval" in headlines and headlines[-1] == "Done"
    after = headlines[headlines.index("Waiting for approval") :]
    assert "Working on it" in after  # the approval's end shown too, before the answer
    await app.close()
