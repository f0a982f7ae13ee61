"""The root of the bot's exception tree, and the engine's branch of it.

`ChatopsError` is defined here, not in `bot/errors.py`, because the engine imports nothing of
`bot/` outside `bot.engine`: rooting the tree in the engine lets the engine's errors be part of
it without an upward import. `bot/errors.py` re-exports both and holds the rest of the tree.
"""

from __future__ import annotations


class ChatopsError(Exception):
    """Every error the bot raises on purpose (a bug's own exception is not one)."""


class EngineError(ChatopsError):
    """The ReAct engine could not do something: the model, structured output, a budget."""
