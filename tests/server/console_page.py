"""The console page's own files, as the app serves them, for tests that read or run its script."""

from __future__ import annotations

from bot.surfaces.console.static import STATIC_DIR

SCRIPTS = ("api.js", "store.js", "render.js", "question.js", "views.js", "app.js")


def script(name: str) -> str:
    """One JavaScript module of the page."""
    return (STATIC_DIR / name).read_text()


def all_scripts() -> str:
    return "\n".join(script(name) for name in SCRIPTS)


def as_classic_script(name: str) -> str:
    """A module without its `import` lines and `export` keywords, for V8 (mini-racer) to run
    as a plain script: only for modules that import nothing they use (store.js)."""
    lines = [line for line in script(name).splitlines() if not line.startswith("import ")]
    return "\n".join(line.removeprefix("export ") for line in lines)
