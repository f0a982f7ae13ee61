"""Traces from a real `chatops serve`: `OTEL_EXPORTER_OTLP_ENDPOINT` points at a fake collector
on 127.0.0.1, which decodes the OTLP/HTTP protobuf POSTs to /v1/traces. One Slack run that waits
for an approval: its spans arrive (when the process stops, at the latest: it flushes them), in
one trace, and every JSON log line of the run carries that trace's id.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI, restart_then_answer
from tests.fakes.otel_collector import FakeCollector
from tests.fakes.serving import started
from tests.fakes.slack_api import FakeSlack
from tests.server.test_logs import env_for, one_approved_run


async def test_serve_sends_the_runs_spans_to_the_otlp_endpoint(
    tmp_path: Path, ops_api: OpsAPI, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    fake_openai.respond_with(restart_then_answer)
    async with started(FakeCollector()) as collector:
        env = env_for(
            tmp_path, ops_api, fake_slack, fake_openai, chatops_log_format="json",
            otel_exporter_otlp_endpoint=collector.url, otel_service_name="chatops-test",
            otel_resource_attributes="deployment.environment=ci,team=ops",
        )  # fmt: skip
        lines = await one_approved_run(tmp_path, env, fake_slack)  # stopped: spans flushed
        run = await collector.wait_for("run")

    assert all(kind == "application/x-protobuf" for kind in collector.content_types)
    names = [span.name for span in collector.spans]
    for name in ("run", "model.chat", "model.answer", "approval.wait", "tool.call"):
        assert name in names, name
    assert {span.trace_id for span in collector.spans} == {run.trace_id}
    assert run.parent_span_id == ""  # the root
    assert run.attributes["chatops.platform"] == "slack"
    assert run.attributes["chatops.run.outcome"] == "done"
    tool = next(span for span in collector.spans if span.name == "tool.call")
    assert tool.parent_span_id == run.span_id
    assert tool.attributes["chatops.tool.outcome"] == "ok"
    assert run.resource["service.name"] == "chatops-test"
    assert run.resource["deployment.environment"] == "ci" and run.resource["team"] == "ops"

    entries = [json.loads(line) for line in lines if line.strip()]
    life = [entry for entry in entries if entry.get("run_id")]
    missing = [e["message"] for e in life if e.get("trace_id") != run.trace_id]
    assert life and not missing, missing
    assert "xoxb-" not in "".join(lines)


async def test_an_unreachable_collector_costs_the_run_nothing(
    tmp_path: Path, ops_api: OpsAPI, fake_slack: FakeSlack, fake_openai: FakeOpenAI
) -> None:
    """The collector is down (nothing listens on its port): the run is answered as always and
    the process stops cleanly; the exporter's failure stays in the exporter's own log."""
    fake_openai.respond_with(restart_then_answer)
    async with started(FakeCollector()) as gone:
        url = gone.url
    env = env_for(tmp_path, ops_api, fake_slack, fake_openai, otel_exporter_otlp_endpoint=url)
    lines = await one_approved_run(tmp_path, env, fake_slack)
    assert ops_api.restarts == ["api"]
    assert not any("Traceback" in line for line in lines)
