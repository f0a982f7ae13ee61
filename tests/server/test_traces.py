"""Traces: one per run, with spans for its model calls, tool call and approval wait; the same trace
after a restart; nothing at all unless the `OTEL_*` settings switch them on.

The in-process tests give `create_app` an in-memory exporter: the one argument the runtime takes
in place of its OTLP/HTTP exporter, behind the same provider and batch processor. Closing the app
flushes the spans (the runtime shuts its provider down).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlmodel import Session, select

from bot.observability.trace_config import TraceConfig, trace_id_of
from bot.observability.traced_llm import TracedLLM
from bot.observability.tracing import (
    ACTION,
    CONNECTOR,
    CONVERSATION_ID,
    DECISION,
    INPUT_TOKENS,
    MODEL,
    OUTPUT_TOKENS,
    PLATFORM,
    RUN_ID,
    RUN_OUTCOME,
    RUN_RESUMED,
    SPAN_ANSWER,
    SPAN_APPROVAL,
    SPAN_MODEL,
    SPAN_RUN,
    SPAN_TOOL,
    TOOL_OUTCOME,
    Tracing,
)
from bot.server import RUNTIME_KEY, create_app
from bot.storage.models import Run
from tests.fakes.openai_server import FakeOpenAI, Turn, answer, tool_call
from tests.fakes.ops_api import OpsAPI
from tests.server.conftest import ConsoleClient, llm_settings

QUERY = "restart the api service, ticket QX-TEXT-5521"  # what a person wrote: in no span
ARGUMENT = "api-ARG-7781"  # the tool's argument: in no span


def _runs(session: Session) -> list[Run]:
    return list(session.exec(select(Run)).all())


def restart_with_marked_argument(body: dict[str, Any]) -> Turn:
    """The model restarts a service whose name is a marker, then answers; synthesis streams."""
    if body.get("stream"):
        return answer("Restarted.")
    if body["messages"][-1]["role"] == "tool":
        return answer("Done.")
    return tool_call("ops__restart", {"name": ARGUMENT}, id="call_restart")


def _is(kind: str, state: str | None = None) -> Any:
    return lambda item: (
        item["kind"] == kind and (state is None or item["data"].get("state") == state)
    )


async def _open(settings: Any, exporter: InMemorySpanExporter) -> tuple[TestClient, ConsoleClient]:
    client = TestClient(TestServer(create_app(settings, span_exporter=exporter)))
    await client.start_server()
    console = ConsoleClient(client)
    await console.start()
    return client, console


async def _close(client: TestClient, console: ConsoleClient) -> list[Run]:
    """Let the run finish, then close the app (its provider flushes every span); the run rows
    as they were at the end."""
    runtime = client.app[RUNTIME_KEY]
    await runtime.run_manager.wait_idle(30)
    runs = await runtime.db.run(_runs)
    await console.close()
    await client.close()
    return runs


def _named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def _every_value(spans: Sequence[ReadableSpan]) -> str:
    """Every attribute and resource value of every span, as one text to search."""
    values: list[str] = []
    for span in spans:
        values += [str(v) for v in (span.attributes or {}).values()]
        values += [str(v) for v in span.resource.attributes.values()]
        values += [str(v) for event in span.events for v in (event.attributes or {}).values()]
    return "\n".join(values)


def _traced(make_settings, manifests_dir, fake_openai: FakeOpenAI, **extra: Any) -> Any:
    return make_settings(
        chatops_manifests_dir=manifests_dir, otel_traces_exporter="otlp",
        **llm_settings(fake_openai), **extra,
    )  # fmt: skip


async def test_a_run_is_one_trace_of_model_tool_and_approval_spans(
    make_settings, manifests_dir, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    fake_openai.respond_with(restart_with_marked_argument)
    settings = _traced(make_settings, manifests_dir, fake_openai)
    exporter = InMemorySpanExporter()
    client, console = await _open(settings, exporter)
    runtime = client.app[RUNTIME_KEY]
    assert runtime.tracing.enabled and isinstance(runtime.agent.llm, TracedLLM)
    sent = await (await console.send(QUERY, user="alice")).json()
    card = await console.wait_item(_is("approval", "pending"))
    assert (await console.decide(card["data"]["approval_id"], "approve", user="bob")).status == 200
    await console.wait_item(_is("answer"))
    (stored,) = await _close(client, console)
    assert ops_api.restarts == [ARGUMENT]

    spans = exporter.get_finished_spans()
    assert len({span.context.trace_id for span in spans}) == 1  # one trace
    (run,) = _named(spans, SPAN_RUN)
    assert run.parent is None  # the root
    assert run.attributes[RUN_OUTCOME] == "done"
    assert run.attributes[PLATFORM] == "console"
    assert run.attributes[CONVERSATION_ID] > 0
    assert run.attributes[RUN_RESUMED] is False
    assert run.attributes[RUN_ID] == stored.id
    # the run's W3C trace context is stored, for whoever continues the run
    ids = f"00-{run.context.trace_id:032x}-{run.context.span_id:016x}-"
    assert stored.trace_parent is not None and stored.trace_parent.startswith(ids)
    children = [span for span in spans if span is not run]
    assert children and all(span.parent.span_id == run.context.span_id for span in children)

    models = _named(spans, SPAN_MODEL)
    assert len(models) >= 2  # the call that asks for the tool, the one after its result
    assert all(m.attributes[MODEL] == "fake-model" for m in models)
    assert all(m.attributes[INPUT_TOKENS] > 0 and OUTPUT_TOKENS in m.attributes for m in models)
    (synthesis,) = _named(spans, SPAN_ANSWER)
    assert synthesis.attributes[MODEL] == "fake-model"

    (wait,) = _named(spans, SPAN_APPROVAL)
    assert (wait.attributes[CONNECTOR], wait.attributes[ACTION]) == ("ops", "restart")
    assert wait.attributes[DECISION] == "approved"
    (tool,) = _named(spans, SPAN_TOOL)
    assert (tool.attributes[CONNECTOR], tool.attributes[ACTION]) == ("ops", "restart")
    assert tool.attributes[TOOL_OUTCOME] == "ok"
    assert wait.end_time <= tool.start_time  # the wait, then the call

    # what a person wrote, the tool's arguments and the key are in no attribute
    text = _every_value(spans)
    secret = settings.openai_api_key.get_secret_value()
    for leak in ("QX-TEXT-5521", ARGUMENT, secret, "bob", "alice", sent["thread"]):
        assert leak not in text, leak


async def test_a_run_resumed_after_a_restart_continues_its_trace(
    make_settings, manifests_dir, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    fake_openai.respond_with(restart_with_marked_argument)
    settings = _traced(make_settings, manifests_dir, fake_openai)

    before = InMemorySpanExporter()
    client, console = await _open(settings, before)
    assert (await console.send(QUERY)).status == 202
    card = await console.wait_item(_is("approval", "pending"))
    await console.close()
    await client.close()  # the whole process goes, the run waiting for its approval
    (first,) = _named(before.get_finished_spans(), SPAN_RUN)
    assert first.attributes[RUN_OUTCOME] == "interrupted"  # let go unfinished, not ended
    (waited,) = _named(before.get_finished_spans(), SPAN_APPROVAL)
    assert waited.attributes[DECISION] == "pending"

    after = InMemorySpanExporter()
    client, console = await _open(settings, after)  # same database: it resumes the run
    assert (await console.decide(card["data"]["approval_id"], "approve", user="bob")).status == 200
    await console.wait_item(_is("answer"))
    await _close(client, console)

    spans = after.get_finished_spans()
    (second,) = _named(spans, SPAN_RUN)
    assert {span.context.trace_id for span in spans} == {first.context.trace_id}
    assert second.parent is not None and second.parent.span_id == first.context.span_id
    assert second.attributes[RUN_RESUMED] is True
    assert second.attributes[RUN_ID] == first.attributes[RUN_ID]
    assert second.attributes[RUN_OUTCOME] == "done"
    (tool,) = _named(spans, SPAN_TOOL)
    assert tool.parent.span_id == second.context.span_id and ops_api.restarts == [ARGUMENT]


async def test_traces_are_off_by_default(
    make_settings, manifests_dir, fake_openai: FakeOpenAI, ops_api: OpsAPI
) -> None:
    """No `OTEL_*` setting: no provider, no wrapper, no span hook, nothing exported or stored."""
    fake_openai.respond_with(restart_with_marked_argument)
    settings = make_settings(chatops_manifests_dir=manifests_dir, **llm_settings(fake_openai))
    exporter = InMemorySpanExporter()
    client, console = await _open(settings, exporter)
    runtime = client.app[RUNTIME_KEY]
    assert not runtime.tracing.enabled
    assert not isinstance(runtime.agent.llm, TracedLLM)
    assert "trace_tool" not in runtime.hooks.post_hook_names()
    await console.send(QUERY)
    card = await console.wait_item(_is("approval", "pending"))
    await console.decide(card["data"]["approval_id"], "approve", user="bob")
    await console.wait_item(_is("answer"))
    (stored,) = await _close(client, console)
    assert exporter.get_finished_spans() == ()
    assert ops_api.restarts == [ARGUMENT]
    assert stored.status == "done" and stored.trace_parent is None


async def test_disabled_wins_over_an_endpoint(make_settings) -> None:
    settings = make_settings(
        otel_exporter_otlp_endpoint="http://127.0.0.1:9", otel_sdk_disabled=True
    )
    assert not settings.trace_config.enabled
    assert not make_settings(
        otel_exporter_otlp_endpoint="http://127.0.0.1:9", otel_traces_exporter="none"
    ).trace_config.enabled
    on = make_settings(otel_exporter_otlp_endpoint="http://collector:4318/").trace_config
    assert on.enabled and on.endpoint == "http://collector:4318/v1/traces"
    assert on.service_name == "chatops"


def test_the_resource_and_headers_come_from_the_otel_settings(make_settings) -> None:
    config = make_settings(
        otel_traces_exporter="OTLP",
        otel_resource_attributes="service.name=from-attrs,deployment.environment=prod%20eu",
        otel_exporter_otlp_headers="authorization=Bearer%20tok-1,x-tenant=ops",
        otel_exporter_otlp_traces_endpoint="https://otel.example/custom/traces",
    ).trace_config
    assert config.enabled and config.endpoint == "https://otel.example/custom/traces"
    assert config.service_name == "from-attrs"  # OTEL_SERVICE_NAME not set: the attribute's
    assert config.resource_attributes["deployment.environment"] == "prod eu"
    assert config.headers == {"authorization": "Bearer tok-1", "x-tenant": "ops"}
    assert make_settings(
        otel_traces_exporter="otlp", otel_service_name="named",
        otel_resource_attributes="service.name=from-attrs",
    ).trace_config.service_name == "named"  # fmt: skip
    headers = make_settings(otel_exporter_otlp_headers="authorization=Bearer%20tok-1")
    assert "authorization=Bearer%20tok-1" in headers.secret_values()  # masked like any secret
    default = make_settings(otel_traces_exporter="otlp").trace_config
    assert default.endpoint == "http://localhost:4318/v1/traces"


def test_a_decision_line_finds_the_trace_id_in_a_stored_traceparent() -> None:
    stored = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert trace_id_of(stored) == "4bf92f3577b34da6a3ce929d0e0e4736"
    for bad in (None, "", "garbage", "00-" + "0" * 32 + "-00f067aa0ba902b7-01",
                "00-zzf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"):  # fmt: skip
        assert trace_id_of(bad) is None


def test_a_corrupt_stored_trace_context_starts_a_new_trace() -> None:
    """A `trace_parent` that is not a traceparent (a hand-edited row): a new trace, no error."""
    exporter = InMemorySpanExporter()
    tracing = Tracing.start(TraceConfig(enabled=True), exporter=exporter)
    for stored in ("garbage", "00-zz-yy-01", "00-" + "0" * 32 + "-" + "0" * 16 + "-01"):
        with tracing.run_span(
            run_id="r", conversation_id=1, platform="console", trace_parent=stored
        ) as span:
            assert span.get_span_context().is_valid
    tracing.shutdown()
    runs = exporter.get_finished_spans()
    assert len(runs) == 3 and all(span.parent is None for span in runs)
    assert all(span.attributes[RUN_RESUMED] is False for span in runs)
