"""A tiny OpenTelemetry collector on 127.0.0.1: takes OTLP/HTTP protobuf POSTs to /v1/traces,
decodes them with the OTLP protobuf classes and keeps every span it received."""

from __future__ import annotations

import asyncio
import gzip
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the collector saw it: ids in hex, attributes as plain values."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    resource: dict[str, Any]


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


class FakeCollector:
    """`spans`: everything received, in order; `wait_for(name)` waits for a span by name."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.content_types: list[str] = []
        self._changed = asyncio.Condition()
        self._app = web.Application()
        self._app.router.add_post("/v1/traces", self._traces)
        self._runner = web.AppRunner(self._app)
        self.url = ""

    async def start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        await self._runner.cleanup()

    async def _traces(self, request: web.Request) -> web.Response:
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        export = ExportTraceServiceRequest.FromString(body)
        async with self._changed:
            self.content_types.append(request.headers.get("Content-Type", ""))
            for resource_spans in export.resource_spans:
                resource = _attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(
                            ReceivedSpan(
                                name=span.name,
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_span_id=span.parent_span_id.hex(),
                                attributes=_attributes(span.attributes),
                                resource=resource,
                            )
                        )
            self._changed.notify_all()
        reply = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=reply, content_type="application/x-protobuf")

    async def wait_for(self, name: str, timeout: float = 30) -> ReceivedSpan:  # noqa: ASYNC109
        """The first span called `name`, waiting for it to arrive."""
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: any(s.name == name for s in self.spans)), timeout
            )
        return next(s for s in self.spans if s.name == name)
