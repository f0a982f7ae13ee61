"""Column types shared by the tables: a `StrEnum` status stored as the plain text it always was.

`StatusText(RunStatus)` is a `VARCHAR` in the schema (Alembic sees no change, no migration). It
refuses to write or compare with a word the enum does not know, so a misspelt status fails
where it is written instead of leaving a row no query finds. It reads back the enum member, and
a word it does not know (a row written by another version of the bot sharing the database) as
the plain text it is, matching no member, as before the enums.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypeVar

from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator
from sqlmodel import AutoString

E = TypeVar("E", bound=StrEnum)


class StatusText(TypeDecorator[E]):
    """A `StrEnum` column kept as its text."""

    impl = AutoString
    cache_ok = True

    def __init__(self, enum: type[E]) -> None:
        super().__init__()
        self.enum = enum

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else self.enum(value).value

    def process_result_value(self, value: Any, dialect: Dialect) -> E | str | None:
        if value is None:
            return None
        try:
            return self.enum(value)
        except ValueError:
            return str(value)
