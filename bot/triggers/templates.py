"""Request and summary templates: Jinja2 in a sandboxed environment over the alert payload.

The payload comes from outside, and so, through the trigger file, does the template: the
sandbox refuses attribute access to Python internals, and a missing label renders as nothing
(an alert without `service` still opens its thread). Output is cut to a bounded length.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jinja2 import ChainableUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

from bot.errors import TriggerError

MAX_RENDERED_CHARS = 4000


class TemplateProblem(TriggerError):
    """A template that does not compile or render; the message says where."""


def _environment() -> SandboxedEnvironment:
    return SandboxedEnvironment(undefined=ChainableUndefined, autoescape=False)


def check_template(text: str) -> None:
    """Raise `TemplateProblem` when `text` is not a valid template (line number included)."""
    try:
        _environment().parse(text)
    except TemplateError as exc:
        line = getattr(exc, "lineno", None)
        where = f" (template line {line})" if line else ""
        raise TemplateProblem(f"template error{where}: {exc.message or exc}") from None


def render(text: str, context: Mapping[str, Any]) -> str:
    """`text` rendered over `context`; `TemplateProblem` when it cannot be."""
    try:
        rendered = _environment().from_string(text).render(**context)
    except TemplateError as exc:
        raise TemplateProblem(f"template error: {exc.message or exc}") from None
    return rendered.strip()[:MAX_RENDERED_CHARS]
