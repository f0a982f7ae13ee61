"""The syntax tree of one of the bot's source files, for the tests that read the code.

CPython 3.11 keeps the AST constructor's recursion depth per interpreter, not per thread: a
collection during `ast.parse` can run a finalizer, hand the GIL to another thread that builds
syntax trees too, and the parse fails with "SystemError: AST constructor recursion depth
mismatch" (python/cpython#106905; seen in a full run). No collection runs during the parse.
"""

from __future__ import annotations

import ast
from pathlib import Path

from bot.startup_imports import collector_paused


def parse_file(path: Path) -> ast.Module:
    with collector_paused():
        return ast.parse(path.read_text())
