"""The bot's imports, made without the cyclic garbage collector and then frozen.

Importing the server builds a great many long-lived objects (classes, pydantic schemas, SQL
constructs, the openai SDK's types). While they are made, the collector walks the growing
heap again and again for cycles that are not there: about a fifth of a process's start-up
CPU. So it is paused for the imports, and what they made is frozen (`gc.freeze`): later
collections, during runs, skip it for good.
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
