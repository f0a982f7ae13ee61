"""An operation's request body -> arguments, the body's encoding and its media type.

- an object body is flattened into the arguments, unless a field is named like a parameter:
  then the whole body is one argument (`body`) and the description says so, so nothing is lost
  and no optional parameter turns required;
- a body that is not a plain object (an array, `oneOf`/`anyOf` alternatives) is one argument too;
- JSON (and JSON dialects: the chosen media type, such as Kubernetes'
  `application/merge-patch+json`, is kept as `content_type` and sent), form-encoded (its
  `encoding` kept as `styles`) and multipart bodies (their fields that are not files) are sent
  as such; a body the connector cannot send skips the operation when it is required.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.errors import ConnectorError
from connectors.manifest import BODY_ARG_METHODS, BODY_METHODS
from connectors.openapi_args import Arguments, described, parameter_style, safe_arg_name
from connectors.openapi_doc import deref, pointer
from connectors.openapi_schema import SchemaConverter


class SkipOperation(ConnectorError):
    """This operation cannot be imported; `pointer` is the JSON path of the problem."""

    def __init__(self, message: str, pointer: str) -> None:
        super().__init__(message)
        self.pointer = pointer


@dataclass(frozen=True)
class Body:
    arg: str | None = None  # the argument holding the whole body, if not flattened
    encoding: str = "json"
    note: str = ""  # said in the tool description
    content_type: str | None = None  # a JSON dialect's media type (merge-patch...), sent as is


_FORM = "application/x-www-form-urlencoded"
_MULTIPART = "multipart/form-data"
# JSON dialects in order of preference: plain JSON, then a patch shaped like the resource
# (merge patches, which a model writes best), other +json types, a JSON Patch (a list of
# operations), any type, and YAML types (JSON is YAML: Kubernetes' apply-patch+yaml)
_JSON_RANKS = (
    lambda m: m == "application/json",
    lambda m: m == "application/merge-patch+json",
    lambda m: m == "application/strategic-merge-patch+json",
    lambda m: m.endswith("+json") and m != "application/json-patch+json",
    lambda m: m == "text/json",  # Datadog's metric submission
    lambda m: m == "application/json-patch+json",
    lambda m: m == "*/*",
    lambda m: m.endswith("+yaml") or m == "application/yaml",
)


def _base_type(media: Any) -> str:
    return str(media).split(";")[0].strip().lower()


def request_body(
    converter: SchemaConverter,
    args: Arguments,
    notes: list[str],
    label: str,
    method: str,
    op: Mapping[str, Any],
    where: str,
) -> Body:
    raw = op.get("requestBody")
    if raw is None:
        return Body()
    body, at = deref(converter.doc, raw, f"{where}/requestBody")
    content = body.get("content") if isinstance(body, Mapping) else None
    if not isinstance(content, Mapping) or not content:
        return Body()
    required = body.get("required") is True
    media, encoding = pick_media(content)
    types = ", ".join(str(m) for m in content)
    if media is None or method.upper() not in BODY_ARG_METHODS:
        why = f"its request body ({types}) cannot be sent"
        if media is not None:
            why = f"{method.upper()} requests carry no body, and this one needs one"
        if required:
            raise SkipOperation(why, f"{at}/content")
        notes.append(f"{label}: optional request body ({types}) skipped")
        return Body()
    at_schema = f"{at}/content/{pointer(media)[2:]}/schema"
    media_object = content[media] if isinstance(content[media], Mapping) else {}
    schema = converter.convert(media_object.get("schema") or {}, at_schema)
    content_type = _base_type(media) if encoding == "json" else None
    if content_type in ("application/json", "*/*"):
        content_type = None
    sent_as = f" It is sent as {content_type}." if content_type else ""
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
            styles = _form_styles(converter, media_object, fields) if encoding == "form" else {}
            for name, prop in fields.items():
                arg = args.add(name, prop, required=name in needed)
                if arg != name:
                    args.wire_names[arg] = name
                if name in styles:
                    args.styles[arg] = styles[name]
            note = f"The request body is sent as {content_type}." if content_type else ""
            return Body(encoding=encoding, note=note, content_type=content_type)
        schema = resolved if encoding != "json" else schema
        arg = safe_arg_name("body", args.properties)
        names = ", ".join(f"`{c}`" for c in clashes)
        note = (
            f"The request body goes in the `{arg}` argument: its fields {names} share "
            f"names with parameters.{sent_as}"
        )
        if encoding == "form":
            args.styles.update(_form_styles(converter, media_object, fields))
    else:
        arg = safe_arg_name("body", args.properties)
        note = f"The request body goes in the `{arg}` argument.{sent_as}"
    description = body.get("description") if isinstance(body.get("description"), str) else ""
    args.add(arg, described(schema, description.strip()) if description.strip() else schema,
             required=required)  # fmt: skip
    return Body(arg=arg, encoding=encoding, note=note, content_type=content_type)


def pick_media(content: Mapping[str, Any]) -> tuple[str | None, str]:
    """The media type to send and its body encoding: JSON (or a JSON dialect) first, then
    form-encoded, then multipart."""
    for matches in _JSON_RANKS:
        for media in content:
            if matches(_base_type(media)):
                return str(media), "json"
    for wanted, encoding in ((_FORM, "form"), (_MULTIPART, "multipart")):
        for media in content:
            if _base_type(media) == wanted:
                return str(media), encoding
    return None, "json"


def _form_styles(
    converter: SchemaConverter, media: Mapping[str, Any], fields: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """A form body's `encoding` as `styles` entries by field name (OpenAPI: `style`, `explode`
    and `allowReserved` of an Encoding Object follow the query parameters' rules; a field
    without them keeps the manifest's default: lists repeated, objects as JSON, which is the
    Encoding Object's default `contentType` for an object)."""
    encodings = media.get("encoding") if isinstance(media.get("encoding"), Mapping) else {}
    styles: dict[str, dict[str, Any]] = {}
    for name, spec in encodings.items():
        if not isinstance(spec, Mapping) or name not in fields:
            continue
        if not any(key in spec for key in ("style", "explode", "allowReserved")):
            continue
        entry = parameter_style(spec, "query", converter.resolved(fields[name]))
        if entry is not None:
            styles[str(name)] = entry
    return styles


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
