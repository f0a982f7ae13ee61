"""What the web console is given besides `SurfacePorts`: its conversation store and the call log.

The console may not import storage or the audit's queries (the `surfaces-ports` contract), so it
names what it needs here as protocols; the runtime builds them (`Runtime.console_ports`) from
`bot.storage.console.ConsoleStore` and `bot.audit.browse.CallLogBrowser`. The item and thread
protocols describe the store's frozen records by their fields.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from bot.chat.audit_report import AuditQuery, CallEntry

ExportFormat = Literal["csv", "json"]


class Item(Protocol):
    """One thing shown in a console thread, at its latest event `seq`; `position` its place."""

    @property
    def id(self) -> str: ...
    @property
    def root(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def data(self) -> dict[str, Any]: ...
    @property
    def seq(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def updated_at(self) -> datetime: ...


class Thread(Protocol):
    """A conversation as the sidebar lists it."""

    @property
    def root(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def pending(self) -> int: ...
    @property
    def seq(self) -> int: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def updated_at(self) -> datetime: ...
    @property
    def hidden(self) -> bool: ...


class ItemStore(Protocol):
    """The console's conversations, kept by the database (`bot.storage.console`)."""

    shared: bool  # other processes write it too: look for their events now and then

    async def save(
        self,
        item_id: str,
        root: str,
        kind: str,
        data: dict[str, Any],
        *,
        state: str = "",
        title: str = "",
        create_only: bool = False,
    ) -> tuple[Item, Thread] | None: ...

    async def cursor(self) -> int: ...

    async def since(self, cursor: int, limit: int = 500) -> list[Item]: ...

    async def items(self, root: str, limit: int = 1000) -> list[Item]: ...

    async def item(self, item_id: str) -> Item | None: ...

    async def thread(self, root: str) -> Thread | None: ...

    async def threads(self, limit: int = 200, hidden: tuple[str, ...] = ()) -> list[Thread]: ...

    async def approvals(self, *, pending: bool, limit: int = 100) -> list[Item]: ...

    async def run_root(self, run_id: str) -> str | None: ...

    async def rename(self, root: str, title: str) -> Thread | None: ...

    async def hide(self, root: str) -> Thread | None: ...

    async def ratings(self, run_ids: Sequence[str], user_id: str) -> dict[str, str]: ...


class CallLog(Protocol):
    """The call log through the audit's own queries (`bot.audit.browse`)."""

    async def recent(
        self, query: AuditQuery, *, limit: int, before_id: int | None = None
    ) -> list[CallEntry]: ...

    def export(self, query: AuditQuery, fmt: ExportFormat) -> AsyncIterator[str]: ...


@dataclass(frozen=True, kw_only=True)
class ConsolePorts:
    """The console's own ports: `items` (its threads) and `calls` (the call log view)."""

    items: ItemStore
    calls: CallLog
