"""One OpenAPI operation -> one manifest action: its arguments, body, encoding and names.

Path and query parameters and the request body (`openapi_body`) become one JSON Schema of
arguments:
- a parameter keeps its serialisation (`style`, `explode`, `allowReserved`) as a `styles`
  entry wherever the manifest's default would send it differently (`openapi_args`);
- an argument name model APIs refuse (`DateSent<`, `statuses[]`) gets a safe one, and the
  original travels on the wire (`wire_names`).
The operation's `tags` are kept (the selection catalogue groups a connector's actions by them).
A header parameter with one possible value (a single enum value or a default, like PagerDuty's
`Accept`) becomes a static header; any other is reported, required ones with how to set them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from connectors.manifest import BODY_METHODS, PATH_PARAM_RE
from connectors.openapi_args import Arguments, described, parameter_style, safe_arg_name
from connectors.openapi_body import SkipOperation, request_body
from connectors.openapi_doc import deref, pointer
from connectors.openapi_schema import SchemaConverter
from connectors.schema_fit import SchemaBudget, SchemaTooLarge, cut_text, fit_schema

DESCRIPTION_CHARS = 500
TAG_CHARS = 60
_IGNORED_HEADERS = frozenset({"content-type", "content-length"})


@dataclass
class OperationImport:
    """What one operation gives: the action, notes for the user, headers it always sends."""

    action: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def operation_label(method: str, path: str) -> str:
    return f"{method.upper()} {path}"


def import_operation(
    converter: SchemaConverter,
    budget: SchemaBudget,
    *,
    path: str,
    method: str,
    op: Mapping[str, Any],
    shared: list[Any],
) -> OperationImport:
    """The action for one operation; raises `SkipOperation` (or `RefError`) when it cannot be."""
    where = pointer("paths", path, method)
    label = operation_label(method, path)
    result = OperationImport(action={})
    args = Arguments()
    template = _parameters(converter, args, result.notes, path, method, op, shared, where)
    template, _, fixed_query = template.partition("?")  # OpenAI's `/responses?beta=true`
    for pname in PATH_PARAM_RE.findall(template):
        if pname not in args.properties:  # the spec forgot to declare it; the URL still needs it
            args.add(pname, {"type": "string"}, required=True)
            result.notes.append(f"{label}: undeclared path parameter {pname!r} added")
    body = request_body(converter, args, result.notes, label, method, op, where)
    parameters: dict[str, Any] = {"type": "object", "properties": args.properties}
    if args.required:
        parameters["required"] = list(dict.fromkeys(args.required))
    try:
        schema, cut = fit_schema(parameters, converter.closure(parameters), budget)
    except SchemaTooLarge as exc:
        raise SkipOperation(str(exc), where) from None
    if cut:
        result.notes.append(f"{label}: {cut}")
    tags = operation_tags(op)
    action: dict[str, Any] = {
        "name": snake_case(op.get("operationId") or f"{method}_{path}"),
        "description": _description(op, method, path, body.note),
        **({"tags": tags} if tags else {}),
        "method": method.upper(),
        "path": template,
        "parameters": schema,
    }
    if fixed_query:
        action["query"] = dict(parse_qsl(fixed_query, keep_blank_values=True))
    if args.query_args:
        action["query_args"] = args.query_args
    if args.wire_names:
        action["wire_names"] = args.wire_names
    if body.arg:
        action["body_arg"] = body.arg
    if body.encoding != "json":
        action["body_encoding"] = body.encoding
    if body.content_type:
        action["content_type"] = body.content_type
    if args.styles:
        action["styles"] = args.styles
    if args.headers:
        action["headers"] = args.headers
    if method != "get":  # a spec cannot prove an operation safe: only GET is trusted to read
        action["mutating"] = True
        action["approval"] = "auto"
        action["risk"] = "high" if method == "delete" else "medium"
    result.action = action
    return result


def _parameters(
    converter: SchemaConverter,
    args: Arguments,
    notes: list[str],
    path: str,
    method: str,
    op: Mapping[str, Any],
    shared: list[Any],
    where: str,
) -> str:
    """Path and query parameters into `args`; returns the path with safe placeholder names."""
    label = operation_label(method, path)
    found: dict[tuple[str, str], tuple[Mapping[str, Any], str]] = {}
    sources = [(shared, pointer("paths", path, "parameters"))]
    sources.append((op.get("parameters") or [], f"{where}/parameters"))
    for listed, base in sources:
        for index, raw in enumerate(listed):
            param, at = deref(converter.doc, raw, f"{base}/{index}")
            if not isinstance(param, Mapping) or not isinstance(param.get("name"), str):
                raise SkipOperation("a parameter without a name", at)
            found[(str(param.get("in")), param["name"])] = (param, at)  # operation level wins
    template = path
    for (kind, pname), (param, at) in found.items():
        args.raw_names.add(pname)
        if kind == "header":
            _header(args, notes, label, pname, param)
            continue
        if kind not in ("path", "query"):
            notes.append(f"{label}: {kind} parameter {pname!r} skipped")
            continue
        schema = _parameter_schema(converter, param, at)
        arg = args.add(pname, schema, required=kind == "path" or param.get("required") is True)
        if kind == "path" and arg != pname:
            template = template.replace("{" + pname + "}", "{" + arg + "}")
        if arg != pname:
            args.wire_names[arg] = pname  # a matrix path value carries its name too
        if kind == "query" and method.upper() in BODY_METHODS:
            args.query_args.append(arg)
        if "content" not in param:  # `content` (JSON in a query) is the manifest's default
            style = parameter_style(param, kind, converter.resolved(schema))
            if style is not None:
                args.styles[arg] = style
    return template


def _parameter_schema(converter: SchemaConverter, param: Mapping[str, Any], at: str) -> Any:
    raw = param.get("schema")
    at_schema = f"{at}/schema"
    if raw is None and isinstance(param.get("content"), Mapping) and param["content"]:
        media = next(iter(param["content"]))
        raw = (param["content"][media] or {}).get("schema")
        at_schema = f"{at}/content/{pointer(media)[2:]}/schema"
    schema = converter.convert(raw if raw is not None else {"type": "string"}, at_schema)
    description = param.get("description")
    if isinstance(description, str) and description.strip() and isinstance(schema, Mapping):
        schema = {**schema, "description": " ".join(description.split())}
    if param.get("deprecated") is True:
        schema = described(schema, "(deprecated)")
    return schema


def _header(
    args: Arguments, notes: list[str], label: str, name: str, param: Mapping[str, Any]
) -> None:
    """A header parameter: a static header when it has one value, else a note."""
    if name.lower() in _IGNORED_HEADERS:
        return  # the connector sets it from the body encoding
    schema = param.get("schema") if isinstance(param.get("schema"), Mapping) else {}
    enum = schema.get("enum") if isinstance(schema.get("enum"), list) else None
    value = enum[0] if enum and len(enum) == 1 else schema.get("default")
    if param.get("required") is True and isinstance(value, str | int | float):
        args.headers[name] = str(value)
    elif param.get("required") is True:
        notes.append(
            f"{label}: required header parameter {name!r} is not imported; "
            f"set it under the manifest's headers"
        )
    else:
        notes.append(f"{label}: header parameter {name!r} skipped")


def operation_tags(op: Mapping[str, Any]) -> list[str]:
    """The operation's OpenAPI tags, whitespace folded, each at most `TAG_CHARS` long: the
    selection catalogue lists a connector's actions under their first tag."""
    raw = op.get("tags")
    if not isinstance(raw, list):
        return []
    tags = (" ".join(tag.split())[:TAG_CHARS] for tag in raw if isinstance(tag, str))
    return list(dict.fromkeys(tag for tag in tags if tag))


def snake_case(raw: str) -> str:
    """`listPets` -> `list_pets`, `get-incidents` -> `get_incidents`, `getHTTPStatus` ->
    `get_http_status`; anything else that is not a letter or digit becomes `_`."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", raw)
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    name = re.sub(r"[^a-zA-Z0-9]+", "_", name)
    return re.sub(r"_{2,}", "_", name).strip("_").lower() or "action"


def _description(op: Mapping[str, Any], method: str, path: str, note: str) -> str:
    summary = " ".join(str(op.get("summary") or "").split())
    detail = " ".join(str(op.get("description") or "").split())
    text = summary or detail or operation_label(method, path)
    if summary and detail and not detail.lower().startswith(summary.rstrip(".").lower()):
        text = f"{summary.rstrip('.')}. {detail}"
    if op.get("deprecated") is True:
        text = f"(Deprecated) {text}"
    room = DESCRIPTION_CHARS - (len(note) + 1 if note else 0)
    text = cut_text(text, room)
    return f"{text} {note}" if note else text


__all__ = ["SkipOperation", "import_operation", "safe_arg_name", "snake_case"]
