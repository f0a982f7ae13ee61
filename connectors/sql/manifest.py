"""The `type: sql` manifest: a database URL from the environment, named queries, and `query`.

Named actions hold the SQL (with `:name` parameters) and the model fills only the parameters,
checked by the action's JSON Schema; a declared action that does not read only (by the SQL, or
`mutating: true`) goes through approval like any mutating call. `query` lets the model write
the SQL itself, for reading only (`connectors.sql.checker`). Kept apart from
`connectors.manifest` (which imports this module for its union of connector types).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from connectors.manifest_auth import EnvName
from connectors.manifest_rules import ApprovalFields, RuleSpec
from connectors.manifest_rules import Strict as _Strict

Dialect = Literal["postgresql", "mysql", "sqlite"]
NAME_PATTERN = r"^[a-zA-Z0-9_-]+$"  # as connectors.manifest.NAME_PATTERN (imported there)
QUERY_ACTION = "query"


def _default_parameters() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


class SqlResultSpec(_Strict):
    """How rows become an observation: a compact table, capped in rows and characters."""

    max_rows: int = Field(50, ge=1, le=10_000, description="rows shown; more are noted as cut")
    max_chars: int = Field(4000, ge=100, description="observation length cap, with a marker")
    max_cell_chars: int = Field(200, ge=10, le=10_000, description="longer values are cut")


def bind_names(sql: str) -> list[str]:
    """The `:name` parameters of a statement, as SQLAlchemy's `text()` reads them."""
    from sqlalchemy import text

    return list(text(sql).compile().params)


class SqlAction(ApprovalFields):
    """One declared statement; the model fills its `:name` parameters, never the SQL."""

    name: str = Field(pattern=NAME_PATTERN)
    description: str = Field(min_length=1)
    sql: str = Field(min_length=1, description="one statement; :name parameters from the args")
    parameters: dict[str, Any] = Field(
        default_factory=_default_parameters,
        validate_default=True,
        description="JSON Schema of the arguments (each one a :name of the SQL)",
    )
    mutating: bool | None = Field(
        None,
        description="does it change anything? default: unless the SQL is one read-only "
        "statement; a read-only action runs in a read-only transaction",
    )
    result: SqlResultSpec = Field(default_factory=SqlResultSpec)

    @field_validator("parameters")
    @classmethod
    def _check_parameters(cls, parameters: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        from connectors.manifest import CHECKED_SCHEMAS, _check_schema  # it imports this module

        _check_schema(parameters, (info.context or {}).get(CHECKED_SCHEMAS))
        sql = info.data.get("sql")
        if sql is None:
            return parameters
        props = set(parameters.get("properties") or {})
        binds = set(bind_names(sql))
        if missing := sorted(binds - props):
            raise ValueError(f"the SQL's parameters {missing} are not in parameters.properties")
        if unused := sorted(props - binds):
            raise ValueError(f"parameters {unused} are not used by the SQL (:name)")
        return parameters

    def is_mutating(self, dialect: Dialect) -> bool:
        """The manifest's `mutating`, else whether the SQL is anything but one read."""
        if self.mutating is not None:
            return self.mutating
        from connectors.sql.checker import is_read_only  # sqlglot: only when SQL is used

        return not is_read_only(self.sql, dialect)


class SqlQueryAction(ApprovalFields):
    """The optional `query` action: SQL from the model, one read-only statement, read-only."""

    name: str = Field(QUERY_ACTION, pattern=NAME_PATTERN)
    description: str = Field(
        "Run one read-only SQL SELECT and get the rows back as a table",
        min_length=1,
    )
    result: SqlResultSpec = Field(default_factory=SqlResultSpec)


class SqlConnector(_Strict):
    """A PostgreSQL, MySQL (MariaDB) or SQLite database through a SQLAlchemy URL."""

    name: str = Field(pattern=NAME_PATTERN, description="tool names are <name>__<action>")
    description: str = ""
    type: Literal["sql"]
    dialect: Dialect = Field(description="postgresql | mysql | sqlite (the URL must match)")
    url_env: EnvName = Field(description="variable holding the SQLAlchemy URL (a secret)")
    timeout_s: float = Field(10.0, gt=0, le=600, description="statement timeout")
    actions: list[SqlAction] = Field(default_factory=list)
    query: SqlQueryAction | None = Field(
        None, description="let the model run its own read-only SELECTs (checked and read-only)"
    )
    rules: list[RuleSpec] = Field(
        default_factory=list,
        description="CEL rules for every action, checked before the action's own",
    )

    @model_validator(mode="after")
    def _has_actions(self) -> SqlConnector:
        if not self.actions and self.query is None:
            raise ValueError("declare actions, a query action, or both")
        if self.query is not None and any(a.name == self.query.name for a in self.actions):
            raise ValueError(f"the query action's name {self.query.name!r} is also an action's")
        return self

    def env_names(self) -> list[str]:
        return [self.url_env]

    def action_names(self) -> list[str]:
        names = [action.name for action in self.actions]
        return names + ([self.query.name] if self.query is not None else [])
