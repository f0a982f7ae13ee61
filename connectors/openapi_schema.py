"""OpenAPI schemas -> the JSON Schema a model's function-calling API accepts.

OpenAPI 3.0 speaks a dialect of JSON Schema (`nullable`, boolean `exclusiveMinimum`, `example`,
`discriminator`, `xml`...), 3.1 speaks 2020-12 plus older keywords (`$recursiveRef`). Model APIs
accept a plain subset, so the converter keeps only `MODEL_KEYWORDS`, and only where they are
keywords: the names under `properties` are data, never stripped. `allOf` is merged into one
schema, `anyOf`/`oneOf` are kept, `nullable` and recursion are translated, and what a request must
not send (`readOnly` properties) is left out.

Every referenced schema is converted once per document and named in `$defs`: a schema shared
by many operations (or by many fields of one) costs its size once, not once per use, so a small
document with shared references cannot blow up. `schema_fit.fit_schema` then shapes one tool's
schema (depth, size).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any

from connectors.openapi_doc import RefError, resolve_pointer
from connectors.openapi_readonly import drop_required, is_read_only, read_only_names
from connectors.schema_fit import DATA_KEYWORDS, DEFS_PREFIX, ref_name, refs_in

MODEL_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "items", "prefixItems", "additionalProperties",
        "enum", "const", "default", "description", "anyOf", "oneOf", "format", "pattern",
        "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
        "multipleOf", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties",
    }
)  # fmt: skip
_SUBSCHEMA = ("items", "additionalProperties")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "prefixItems")
_RECURSIVE_REFS = ("$recursiveRef", "$dynamicRef")
_DEF_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
MAX_DEF_NAME = 64


def _plain(value: Any) -> Any:
    """A JSON value: YAML's dates and times become ISO strings."""
    if isinstance(value, datetime.date | datetime.datetime | datetime.time):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


class SchemaConverter:
    """Converts the schemas of one document; `defs` holds every referenced schema, converted once.

    `notes` collects what was dropped or could not be expressed (each once per document).
    """

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.doc = doc
        self._names: dict[str, str] = {}  # source $ref -> name in $defs
        self._sources: dict[str, str] = {}  # name in $defs -> source $ref
        self._taken: set[str] = set()
        self.defs: dict[str, Any] = {}  # name -> converted schema (None until converted)
        self._pending: list[str] = []  # $refs named but not converted yet
        self._open: list[str] = []  # $refs being converted, innermost last
        self._broken: dict[str, RefError] = {}  # name -> why its schema cannot be converted
        self._def_refs: dict[str, list[str]] = {}  # name -> the names its schema refers to
        self.notes: list[str] = []

    # --- public ----------------------------------------------------------------------------

    def convert(self, schema: Any, where: str) -> Any:
        """A converted schema; `$ref`s become `#/$defs/<name>` (see `closure`).

        Referenced schemas are converted from a work list, not by recursion, so a long chain
        of references (entity -> owner -> entity...) costs no stack.
        """
        converted = self._convert(schema, where)
        while self._pending:
            self._define_now(self._pending[-1])
        return converted

    def closure(self, schema: Any) -> dict[str, Any]:
        """The `$defs` a converted schema needs, directly or through other definitions;
        raises the `RefError` of one that could not be converted."""
        needed: dict[str, Any] = {}
        pending = list(refs_in(schema))
        while pending:
            name = pending.pop()
            if name in needed:
                continue
            if name in self._broken:
                raise self._broken[name]
            needed[name] = self.defs[name]
            if name not in self._def_refs:
                self._def_refs[name] = refs_in(needed[name])
            pending.extend(self._def_refs[name])
        return needed

    def resolved(self, schema: Any) -> Any:
        """A converted schema with a top-level reference followed (for shape decisions)."""
        seen: set[str] = set()
        while (name := ref_name(schema)) is not None and name not in seen:
            seen.add(name)
            target = self.defs.get(name)
            if target is None:
                return schema
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **siblings} if isinstance(target, Mapping) else target
        return schema

    # --- conversion ------------------------------------------------------------------------

    def _convert(self, node: Any, where: str) -> Any:
        if node is True or node is None:
            return {}
        if node is False:
            return False
        if not isinstance(node, Mapping):
            raise RefError(f"schema is not an object ({type(node).__name__})", where)
        if isinstance(node.get("$ref"), str):
            out: dict[str, Any] = {"$ref": DEFS_PREFIX + self._define(node["$ref"])}
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return self._with_siblings(out, rest, where)
        for keyword in _RECURSIVE_REFS:
            if isinstance(node.get(keyword), str):
                rest = {k: v for k, v in node.items() if k != keyword}
                return self._with_siblings(self._recursion(node[keyword], where), rest, where)
        if isinstance(node.get("allOf"), list):
            return self._all_of(node, where)
        out = {}
        for key, value in node.items():
            if key == "properties" and isinstance(value, Mapping):
                out[key] = self._properties(node, value, f"{where}/properties")
            elif key in _SUBSCHEMA and isinstance(value, Mapping | bool):
                out[key] = (
                    value
                    if isinstance(value, bool) and key == "additionalProperties"
                    else self._convert(value, f"{where}/{key}")
                )
            elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
                out[key] = [self._convert(v, f"{where}/{key}/{i}") for i, v in enumerate(value)]
            elif key in DATA_KEYWORDS:
                out[key] = _plain(value)
            elif key == "pattern":
                if _compiles(value):
                    out[key] = value
                else:
                    self._note(f"{where}/pattern: not a regular expression Python reads; dropped")
            elif key == "type" and value is None:
                continue
            elif key == "contentMediaType" and "format" not in node and _is_binary_media(value):
                out["format"] = "binary"  # 3.1's way of saying "a file"
            elif key in MODEL_KEYWORDS:
                out[key] = _plain(value)
        _exclusive_bounds(out)
        if isinstance(out.get("required"), list):
            drop_required(out, read_only_names(self.doc, node))
        return _nullable(out) if node.get("nullable") is True else out

    def _properties(self, owner: Mapping[str, Any], props: Mapping[str, Any], where: str) -> dict:
        read_only = {name for name, prop in props.items() if is_read_only(self.doc, prop)}
        return {
            str(name): self._convert(prop, f"{where}/{_escape(str(name))}")
            for name, prop in props.items()
            if name not in read_only
        }

    def _with_siblings(self, out: dict[str, Any], rest: Mapping[str, Any], where: str) -> Any:
        """`$ref` with `description`/`nullable` beside it (3.1, and common in 3.0 documents)."""
        if not rest:
            return out
        extra = self._convert({k: v for k, v in rest.items() if k != "nullable"}, where)
        if isinstance(extra, Mapping):
            out.update({k: v for k, v in extra.items() if k != "$ref"})
        return _nullable(out) if rest.get("nullable") is True else out

    def _recursion(self, target: str, where: str) -> dict[str, Any]:
        """`$recursiveRef: "#"` / `$dynamicRef`: the schema being defined, i.e. recursion."""
        if target.startswith("#") and self._open:
            return {"$ref": DEFS_PREFIX + self._names[self._open[-1]]}
        self._note(f"{where}: {target!r} (dynamic reference) left open")
        return {}

    def _define(self, ref: str) -> str:
        """The `$defs` name of a referenced schema (converted later, by `convert`)."""
        name = self._names.get(ref)
        if name is not None:
            return name
        resolve_pointer(self.doc, ref)  # a reference that does not resolve fails here
        name = self._new_name(ref)
        self._names[ref] = name
        self._sources[name] = ref
        self.defs[name] = None
        self._pending.append(ref)
        return name

    def _define_now(self, ref: str) -> Any:
        """The converted schema of a reference (None while it is itself being converted)."""
        name = self._define(ref)
        if ref not in self._pending:
            return self.defs[name]
        self._pending.remove(ref)
        self._open.append(ref)
        try:
            self.defs[name] = self._convert(resolve_pointer(self.doc, ref), ref)
        except RefError as exc:
            self._broken[name] = exc
            self.defs[name] = {}
            raise
        finally:
            self._open.pop()
        return self.defs[name]

    def _content(self, schema: Any) -> Any:
        """A converted schema with its top-level references followed and converted now."""
        seen: set[str] = set()
        while (name := ref_name(schema)) is not None and name not in seen:
            seen.add(name)
            target = self._define_now(self._sources[name])
            if target is None:  # being converted: a schema that contains itself
                return schema
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **siblings} if isinstance(target, Mapping) else target
        return schema

    def _new_name(self, ref: str) -> str:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in ref.lstrip("#/").split("/")]
        if tokens[:2] == ["components", "schemas"] and len(tokens) > 2:
            tokens = tokens[2:]
        else:
            tokens = tokens[-3:]
        base = _DEF_NAME_CHARS.sub("_", "_".join(tokens)).strip("_")[:MAX_DEF_NAME] or "schema"
        name, n = base, 2
        while name in self._taken:
            suffix = f"_{n}"
            name, n = base[: MAX_DEF_NAME - len(suffix)] + suffix, n + 1
        self._taken.add(name)
        return name

    def _all_of(self, node: Mapping[str, Any], where: str) -> Any:
        """`allOf` merged into one schema: properties and `required` united, the schema's own
        keywords (description, nullable...) over its members', earlier members over later."""
        members = node["allOf"]
        if len(members) == 1 and isinstance(members[0], Mapping) and "$ref" in members[0]:
            # OpenAPI 3.0's way to put a description or nullable beside a $ref
            return self._convert({**members[0], **{k: v for k, v in node.items() if k != "allOf"}},
                                 where)  # fmt: skip
        merged: dict[str, Any] = {}
        for index, member in enumerate(members):
            converted = self._convert(member, f"{where}/allOf/{index}")
            content = self._content(converted)
            if ref_name(content) is not None:  # a member that refers back to itself
                self._note(f"{where}/allOf/{index}: recursive member left out")
                continue
            if isinstance(content, Mapping):
                merged = merge_schemas(merged, content, self._note, f"{where}/allOf/{index}")
        own = {k: v for k, v in node.items() if k not in ("allOf", "nullable")}
        outer = self._convert(own, where) if own else {}
        if isinstance(outer, Mapping):
            merged = merge_schemas(outer, merged, self._note, where)
        if isinstance(merged.get("required"), list):  # a member may require another's field
            drop_required(merged, read_only_names(self.doc, node))
        return _nullable(merged) if node.get("nullable") is True else merged

    def _note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)


def merge_schemas(
    first: Mapping[str, Any], second: Mapping[str, Any], note: Any, where: str
) -> dict:
    """Two converted schemas as one (both must hold): `first` wins where they disagree."""
    out = dict(first)
    for key, value in second.items():
        if key not in out:
            out[key] = value
        elif key == "properties":
            props = dict(out[key])
            for name, prop in value.items():
                if name in props and isinstance(props[name], Mapping) and isinstance(prop, Mapping):
                    props[name] = merge_schemas(props[name], prop, note, where)
                else:
                    props.setdefault(name, prop)
            out[key] = props
        elif key == "required":
            out[key] = list(dict.fromkeys([*out[key], *value]))
        elif key == "additionalProperties":
            out[key] = False if out[key] is False or value is False else out[key]
        elif key == "enum" and isinstance(value, list) and isinstance(out[key], list):
            both = [v for v in out[key] if v in value]
            out[key] = both or out[key]
        elif key in ("anyOf", "oneOf") and out[key] != value:
            note(f"{where}: two {key} alternatives in one allOf; the first kept")
    return out


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI 3.0 `nullable: true` in JSON Schema terms."""
    kind = schema.get("type")
    if isinstance(kind, str):
        schema = {**schema, "type": [kind, "null"]}
    elif isinstance(kind, list):
        schema = {**schema, "type": kind if "null" in kind else [*kind, "null"]}
    elif "$ref" in schema:
        described = {k: v for k, v in schema.items() if k == "description"}
        bare = {k: v for k, v in schema.items() if k != "description"}
        return {"anyOf": [bare, {"type": "null"}], **described}
    elif isinstance(schema.get("anyOf"), list) or isinstance(schema.get("oneOf"), list):
        key = "anyOf" if "anyOf" in schema else "oneOf"
        if {"type": "null"} not in schema[key]:
            schema = {**schema, key: [*schema[key], {"type": "null"}]}
        return schema
    else:
        return schema  # no type: null is already allowed
    if isinstance(schema.get("enum"), list) and None not in schema["enum"]:
        schema["enum"] = [*schema["enum"], None]
    return schema


def _exclusive_bounds(out: dict[str, Any]) -> None:
    """OpenAPI 3.0's boolean exclusiveMinimum/Maximum -> 2020-12's numeric bounds."""
    for bound, exclusive in (("maximum", "exclusiveMaximum"), ("minimum", "exclusiveMinimum")):
        flag = out.get(exclusive)
        if isinstance(flag, bool):
            del out[exclusive]
            if flag and bound in out:
                out[exclusive] = out.pop(bound)


def _is_binary_media(media: Any) -> bool:
    text = str(media).lower()
    return not (text.startswith("text/") or "json" in text or "xml" in text)


def _compiles(pattern: Any) -> bool:
    if not isinstance(pattern, str):
        return False
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")
