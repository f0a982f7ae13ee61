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
from typing import Any
from urllib.parse import quote

import aiohttp
from yarl import URL

from bot.errors import ConnectorError
from connectors.manifest import BODY_METHODS, PATH_PARAM_RE, HttpAction, HttpConnector


class RequestRefused(ConnectorError):
    """The request would leave the connector's origin, or its path would not be the action's
    (a safety rule, not a network error)."""


def base_url_of(manifest: HttpConnector, environ: Mapping[str, str]) -> URL:
    """`base_url`, or the value of `base_url_env` when that variable is set."""
    raw = manifest.base_url
    if manifest.base_url_env and environ.get(manifest.base_url_env):
        raw = environ[manifest.base_url_env]
    return URL(raw.rstrip("/"))


def _segment(name: str, value: Any) -> str:
    """One path argument, encoded so it stays one segment ('/' and '..' cannot escape); an
    empty one would turn `/users/{id}` into the collection `/users/`, so it is refused."""
    text = value if isinstance(value, str) else json.dumps(value)
    if not text:
        raise RequestRefused(f"the path argument {name!r} is empty; give it a value")
    encoded = quote(text, safe="")
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


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def build_request(
    action: HttpAction, args: Mapping[str, Any], base: URL
) -> tuple[URL, list[tuple[str, str]], Any]:
    """The URL, query pairs and body of one call (DESIGN §3 mapping rules).

    Path placeholders take their argument; the remaining arguments go to the query string for
    methods without a body, or into the body, merged over the static `query` / `body`. With
    `body_arg`, that argument is the body and the others go to the query string. Names in
    `wire_names` are sent under their wire name.
    """
    used = set(PATH_PARAM_RE.findall(action.path))
    path = PATH_PARAM_RE.sub(lambda m: _segment(m.group(1), args[m.group(1)]), action.path)
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
    query = pairs({**action.query, **_on_the_wire(action, in_query)})
    return url, query, body


def _on_the_wire(action: HttpAction, args: Mapping[str, Any]) -> dict[str, Any]:
    return {action.wire_names.get(k, k): v for k, v in args.items()}


def pairs(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Query-string or form fields: lists repeat the name, None is left out, booleans are
    `true`/`false`, objects JSON."""
    out: list[tuple[str, str]] = []
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, list):
            out.extend((key, _query_value(item)) for item in value)
        else:
            out.append((key, _query_value(value)))
    return out


def body_arguments(action: HttpAction, body: Any) -> dict[str, Any]:
    """The request's body keyword for aiohttp, built afresh per attempt (a form is read once)."""
    if body is None:
        return {}
    if action.body_encoding == "json":
        return {"json": body}
    if not isinstance(body, Mapping):
        raise RequestRefused(f"a {action.body_encoding} body must be an object of fields")
    fields = pairs(body)
    if action.body_encoding == "form":
        return {"data": fields}
    return {"data": aiohttp.FormData(fields, default_to_multipart=True)}
