"""A `type: sql` manifest as tools: one per declared action, plus `query` when enabled.

Everything the model can get wrong (arguments, SQL the checker refuses, a database error, a
timeout) comes back as an observation, redacted of the URL and its password; a declared
action's approval policy rides on the tool like an HTTP action's, so the gate asks before a
write. The database's work runs in a thread (SQLAlchemy is synchronous).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator

from bot.approvals.schema import policy_metadata
from bot.engine.arguments import validation_error
from bot.engine.tools import Tool, ToolResult
from bot.errors import ConnectorError
from bot.redaction import redact_text
from connectors.auth import MissingSecretError
from connectors.breaker import CircuitBreaker
from connectors.sql.checker import MAX_SQL_CHARS, QueryRefused, check_read_only, is_read_only
from connectors.sql.database import (
    ReadOnlyRefused,
    SqlDatabase,
    SqlFailed,
    SqlUnreachable,
    StatementTimeout,
)
from connectors.sql.manifest import SqlAction, SqlConnector, SqlQueryAction, SqlResultSpec
from connectors.sql.table import render_rows

log = logging.getLogger(__name__)

DIALECT_NAMES = {"postgresql": "PostgreSQL", "mysql": "MySQL", "sqlite": "SQLite"}
THREAD_SLACK_S = 5.0  # the server cuts a slow statement; this only stops waiting on a stuck one


class SqlTool:
    """One action (declared or `query`) of a SQL connector; `__call__` is `Tool.invoke`."""

    def __init__(
        self,
        manifest: SqlConnector,
        action: SqlAction | SqlQueryAction,
        database: SqlDatabase,
        *,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        self.manifest = manifest
        self.action = action
        self.database = database
        self.breaker = breaker
        self.name = f"{manifest.name}__{action.name}"
        self.parameters = _parameters(manifest, action)
        self.validator = Draft202012Validator(self.parameters)
        self.free = isinstance(action, SqlQueryAction)
        declared = isinstance(action, SqlAction)
        self.mutating = action.is_mutating(manifest.dialect) if declared else False
        # a declared query is read through an unbuffered cursor (the row cap bounds memory)
        self.stream = declared and is_read_only(action.sql, manifest.dialect)

    def redact(self, text: str) -> str:
        return redact_text(text, self.database.secrets())

    def tool(self) -> Tool:
        description = self.action.description
        if self.free:
            description += (
                f" ({DIALECT_NAMES[self.manifest.dialect]}; one SELECT, no comments, at most "
                f"{self.action.result.max_rows} rows shown; read-only)"
            )
        if self.manifest.description:
            description = f"{description} ({self.manifest.name}: {self.manifest.description})"
        policy = self.action.policy(mutating=self.mutating, connector_rules=self.manifest.rules)
        return Tool(
            name=self.name,
            description=description,
            parameters=self.parameters,
            invoke=self,
            connector=self.manifest.name,
            action=self.action.name,
            metadata=policy_metadata(policy),
            secret_values=self.database.secrets,
        )

    async def __call__(self, args: dict[str, Any]) -> ToolResult:
        problem = validation_error(self.name, self.validator, args)
        if problem is not None:
            return ToolResult.error(problem)
        sql, params = self._statement(args)
        if self.free:
            try:
                check_read_only(sql, self.manifest.dialect)
            except QueryRefused as exc:
                return ToolResult.error(f"Refused: {exc}; nothing was run.")
        if self.breaker is not None and (refused := self.breaker.admit()) is not None:
            return ToolResult.error(refused)
        fault: bool | None = None
        try:
            result = await self._run(sql, params)
            fault = False
        except SqlUnreachable as exc:
            fault = True
            result = ToolResult.error(f"{self.name}: the database cannot be reached: {exc}")
        except StatementTimeout as exc:
            fault = False
            result = ToolResult.error(f"{self.name}: the statement was {exc}; nothing returned.")
        except ReadOnlyRefused as exc:
            fault = False
            result = ToolResult.error(
                f"Refused by the database's read-only transaction: {exc}; nothing was changed."
            )
        except SqlFailed as exc:
            fault = False
            result = ToolResult.error(f"{self.name} failed: {exc}")
        except MissingSecretError as exc:
            result = ToolResult.error(f"{self.name} is not configured: {exc}.")
        except ConnectorError as exc:  # the URL's value is unusable (never quoted)
            result = ToolResult.error(f"{self.name} is not configured: {exc}.")
        except TimeoutError:
            fault = True
            limit = self.manifest.timeout_s + THREAD_SLACK_S
            result = ToolResult.error(f"{self.name}: no answer within {limit:g}s (timeout).")
        except Exception as exc:  # noqa: BLE001 - an observation, never with the URL in it
            log.warning("%s failed unexpectedly: %s", self.name, type(exc).__name__)
            result = ToolResult.error(f"{self.name} failed: {type(exc).__name__}: {exc}")
        finally:
            if self.breaker is not None:
                self.breaker.settle(fault)
        return ToolResult(self.redact(result.content), is_error=result.is_error)

    def _statement(self, args: Mapping[str, Any]) -> tuple[str, dict[str, Any] | None]:
        if isinstance(self.action, SqlAction):
            props = self.action.parameters.get("properties") or {}
            return self.action.sql, {name: args.get(name) for name in props}
        return str(args["sql"]), None

    async def _run(self, sql: str, params: dict[str, Any] | None) -> ToolResult:
        spec: SqlResultSpec = self.action.result
        call = asyncio.to_thread(
            self.database.run,
            sql,
            params,
            read_only=not self.mutating,
            max_rows=spec.max_rows,
            stream=self.stream,
        )
        rows = await asyncio.wait_for(call, self.manifest.timeout_s + THREAD_SLACK_S)
        return ToolResult(render_rows(rows, spec, redact=self.redact))


def _parameters(manifest: SqlConnector, action: SqlAction | SqlQueryAction) -> dict[str, Any]:
    if isinstance(action, SqlAction):
        return dict(action.parameters)
    dialect = DIALECT_NAMES[manifest.dialect]
    return {
        "type": "object",
        "properties": {
            "sql": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_SQL_CHARS,
                "description": f"one read-only SELECT in the {dialect} dialect",
            }
        },
        "required": ["sql"],
        "additionalProperties": False,
    }


def sql_tools(
    manifest: SqlConnector, database: SqlDatabase, *, breaker: CircuitBreaker | None = None
) -> list[Tool]:
    """Every action of a SQL manifest as a `Tool` (the query action last)."""
    actions: list[SqlAction | SqlQueryAction] = list(manifest.actions)
    if manifest.query is not None:
        actions.append(manifest.query)
    return [SqlTool(manifest, a, database, breaker=breaker).tool() for a in actions]
