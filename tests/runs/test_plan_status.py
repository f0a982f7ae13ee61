"""The status views a run hands its surface carry what a plan shows: each step's arguments and
output summarised with secrets masked (the connector's and the platform's, and secret-looking
keys), the approval's state as its own part, and the run (id, requester, title) for Stop and a
platform's session (the real agent and broker, a recording surface)."""

from __future__ import annotations

from bot.approvals.schema import ApprovalPolicy
from tests.fakes.openai_server import answer, tool_calls
from tests.runs.conftest import SECRET, Harness, wait_until_waiting


async def test_step_summaries_never_show_a_secret_and_the_approval_is_its_own_part(
    harness: Harness,
) -> None:
    harness.add_tool("ops__deploy", ApprovalPolicy(approval="required"))
    harness.fake.script(
        tool_calls(
            ("ops__status", {"service": "api", "password": "hunter2-pw", "note": f"k={SECRET}"}),
            ("ops__deploy", {"service": "api"}),
        ),
        answer("deployed"),
        answer("Deployed."),
    )
    app = await harness.app()
    await app.manager.dispatch(harness.message("status then deploy", user="U_DEV"))
    card = await app.surface.wait_for_card()
    await wait_until_waiting(app)
    await app.broker.decide(card.approval_id, "U_LEAD", "approve", platform="test")
    await app.surface.wait_for_answer()
    await app.manager.wait_idle(10)

    views = [c.payload for c in app.surface.of("post_status") + app.surface.of("update_status")]
    shown = repr([(s.arguments, s.output, s.detail) for v in views for s in v.steps])
    assert SECRET not in shown and "hunter2" not in shown and "[REDACTED]" in shown
    [run] = harness.runs()
    assert {(v.run_id, v.requester, v.title) for v in views} == {
        (run.id, "U_DEV", "status then deploy")
    }
    deploy = [s for v in views for s in v.steps if s.label == "ops__deploy"]
    assert "waiting" in [s.approval for s in deploy] and deploy[-1].approval == "approved"
    assert deploy[-1].arguments == "service=api" and deploy[-1].state == "done"
    status = next(s for s in views[-1].steps if s.label == "ops__status")
    assert status.approval == "" and status.output.startswith("ok")
    assert views[-1].live is False and any(v.live for v in views)
