"""One HTTP action's request: its URL, query pairs and body from the model's arguments.

The mapping rules of DESIGN §3 (path placeholders, query string or body, `body_arg`,
`wire_names`, the body's encoding), and the safety rules every request keeps: a path argument
stays one segment, and the URL never leaves the origin of `base_url` (`RequestRefused`).
`connectors.http.HttpActionTool` sends what this builds.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
from yarl import URL

from bot.errors import ConnectorError
from connectors.manifest import BODY_METHODS, PATH_PARAM_RE, HttpAction, HttpConnector
from connectors.param_styles import default_explode, expand_path, query_pieces, scalar_text


class RequestRefused(ConnectorError):
    """The request would leave the connector's origin, or its path would not be the action's
    (a safety rule, not a network error)."""


def base_url_of(manifest: HttpConnector, environ: Mapping[str, str]) -> URL:
    """`base_url`, or the value of `base_url_env` when that variable is set."""
    raw = manifest.base_url
    if manifest.base_url_env and environ.get(manifest.base_url_env):
        raw = environ[manifest.base_url_env]
    return URL(raw.rstrip("/"))


def _segment(name: str, value: Any, action: HttpAction) -> str:
    """One path argument, encoded so it stays one segment ('/' and '..' cannot escape): in
    its declared style (`simple`, `label`, `matrix`), else as text (JSON for a list or an
    object). An empty one would turn `/users/{id}` into the collection `/users/`: refused."""
    spec = action.styles.get(name)
    if spec is None:
        text = value if isinstance(value, str) else json.dumps(value)
        encoded = quote(text, safe="")
    else:
        explode = default_explode(spec.style) if spec.explode is None else spec.explode
        encoded = expand_path(action.wire_names.get(name, name), value, spec.style, explode)
    if not encoded:
        raise RequestRefused(f"the path argument {name!r} is empty; give it a value")
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


def compiled_parameters(action: HttpAction) -> dict[str, Any]:
    """The JSON Schema the model sees and the arguments are checked against.

    Arguments the schema does not name are refused (`additionalProperties: false`) unless the
    manifest's `parameters` says what they may be (`additionalProperties` of its own), and a
    path argument must not be empty (`minLength: 1`; `_segment` checks it again).
    """
    schema = copy.deepcopy(action.parameters)
    schema.setdefault("additionalProperties", False)
    properties = schema.setdefault("properties", {})
    for name in PATH_PARAM_RE.findall(action.path):
        if isinstance(properties.get(name), dict):
            properties[name].setdefault("minLength", 1)
    return schema


@dataclass(frozen=True)
class PreparedRequest:
    """One call's URL (without its query), encoded query pieces (`name=value`, joined with `&`)
    and body (wire names as keys)."""

    url: URL
    query: list[str]
    body: Any


def build_request(action: HttpAction, args: Mapping[str, Any], base: URL) -> PreparedRequest:
    """The URL, query pieces and body of one call (DESIGN §3 mapping rules).

    Path placeholders take their argument; the remaining arguments go to the query string for
    methods without a body, or into the body, merged over the static `query` / `body`. With
    `body_arg`, that argument is the body and the others go to the query string. Names in
    `wire_names` are sent under their wire name, in the style `styles` gives them.
    """
    used = set(PATH_PARAM_RE.findall(action.path))
    path = PATH_PARAM_RE.sub(lambda m: _segment(m.group(1), args[m.group(1)], action), action.path)
    url = URL(str(base) + path, encoded=True)
    if url.origin() != base.origin() or ".." in url.raw_parts or "." in url.raw_parts[1:]:
        raise RequestRefused(f"the path of {action.name!r} leaves {base.origin()}")
    rest = {k: v for k, v in args.items() if k not in used}
    body: Any = None
    if action.body_arg is not None:
        body = rest.pop(action.body_arg, None)
        if isinstance(body, Mapping) and action.body is not None:
            body = {**action.body, **body}
        elif body is None:
            body = action.body
        in_query = rest
    elif action.method not in BODY_METHODS:
        in_query = rest
    else:
        in_query = {k: v for k, v in rest.items() if k in action.query_args}
        fields = {k: v for k, v in rest.items() if k not in action.query_args}
        if action.body is not None or fields:
            body = {**(action.body or {}), **_on_the_wire(action, fields)}
    values = {**action.query, **_on_the_wire(action, in_query)}
    return PreparedRequest(url, query_pieces(values, wire_styles(action)), body)


def wire_styles(action: HttpAction) -> dict[str, Any]:
    """`styles` keyed by the name on the wire (the key of a query value or a body field)."""
    return {action.wire_names.get(name, name): spec for name, spec in action.styles.items()}


def _on_the_wire(action: HttpAction, args: Mapping[str, Any]) -> dict[str, Any]:
    return {action.wire_names.get(k, k): v for k, v in args.items()}


def with_query(url: URL, pieces: list[str]) -> URL:
    """`url` with the encoded query pieces, sent exactly as built (no re-encoding)."""
    if not pieces:
        return url
    return URL(f"{url}?{'&'.join(pieces)}", encoded=True)


def multipart_fields(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Multipart fields: lists repeat the name, None is left out, booleans are `true`/`false`,
    objects JSON (a part per value; OpenAPI's styles do not apply to multipart)."""
    out: list[tuple[str, str]] = []
    for key, value in values.items():
        if value is None:
            continue
        items = value if isinstance(value, list) else [value]
        out.extend((key, scalar_text(item)) for item in items)
    return out


def body_arguments(action: HttpAction, body: Any) -> dict[str, Any]:
    """The request's body keyword for aiohttp, built afresh per attempt (a form is read once):
    JSON (as `content_type` when the action names a JSON dialect), a form body serialised by
    the fields' styles, or multipart fields."""
    if body is None:
        return {}
    if action.body_encoding == "json":
        if action.content_type is None:
            return {"json": body}
        data = json.dumps(body).encode()
        return {"data": aiohttp.BytesPayload(data, content_type=action.content_type)}
    if not isinstance(body, Mapping):
        raise RequestRefused(f"a {action.body_encoding} body must be an object of fields")
    if action.body_encoding == "form":
        text = "&".join(query_pieces(body, wire_styles(action)))
        form = "application/x-www-form-urlencoded"
        return {"data": aiohttp.BytesPayload(text.encode(), content_type=form)}
    return {"data": aiohttp.FormData(multipart_fields(body), default_to_multipart=True)}
