"""OpenAPI 3 parameter serialisation: `style`, `explode` and `allowReserved`, exactly.

Each style is the RFC 6570 expansion the OpenAPI specification names (Parameter Object, "Style
Values"), and the output matches its "Style Examples" table (3.1.1) character for character:
values are percent-encoded to RFC 3986's unreserved set (`allowReserved` keeps the reserved
set, except the characters a query string or a form body cannot carry literally), the
delimiters are literal (`,` `.` `;` `=` `&`) or encoded as the table has them (`%20`, `%7C`,
`%5B`/`%5D`).

Where the specification leaves a case undefined, the choice is the one APIs that use the
style expect, and is said here: `deepObject` nests (`a[b][c]=v`, Stripe's `metadata[team]`),
sends a list of scalars as `name[]=v` (Stripe's `expand[]`) and a list of objects with
indexes (`items[0][price]`); `spaceDelimited`/`pipeDelimited` with `explode: true` repeat the
name as `form` does (OpenAPI 3.0's wording); a scalar in those styles is sent as `name=value`.
A value nested inside a list or an object of any other style is sent as JSON text. Booleans
are `true`/`false`, `None` (JSON null) leaves the parameter out, as an empty list or object
does (RFC 6570: undefined).

Without a declared style (a hand-written manifest), `manifest_default_query` keeps the
manifest's own rule: lists repeat the name, objects are JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import quote

Style = Literal[
    "form", "spaceDelimited", "pipeDelimited", "deepObject", "simple", "label", "matrix"
]  # fmt: skip
PATH_STYLES: frozenset[str] = frozenset({"simple", "label", "matrix"})
QUERY_STYLES: frozenset[str] = frozenset({"form", "spaceDelimited", "pipeDelimited", "deepObject"})
# RFC 3986 reserved characters a query or form value may keep with `allowReserved`; the rest
# (`[` `]` `#`, and `&` `+` `=` that mean something in a form) stay encoded (OAS 3.1.1)
_RESERVED_KEPT = ":/?@!$'()*,;"
_PCT_TRIPLE = re.compile(r"%[0-9A-Fa-f]{2}")
_DELIMITERS = {"spaceDelimited": "%20", "pipeDelimited": "%7C"}


def default_explode(style: str) -> bool:
    """OpenAPI's default: `true` for `form`, `false` for every other style."""
    return style == "form"


def encode(text: str, *, allow_reserved: bool = False) -> str:
    """Percent-encoding of one name or value: RFC 3986 unreserved characters stay; with
    `allow_reserved` the reserved ones a query may carry stay too, and so do `%XX` triples."""
    if not allow_reserved:
        return quote(text, safe="-._~")
    out: list[str] = []
    position = 0
    for match in _PCT_TRIPLE.finditer(text):
        out.append(quote(text[position : match.start()], safe="-._~" + _RESERVED_KEPT))
        out.append(match.group())
        position = match.end()
    out.append(quote(text[position:], safe="-._~" + _RESERVED_KEPT))
    return "".join(out)


def scalar_text(value: Any) -> str:
    """A value as text: booleans `true`/`false`, numbers as written, nested values as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _undefined(value: Any) -> bool:
    return value is None or (isinstance(value, list | dict) and not value)


# --- path: simple, label, matrix -----------------------------------------------------------------


def expand_path(name: str, value: Any, style: str, explode: bool) -> str:
    """The text that replaces `{name}` in a path, already percent-encoded."""
    if style == "simple":
        return _joined(name, value, explode, prefix="", separator=",", named=False)
    if style == "label":
        return _joined(name, value, explode, prefix=".", separator=".", named=False)
    if style == "matrix":
        return _joined(name, value, explode, prefix=";", separator=";", named=True)
    raise ValueError(f"style {style!r} is not a path style")


def _joined(
    name: str, value: Any, explode: bool, *, prefix: str, separator: str, named: bool
) -> str:
    """RFC 6570 §3.2.2 (simple), §3.2.5 (label) and §3.2.7 (matrix) expansion of one variable."""
    if _undefined(value):
        return ""
    key = encode(name)

    def one(text: str) -> str:  # matrix: `;name=value`, or `;name` for an empty value
        if not named:
            return encode(text)
        return f"{key}={encode(text)}" if text else key

    if isinstance(value, list):
        items = [scalar_text(item) for item in value]
        if explode:
            return prefix + separator.join(one(item) for item in items)
        joined = ",".join(encode(item) for item in items)
        return prefix + (f"{key}={joined}" if named else joined)
    if isinstance(value, dict):
        pairs = [(encode(str(k)), encode(scalar_text(v))) for k, v in value.items()]
        if explode:
            return prefix + separator.join(f"{k}={v}" if v or not named else k for k, v in pairs)
        joined = ",".join(f"{k},{v}" for k, v in pairs)
        return prefix + (f"{key}={joined}" if named else joined)
    return prefix + one(scalar_text(value))


# --- query and form bodies: form, spaceDelimited, pipeDelimited, deepObject ---------------------


def expand_query(
    name: str, value: Any, style: str, explode: bool, *, allow_reserved: bool = False
) -> list[str]:
    """The `name=value` pieces of one query parameter (or form field), percent-encoded, to be
    joined with `&`; none for an undefined value."""
    if _undefined(value):
        return []
    key = encode(name)

    def text(item: Any) -> str:
        return encode(scalar_text(item), allow_reserved=allow_reserved)

    if style == "deepObject":
        return _deep(name, value, allow_reserved)
    if style not in QUERY_STYLES:
        raise ValueError(f"style {style!r} is not a query style")
    if isinstance(value, list):
        if explode:
            return [f"{key}={text(item)}" for item in value]
        delimiter = _DELIMITERS.get(style, ",")
        return [f"{key}={delimiter.join(text(item) for item in value)}"]
    if isinstance(value, dict):
        if explode:
            return [f"{encode(str(k))}={text(v)}" for k, v in value.items()]
        delimiter = _DELIMITERS.get(style, ",")
        flat = delimiter.join(f"{encode(str(k))}{delimiter}{text(v)}" for k, v in value.items())
        return [f"{key}={flat}"]
    return [f"{key}={text(value)}"]


def _deep(path: str, value: Any, allow_reserved: bool) -> list[str]:
    """`deepObject`: `a[b]=1`, nested as `a[b][c]=1`; lists of scalars as `a[]=x`, lists of
    objects or lists with indexes (`a[0][b]=1`). Brackets encoded as the table has them."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [
            piece for k, v in value.items() for piece in _deep(f"{path}[{k}]", v, allow_reserved)
        ]
    if isinstance(value, list):
        nested = any(isinstance(item, list | dict) for item in value)
        return [
            piece
            for index, item in enumerate(value)
            for piece in _deep(f"{path}[{index if nested else ''}]", item, allow_reserved)
        ]
    return [f"{encode(path)}={encode(scalar_text(value), allow_reserved=allow_reserved)}"]


def manifest_default_query(name: str, value: Any) -> list[str]:
    """A parameter without a declared style: lists repeat the name, objects are JSON."""
    if value is None:
        return []
    key = encode(name)
    if isinstance(value, list):
        return [f"{key}={encode(scalar_text(item))}" for item in value]
    return [f"{key}={encode(scalar_text(value))}"]


def query_pieces(values: Mapping[str, Any], styles: Mapping[str, Any]) -> list[str]:
    """Every parameter of `values` (wire name -> value) as encoded pieces, in its declared
    style (`styles`: wire name -> `ParamStyle`) or the manifest's default."""
    pieces: list[str] = []
    for wire, value in values.items():
        spec = styles.get(wire)
        if spec is None:
            pieces += manifest_default_query(wire, value)
        else:
            explode = default_explode(spec.style) if spec.explode is None else spec.explode
            pieces += expand_query(
                wire, value, spec.style, explode, allow_reserved=spec.allow_reserved
            )
    return pieces
