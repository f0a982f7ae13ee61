"""The log's shape: level and format from the settings, the run's ids on every line, and the
libraries' chatter kept at WARNING unless DEBUG asks for everything.

`text` is one human line per record (ids appended as `run=... conv=...` when bound); `json`
is one JSON object per line, for a log pipeline. Redaction (bot.redaction) is a handler filter
installed after this, so both formats print masked text.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Literal, TextIO

from bot.observability.context import ContextFilter

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LogFormat = Literal["text", "json"]
# per-request chatter of the HTTP clients and the migration tool: DEBUG only
NOISY_LIBRARIES = ("httpx", "httpx2", "httpcore", "alembic", "slack_sdk", "slack_bolt", "Lark")
# slack_sdk tests `logger.level <= DEBUG` on these (not `isEnabledFor`): a logger left unset
# (level 0) made every Web API call format its whole request and response for a debug line the
# handler then dropped (~5% of a serve process's CPU in a burst), so they get a level of their own
LEVEL_READING_LOGGERS = (
    "slack_sdk.web.async_base_client",
    "slack_sdk.web.base_client",
    "slack_sdk.web.legacy_base_client",
    "slack_sdk.webhook.async_client",
    "slack_sdk.webhook.client",
)
_IDS = (("conversation_id", "conv"), ("run_id", "run"), ("approval_id", "approval"),
        ("trace_id", "trace"))  # fmt: skip


class TextFormatter(logging.Formatter):
    """`LOG_FORMAT`, then the bound ids (`run=... conv=...`) when there are any."""

    def __init__(self) -> None:
        super().__init__(LOG_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ids = [f"{short}={value}" for name, short in _IDS
               if (value := getattr(record, name, None)) is not None]  # fmt: skip
        if not ids:
            return line
        head, newline, rest = line.partition("\n")  # after the message, before a traceback
        return f"{head} [{' '.join(ids)}]{newline}{rest}"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, message, the bound ids,
    and the traceback as text when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, _short in _IDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exc"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(
    level: str = "INFO", fmt: LogFormat = "text", stream: TextIO | None = None
) -> logging.Handler:
    """The root logger's one handler (replacing any earlier one): `level` for the bot, the
    noisy libraries at WARNING unless `level` is DEBUG. Returns the handler."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    numeric = logging.getLevelName(level.upper())
    root.setLevel(numeric)
    quiet = numeric if numeric <= logging.DEBUG else max(numeric, logging.WARNING)
    for name in (*NOISY_LIBRARIES, *LEVEL_READING_LOGGERS):
        logging.getLogger(name).setLevel(quiet)
    return handler
