"""Traces (OpenTelemetry): one trace per run, a span for each model call, tool call and approval
wait, sent over OTLP/HTTP; off unless the standard `OTEL_*` variables switch it on.

Off (the default), every tracer is OpenTelemetry's no-op one: nothing is recorded, stored or
sent, and the SDK is never imported. On, the runtime owns its `TracerProvider` (never the
process-global one) with a batch processor in front of the exporter; `Tracing.shutdown` flushes
it when the runtime closes.

A run's root span is "run"; its W3C `traceparent` is stored on the run row, so a run resumed
after a restart, or adopted by another process, opens its next "run" span as a child of the
first one: the trace id stays the same. Attributes name ids, models, connectors, actions,
outcomes and counts only: never what a person wrote, a tool's arguments or a secret (exception
events are not recorded either: their text may quote any of those).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NoOpTracer, Span, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from bot.observability.trace_config import TraceConfig

if TYPE_CHECKING:
    from collections.abc import Sequence

    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

# span names (a contract with the dashboards built on them: docs/operations.md lists them)
SPAN_RUN = "run"
SPAN_MODEL = "model.chat"  # one completion the engine asked for (steps, selection, compaction)
SPAN_ANSWER = "model.answer"  # the streamed answer synthesis
SPAN_TOOL = "tool.call"
SPAN_APPROVAL = "approval.wait"

# attribute names
RUN_ID = "chatops.run.id"
CONVERSATION_ID = "chatops.conversation.id"
PLATFORM = "chatops.platform"
RUN_OUTCOME = "chatops.run.outcome"
RUN_RESUMED = "chatops.run.resumed"
MODEL = "gen_ai.request.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CONNECTOR = "chatops.tool.connector"
ACTION = "chatops.tool.action"
TOOL_OUTCOME = "chatops.tool.outcome"
TOOL_DURATION_MS = "chatops.tool.duration_ms"
APPROVAL_ID = "chatops.approval.id"
APPROVAL_RULE = "chatops.approval.rule"
DECISION = "chatops.approval.decision"
ERROR_TYPE = "error.type"

# what a "run" span says until the run ends here: this process let it go unfinished (shut
# down, lost its lease) and whoever continues it opens the next "run" span of the trace
LEFT_UNFINISHED = "interrupted"
# how long closing waits for the last spans to go out; past it (the collector is down) the
# exporter stops retrying and they are dropped: a stop never waits out the exporter's retries
SHUTDOWN_WAIT_S = 3.0
_PROPAGATOR = TraceContextTextMapPropagator()
_TRACEPARENT = "traceparent"


class Tracing:
    """The process's tracer and, when tracing is on, the provider it owns (flushed at close)."""

    def __init__(
        self,
        tracer: Tracer,
        provider: TracerProvider | None = None,
        exporter: _Abortable | None = None,
    ) -> None:
        self._tracer = tracer
        self._provider = provider
        self._exporter = exporter

    @classmethod
    def off(cls) -> Tracing:
        """No-op spans: nothing recorded, nothing sent."""
        return cls(NoOpTracer())

    @classmethod
    def start(cls, config: TraceConfig, *, exporter: SpanExporter | None = None) -> Tracing:
        """Tracing as `config` says; `exporter`: where spans go instead of OTLP/HTTP to
        `config.endpoint` (a test's in-memory exporter), used only when `config` is on."""
        if not config.enabled:
            return cls.off()
        # the SDK only when tracing is on: a process without traces never imports it
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=config.endpoint, headers=dict(config.headers))
        attributes = {**config.resource_attributes, SERVICE_NAME: config.service_name}
        # shut down by the runtime, never at interpreter exit (no global state, no second try)
        provider = TracerProvider(resource=Resource.create(attributes), shutdown_on_exit=False)
        abortable = _Abortable(exporter)
        provider.add_span_processor(BatchSpanProcessor(abortable))
        return cls(provider.get_tracer("chatops"), provider, abortable)

    @property
    def enabled(self) -> bool:
        return self._provider is not None

    @property
    def tracer(self) -> Tracer:
        """What the model, tool and approval spans are made with (no-op when off)."""
        return self._tracer

    @contextlib.contextmanager
    def run_span(
        self, *, run_id: str, conversation_id: int, platform: str, trace_parent: str | None
    ) -> Iterator[Span]:
        """The "run" span, current for the block: a new trace, or, given the `traceparent` a
        run stored (resumed, adopted), a child of that run's first span in the same trace."""
        parent = _PROPAGATOR.extract({_TRACEPARENT: trace_parent}) if trace_parent else Context()
        attributes: dict[str, str | int | bool] = {
            RUN_ID: run_id,
            CONVERSATION_ID: conversation_id,
            PLATFORM: platform,
            RUN_RESUMED: trace.get_current_span(parent).get_span_context().is_valid,
            RUN_OUTCOME: LEFT_UNFINISHED,
        }
        span = self._tracer.start_span(
            SPAN_RUN, context=parent, attributes=attributes,
            record_exception=False, set_status_on_exception=False,
        )  # fmt: skip
        with trace.use_span(
            span, end_on_exit=True, record_exception=False, set_status_on_exception=False
        ):
            yield span

    def shutdown(self) -> None:
        """Send the last spans and stop, waiting `SHUTDOWN_WAIT_S` at most: past it (the
        collector does not answer) the exporter stops retrying and the rest is dropped. Blocking:
        call it off the event loop."""
        if self._provider is None or self._exporter is None:
            return
        closing = threading.Thread(
            target=self._provider.shutdown, name="otel-shutdown", daemon=True
        )
        closing.start()
        closing.join(SHUTDOWN_WAIT_S)
        if closing.is_alive():
            self._exporter.abort()
            closing.join(SHUTDOWN_WAIT_S)


class _Abortable:
    """The exporter, stoppable in the middle of its retries (`abort`), shut down only once."""

    def __init__(self, exporter: SpanExporter) -> None:
        self._exporter = exporter
        self._lock = threading.Lock()
        self._stopped = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self._exporter.export(spans)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._exporter.force_flush(timeout_millis)

    def abort(self) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._exporter.shutdown()


def traceparent(span: Span) -> str | None:
    """The W3C `traceparent` of `span`, stored on its run; None for a no-op span."""
    if not span.get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get(_TRACEPARENT)


def trace_id(span: Span) -> str | None:
    """The span's trace id as 32 hex digits (what the log lines carry); None when not traced."""
    context = span.get_span_context()
    return trace.format_trace_id(context.trace_id) if context.is_valid else None


def mark_run_outcome(outcome: str) -> None:
    """Say how the run ended on its "run" span (the current span of the run's task)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute(RUN_OUTCOME, outcome)
