"""The bot's imports, made without the cyclic garbage collector and then frozen.

Importing the server builds a great many long-lived objects (classes, pydantic schemas, SQL
constructs, the openai SDK's types). While they are made, the collector walks the growing
heap again and again for cycles that are not there: about a fifth of a process's start-up
CPU. So it is paused for the imports, and what they made is frozen (`gc.freeze`): later
collections, during runs, skip it for good. Start-up itself (the app, its runtime, the
database's engine, the clients, recovery) makes as many again; `freeze_once_started` freezes
those too, so a burst's full collections walk only what its runs make (they were 50-80 ms
pauses of the event loop, each, in the middle of a burst).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection during the block; the collector is left as it was found."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def frozen_imports() -> Iterator[None]:
    """Collect nothing while the block imports; freeze what exists when it ends."""
    with collector_paused():
        try:
            yield
        finally:
            gc.freeze()


async def freeze_once_started(_app: object) -> None:
    """An app's last start-up step (`on_startup`): what start-up made lives as long as the
    process, so it is collected once and frozen (its garbage first, so none is kept)."""
    gc.collect()
    gc.freeze()
