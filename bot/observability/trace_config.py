"""What the settings say about traces, in plain values: `bot.config` builds it without importing
OpenTelemetry (a process with traces off never loads more than the API)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote

DEFAULT_SERVICE_NAME = "chatops"


@dataclass(frozen=True, kw_only=True)
class TraceConfig:
    """What the settings say about traces (`Settings.trace_config`): on or off, where spans go
    (the full OTLP/HTTP traces URL), the exporter's headers, and the resource's attributes."""

    enabled: bool = False
    endpoint: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    service_name: str = DEFAULT_SERVICE_NAME
    resource_attributes: Mapping[str, str] = field(default_factory=dict)


def parse_key_values(text: str) -> dict[str, str]:
    """`key1=value1,key2=value2` with URL-encoded values (`OTEL_RESOURCE_ATTRIBUTES`,
    `OTEL_EXPORTER_OTLP_HEADERS`); an entry without `=` is left out, as the SDK does."""
    pairs: dict[str, str] = {}
    for entry in text.split(","):
        key, sep, value = entry.partition("=")
        if sep and key.strip():
            pairs[unquote(key.strip())] = unquote(value.strip())
    return pairs


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id (32 hex digits) of a stored W3C `traceparent`, for log lines written away
    from the run's task (a decision); None when there is none or it is malformed."""
    parts = (traceparent or "").split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or parts[1] == "0" * 32:
        return None
    try:
        int(parts[1], 16)
    except ValueError:
        return None
    return parts[1].lower()
