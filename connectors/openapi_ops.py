"""One OpenAPI operation -> one manifest action: its arguments, body, encoding and names.

Path and query parameters and the request body become one JSON Schema of arguments:
- an object body is flattened into the arguments, unless a field is named like a parameter:
  then the whole body is one argument (`body`) and the description says so, so nothing is lost
  and no optional parameter turns required;
- a body that is not a plain object (an array, `oneOf`/`anyOf` alternatives) is one argument too;
- JSON, form-encoded and multipart bodies (their fields that are not files) are sent as such
  (`body_encoding`); a body the connector cannot send skips the operation when it is required;
- an argument name model APIs refuse (`DateSent<`, `statuses[]`) gets a safe one, and the
  original travels on the wire (`wire_names`).
A header parameter with one possible value (a single enum value or a default, like PagerDuty's
`Accept`) becomes a static header; any other is reported, required ones with how to set them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from bot.errors import ConnectorError
from connectors.manifest import BODY_ARG_METHODS, BODY_METHODS, PATH_PARAM_RE
from connectors.openapi_doc import deref, pointer
from connectors.openapi_schema import SchemaConverter
from connectors.schema_fit import SchemaBudget, SchemaTooLarge, cut_text, fit_schema

DESCRIPTION_CHARS = 500
ARG_NAME_RE = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")
_OPERATORS = (("<=", "_lte"), (">=", "_gte"), ("<", "_lt"), (">", "_gt"), ("[]", ""))
_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]+")
_IGNORED_HEADERS = frozenset({"content-type", "content-length"})


class SkipOperation(ConnectorError):
    """This operation cannot be imported; `pointer` is the JSON path of the problem."""

    def __init__(self, message: str, pointer: str) -> None:
        super().__init__(message)
        self.pointer = pointer


@dataclass
class OperationImport:
    """What one operation gives: the action, notes for the user, headers it always sends."""

    action: dict[str, Any]
    notes: list[str] = field(default_factory=list)


@dataclass
class _Arguments:
    """The arguments being assembled for one action."""

    properties: dict[str, Any] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    query_args: list[str] = field(default_factory=list)
    wire_names: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    raw_names: set[str] = field(default_factory=set)  # parameter names as the spec has them

    def add(self, name: str, schema: Any, *, required: bool) -> str:
        """Add an argument under a safe name; returns the name used."""
        arg = safe_arg_name(name, self.properties)
        if arg != name:
            schema = _described(schema, f"(sent as `{name}`)")
        self.properties[arg] = schema
        if required:
            self.required.append(arg)
        return arg


def safe_arg_name(name: str, taken: Mapping[str, Any] | set[str]) -> str:
    """`name` if model APIs accept it as a property name and it is free, else a safe variant:
    `DateSent<` -> `DateSent_lt`, `statuses[]` -> `statuses`, clashes get `_2`, `_3`..."""
    if ARG_NAME_RE.match(name) and name not in taken:
        return name
    base = name
    for operator, word in _OPERATORS:
        base = base.replace(operator, word)
    base = re.sub(r"_{2,}", "_", _UNSAFE.sub("_", base)).strip("_")[:64] or "arg"
    candidate, n = base, 2
    while candidate in taken:
        suffix = f"_{n}"
        candidate, n = base[: 64 - len(suffix)] + suffix, n + 1
    return candidate


def _described(schema: Any, note: str) -> Any:
    if not isinstance(schema, Mapping):
        return schema
    text = schema.get("description")
    return {**schema, "description": f"{text} {note}" if text else note}


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
    args = _Arguments()
    template = _parameters(converter, args, result.notes, path, method, op, shared, where)
    template, _, fixed_query = template.partition("?")  # OpenAI's `/responses?beta=true`
    for pname in PATH_PARAM_RE.findall(template):
        if pname not in args.properties:  # the spec forgot to declare it; the URL still needs it
            args.add(pname, {"type": "string"}, required=True)
            result.notes.append(f"{label}: undeclared path parameter {pname!r} added")
    body = _request_body(converter, args, result.notes, label, method, op, where)
    parameters: dict[str, Any] = {"type": "object", "properties": args.properties}
    if args.required:
        parameters["required"] = list(dict.fromkeys(args.required))
    try:
        schema, cut = fit_schema(parameters, converter.closure(parameters), budget)
    except SchemaTooLarge as exc:
        raise SkipOperation(str(exc), where) from None
    if cut:
        result.notes.append(f"{label}: {cut}")
    action: dict[str, Any] = {
        "name": snake_case(op.get("operationId") or f"{method}_{path}"),
        "description": _description(op, method, path, body.note),
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
    args: _Arguments,
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
        elif arg != pname:
            args.wire_names[arg] = pname
        if kind == "query" and method.upper() in BODY_METHODS:
            args.query_args.append(arg)
        if param.get("style") == "deepObject":
            notes.append(f"{label}: query parameter {pname!r} (deepObject) is sent as JSON")
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
        schema = _described(schema, "(deprecated)")
    return schema


def _header(
    args: _Arguments, notes: list[str], label: str, name: str, param: Mapping[str, Any]
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


@dataclass(frozen=True)
class _Body:
    arg: str | None = None  # the argument holding the whole body, if not flattened
    encoding: str = "json"
    note: str = ""  # said in the tool description


_ENCODINGS = (
    ("json", lambda m: m == "application/json" or m.endswith("+json") or m == "*/*"),
    ("form", lambda m: m == "application/x-www-form-urlencoded"),
    ("multipart", lambda m: m == "multipart/form-data"),
)


def _request_body(
    converter: SchemaConverter,
    args: _Arguments,
    notes: list[str],
    label: str,
    method: str,
    op: Mapping[str, Any],
    where: str,
) -> _Body:
    raw = op.get("requestBody")
    if raw is None:
        return _Body()
    body, at = deref(converter.doc, raw, f"{where}/requestBody")
    content = body.get("content") if isinstance(body, Mapping) else None
    if not isinstance(content, Mapping) or not content:
        return _Body()
    required = body.get("required") is True
    media, encoding = _pick_media(content)
    types = ", ".join(str(m) for m in content)
    if media is None or method.upper() not in BODY_ARG_METHODS:
        why = f"its request body ({types}) cannot be sent"
        if media is not None:
            why = f"{method.upper()} requests carry no body, and this one needs one"
        if required:
            raise SkipOperation(why, f"{at}/content")
        notes.append(f"{label}: optional request body ({types}) skipped")
        return _Body()
    at_schema = f"{at}/content/{pointer(media)[2:]}/schema"
    schema = converter.convert((content[media] or {}).get("schema") or {}, at_schema)
    resolved = converter.resolved(schema)
    if encoding != "json":
        resolved = _without_files(converter, resolved, at_schema)
        if not _plain_object(resolved):
            raise SkipOperation(f"its {media} body is not an object of fields", at_schema)
    if _plain_object(resolved) and method.upper() in BODY_METHODS:
        fields = resolved.get("properties") or {}
        clashes = sorted(set(fields) & (set(args.properties) | args.raw_names))
        if not clashes:
            # a body's required fields stay required even where the spec forgot to mark the
            # body itself required (common): a body without them would be refused anyway
            needed = set(resolved.get("required") or [])
            for name, prop in fields.items():
                arg = args.add(name, prop, required=name in needed)
                if arg != name:
                    args.wire_names[arg] = name
            return _Body(encoding=encoding)
        schema = resolved if encoding != "json" else schema
        arg = safe_arg_name("body", args.properties)
        names = ", ".join(f"`{c}`" for c in clashes)
        note = (
            f"The request body goes in the `{arg}` argument: its fields {names} share "
            "names with parameters."
        )
    else:
        arg = safe_arg_name("body", args.properties)
        note = f"The request body goes in the `{arg}` argument."
    description = body.get("description") if isinstance(body.get("description"), str) else ""
    args.add(arg, _described(schema, description.strip()) if description.strip() else schema,
             required=required)  # fmt: skip
    return _Body(arg=arg, encoding=encoding, note=note)


def _pick_media(content: Mapping[str, Any]) -> tuple[str | None, str]:
    """The media type to send: JSON first, then form-encoded, then multipart."""
    for encoding, matches in _ENCODINGS:
        for media in content:
            if matches(str(media).split(";")[0].strip().lower()):
                return str(media), encoding
    return None, "json"


def _plain_object(schema: Any) -> bool:
    """An object with named fields and no alternatives: its fields can be arguments."""
    if not isinstance(schema, Mapping) or "anyOf" in schema or "oneOf" in schema:
        return False
    kind = schema.get("type", "object")
    return kind == "object" and isinstance(schema.get("properties"), Mapping)


def _is_file(converter: SchemaConverter, schema: Any) -> bool:
    schema = converter.resolved(schema)
    if not isinstance(schema, Mapping):
        return False
    if schema.get("format") == "binary":
        return True
    return schema.get("type") == "array" and _is_file(converter, schema.get("items"))


def _without_files(converter: SchemaConverter, schema: Any, at: str) -> Any:
    """A form body without its file fields; a required file skips the operation."""
    if not _plain_object(schema):
        return schema
    props = schema["properties"]
    files = [name for name, prop in props.items() if _is_file(converter, prop)]
    if not files:
        return schema
    required = set(schema.get("required") or [])
    needed = [name for name in files if name in required]
    if needed:
        raise SkipOperation(f"it needs a file upload (field {needed[0]!r})", at)
    kept = {name: prop for name, prop in props.items() if name not in files}
    return {**schema, "properties": kept}


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
