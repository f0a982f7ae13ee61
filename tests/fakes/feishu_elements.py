"""What Feishu checks in the elements of a card JSON 2.0 message the fake is sent (a post, a
reply, a PATCH): each element is an object with a tag, text objects are `plain_text` or
`lark_md`/`markdown` with string content, and a `collapsible_panel` (2.0 only) has a header
title that is a text object, a boolean `expanded` and a list of elements, and sits outside a
form. A `form` has a name, sits in no other form, holds at least one submit button
(`form_action_type: submit`), and names each of its inputs and selects once; a button outside a
form does not submit one. Feishu answers such a card with code 230001 / 200621 ("parse card json
err"); only the rules the bot's cards could break are checked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

TEXT_TAGS = ("plain_text", "lark_md", "markdown")


def _text_problem(text: Any, where: str) -> str | None:
    if not isinstance(text, dict) or text.get("tag") not in TEXT_TAGS:
        return f"{where}: not a text object"
    if not isinstance(text.get("content"), str):
        return f"{where}: text content is not a string"
    return None


def _children(element: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for key in ("elements", "columns"):
        yield from element.get(key) or ()


FORM_INPUTS = ("input", "select_static", "multi_select_static", "date_picker", "checker")


def _descendants(element: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for child in _children(element):
        if isinstance(child, dict):
            yield child
            yield from _descendants(child)


def _form_problem(form: dict[str, Any]) -> str | None:
    if not isinstance(form.get("name"), str) or not form["name"]:
        return "form: no name"
    inside = list(_descendants(form))
    if any(e.get("tag") == "form" for e in inside):
        return "form: a form inside a form"
    names = [e.get("name") for e in inside if e.get("tag") in FORM_INPUTS]
    if not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
        return "form: its inputs need unique names"
    if not any(e.get("tag") == "button" and e.get("form_action_type") == "submit" for e in inside):
        return "form: no submit button"
    return None


def _element_problem(element: Any, *, schema: str, in_form: bool) -> str | None:
    if not isinstance(element, dict) or not isinstance(element.get("tag"), str):
        return "an element without a tag"
    tag = element["tag"]
    if tag == "form" and (problem := _form_problem(element)) is not None:
        return problem
    if tag == "button" and "form_action_type" in element and not in_form:
        return "button: form_action_type outside a form"
    text_problem = _text_problem(element["text"], "div") if "text" in element else None
    if tag == "div" and text_problem is not None:
        return text_problem
    if tag == "collapsible_panel":
        if schema != "2.0":
            return "collapsible_panel needs card JSON 2.0"
        if in_form:
            return "collapsible_panel cannot be inside a form"
        header = element.get("header")
        if not isinstance(header, dict):
            return "collapsible_panel: no header"
        if (problem := _text_problem(header.get("title"), "collapsible_panel title")) is not None:
            return problem
        if "expanded" in element and not isinstance(element["expanded"], bool):
            return "collapsible_panel: expanded is not a boolean"
        if not isinstance(element.get("elements"), list) or not element["elements"]:
            return "collapsible_panel: no elements"
    for child in _children(element):
        problem = _element_problem(child, schema=schema, in_form=in_form or tag == "form")
        if problem is not None:
            return problem
    return None


def elements_problem(content: str) -> str | None:
    """Why Feishu would refuse this interactive message content (None: it would not)."""
    try:
        card = json.loads(content)
    except ValueError:
        return "card content is not JSON"
    if not isinstance(card, dict) or card.get("type") == "card":  # an entity: checked apart
        return None
    schema = str(card.get("schema") or "1.0")
    elements = (card.get("body") or {}).get("elements") if schema == "2.0" else None
    for element in elements if isinstance(elements, list) else card.get("elements") or ():
        problem = _element_problem(element, schema=schema, in_form=False)
        if problem is not None:
            return problem
    return None
