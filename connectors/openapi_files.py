"""A document split over files (DigitalOcean's layout) -> one self-contained document.

DigitalOcean's specification keeps each operation, parameter list and model in its own file
(`get: {$ref: 'resources/droplets/droplets_list.yml'}`, `$ref: 'models/droplet.yml'`). The
importer only follows local references, so such a document imported with empty actions. Here
every relative file reference is followed from the folder of the file that holds it, the way
bundlers (swagger-cli, redocly) do:
- a schema (a `$ref` met where a schema is expected) is copied once into the schemas section
  (`components/schemas`, Swagger 2.0's `definitions`) under a free name, so recursive and shared
  models keep their shape and their size is paid once;
- anything else (a path item, an operation, a parameter, a response) is copied in place.

Nothing is fetched: a `http(s)://` reference, one that leaves the document's folder tree, a file
that cannot be read and a cycle of references that never reaches an object are refused. A
refused reference is left in the document with its reason recorded under `REFUSED_KEY`, so the
import skips just the operations that need it and says why (`openapi_doc.resolve_pointer`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from connectors.manifest import ManifestError
from connectors.openapi_doc import REFUSED_KEY, RefError, parse_spec_text, resolve_pointer

MAX_FILES = 5_000
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_EXTERNAL_REF = re.compile(r"""["']?\$ref["']?\s*:\s*["']?(?!#)[^\s"',}]""")
_DATA_KEYS = frozenset({"example", "examples", "enum", "default", "const"})
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")

Target = tuple[Path, str]  # a file and a JSON Pointer fragment in it ("" for the whole file)


class _Refused(Exception):
    """A reference that is not followed; the message is why."""


def has_file_refs(text: str) -> bool:
    """Whether a document's text has a `$ref` that is not local (a cheap check on the text)."""
    return _EXTERNAL_REF.search(text) is not None


@dataclass
class _Bundle:
    root: Path
    doc: dict[str, Any]
    schemas_at: tuple[str, ...]
    files: dict[Path, Any] = field(default_factory=dict)
    placed: dict[Target, str] = field(default_factory=dict)  # target -> name among the schemas
    schemas: dict[str, Any] = field(default_factory=dict)  # name -> bundled schema
    pending: list[tuple[str, Target]] = field(default_factory=list)
    inlining: list[Target] = field(default_factory=list)  # non-schema targets being copied
    refused: dict[str, str] = field(default_factory=dict)  # the $ref as left -> why

    @property
    def folder(self) -> Path:
        return self.root.parent


def bundle(path: Path, doc: dict[str, Any], *, schemas_at: tuple[str, ...]) -> dict[str, Any]:
    """`doc` (read from `path`) with every relative file reference copied in.

    `schemas_at` is where schemas live: `("components", "schemas")` in OpenAPI 3,
    `("definitions",)` in Swagger 2.0.
    """
    root = path.resolve()
    state = _Bundle(root=root, doc=doc, schemas_at=schemas_at, files={root: doc})
    existing = _at(doc, schemas_at)
    out = _walk(state, _without(doc, schemas_at), root, in_schema=False)
    if isinstance(existing, Mapping):  # the document's own schemas: walked as schemas
        walked = {k: _walk(state, v, root, in_schema=True) for k, v in existing.items()}
        _set(out, schemas_at, walked)
    while state.pending:
        name, target = state.pending.pop()
        try:
            state.schemas[name] = _walk(state, _resolve(state, target), target[0], in_schema=True)
        except _Refused as exc:  # the whole file: every use of this schema is refused
            state.schemas[name] = {}
            state.refused[_local(state, name)] = str(exc)
    if state.schemas:
        section = dict(_at(out, schemas_at) or {})
        section.update(state.schemas)
        _set(out, schemas_at, section)
    _refuse_alias_cycles(state)
    if state.refused:
        out[REFUSED_KEY] = dict(state.refused)
    return out


def _walk(state: _Bundle, node: Any, file: Path, *, in_schema: bool) -> Any:
    if isinstance(node, list):
        return [_walk(state, item, file, in_schema=in_schema) for item in node]
    if not isinstance(node, Mapping):
        return node
    if isinstance(node.get("$ref"), str):
        return _reference(state, node, file, in_schema=in_schema)
    out: dict[str, Any] = {}
    for name, value in node.items():
        name = str(name)
        if name.startswith("x-") or (in_schema and name in _DATA_KEYS):
            out[name] = value  # extensions and example data are not followed
        elif in_schema and name == "properties" and isinstance(value, Mapping):
            try:
                out[name] = _properties(state, value, file)
            except _Refused as exc:  # the schema is refused whole: its fields are unknown
                shown = _shown(state, str(value["$ref"]), file)
                state.refused[shown] = str(exc)
                return {"$ref": shown}
        else:
            child = in_schema or name == "schema"
            out[name] = _walk(state, value, file, in_schema=child)
    return out


def _properties(state: _Bundle, value: Mapping[str, Any], file: Path) -> dict[str, Any]:
    """A schema's `properties`, each walked as a schema. The map itself may be a reference
    to a map in another file, as bundlers allow (DigitalOcean's load balancers:
    `properties: {$ref: 'attributes.yml#/load_balancer_droplet_ids'}`); it is copied in.
    Raises `_Refused` when that map cannot be had."""
    ref = value.get("$ref")
    if not (isinstance(ref, str) and len(value) == 1):
        return {str(p): _walk(state, v, file, in_schema=True) for p, v in value.items()}
    target = _target(state, ref, file)
    if target in state.inlining:
        chain = " -> ".join(_named(state, t) for t in [*state.inlining, target])
        raise _Refused(f"is a cycle of $refs ({chain})")
    resolved = _resolve(state, target)
    if not isinstance(resolved, Mapping):
        raise _Refused(f"({_named(state, target)}) is not a map of properties")
    state.inlining.append(target)
    try:
        return {str(p): _walk(state, v, target[0], in_schema=True) for p, v in resolved.items()}
    finally:
        state.inlining.pop()


def _reference(state: _Bundle, node: Mapping[str, Any], file: Path, *, in_schema: bool) -> Any:
    ref = str(node["$ref"])
    siblings = {k: v for k, v in node.items() if k != "$ref"}
    rest = _walk(state, siblings, file, in_schema=in_schema) if siblings else {}
    try:
        target = _target(state, ref, file)
        if target[0] == state.root:  # the document itself: a local reference
            return {"$ref": "#" + target[1], **rest}
        if in_schema:
            return {"$ref": _local(state, _place(state, target)), **rest}
        content = _inline(state, target)
    except _Refused as exc:
        shown = _shown(state, ref, file)
        state.refused[shown] = str(exc)
        return {"$ref": shown, **rest}
    if isinstance(content, Mapping) and rest:
        return {**content, **rest}
    return content


def _inline(state: _Bundle, target: Target) -> Any:
    """A path item, operation, parameter or response from another file, copied in place."""
    if target in state.inlining:
        chain = " -> ".join(_named(state, t) for t in [*state.inlining, target])
        raise _Refused(f"is a cycle of $refs ({chain})")
    state.inlining.append(target)
    try:
        return _walk(state, _resolve(state, target), target[0], in_schema=False)
    finally:
        state.inlining.pop()


def _target(state: _Bundle, ref: str, file: Path) -> Target:
    """The file and fragment a reference names, or why it is not followed."""
    if _SCHEME.match(ref):
        if ref.lower().startswith(("http://", "https://")):
            raise _Refused(
                "is on the network, and chatops does not fetch documents: "
                "save it beside the document and refer to it by a relative path"
            )
        raise _Refused(f"uses the {ref.split(':', 1)[0]}: scheme; only relative paths are followed")
    location, _, fragment = ref.partition("#")
    if not location:
        return file, fragment
    target = (file.parent / unquote(location)).resolve()
    if not target.is_relative_to(state.folder):
        raise _Refused(f"leaves the document's folder ({state.folder})")
    return target, fragment


def _resolve(state: _Bundle, target: Target) -> Any:
    file, fragment = target
    if file not in state.files:
        if len(state.files) >= MAX_FILES:
            raise _Refused(f"would be file number {MAX_FILES + 1}; that is too many")
        shown = _relative(state, file)
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise _Refused(f"({shown}) cannot be read: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise _Refused(f"({shown}) is not UTF-8 text") from None
        try:
            state.files[file] = parse_spec_text(text, shown)
        except ManifestError as exc:
            raise _Refused(f"({exc})") from None
    try:
        return resolve_pointer(state.files[file], "#" + fragment)
    except RefError:
        raise _Refused(f"({_relative(state, file)}#{fragment}) does not resolve") from None


def _place(state: _Bundle, target: Target) -> str:
    """The name a schema from another file has among the document's schemas."""
    name = state.placed.get(target)
    if name is not None:
        return name
    _resolve(state, target)  # a file or pointer that is not there is refused where it is named
    raw = unquote(target[1]).rstrip("/").rsplit("/", 1)[-1] or target[0].stem
    base = _NAME_CHARS.sub("_", raw).strip("_") or "schema"
    taken = _at(state.doc, state.schemas_at) or {}
    name, n = base, 2
    while name in taken or name in state.schemas:
        name, n = f"{base}_{n}", n + 1
    state.placed[target] = name
    state.schemas[name] = {}
    state.pending.append((name, target))
    return name


def _refuse_alias_cycles(state: _Bundle) -> None:
    """A schema that is only a `$ref` to a schema that is only a `$ref`... back to itself."""
    prefix = _local(state, "")
    for start in state.schemas:
        seen: list[str] = []
        name: str | None = start
        while name is not None and name not in seen:
            seen.append(name)
            node = state.schemas.get(name)
            ref = node.get("$ref") if isinstance(node, Mapping) and len(node) == 1 else None
            name = ref[len(prefix) :] if isinstance(ref, str) and ref.startswith(prefix) else None
        if name is not None and name == start:
            chain = " -> ".join([*seen, start])
            state.refused[_local(state, start)] = f"is a cycle of $refs ({chain})"


def _local(state: _Bundle, name: str) -> str:
    escaped = (t.replace("~", "~0").replace("/", "~1") for t in (*state.schemas_at, name))
    return "#/" + "/".join(escaped)


def _relative(state: _Bundle, file: Path) -> str:
    return os.path.relpath(file, state.folder)


def _shown(state: _Bundle, ref: str, file: Path) -> str:
    """A refused reference as the user reads it: relative to the document's folder."""
    if _SCHEME.match(ref) or file == state.root:
        return ref
    location, hashed, fragment = ref.partition("#")
    if not location:
        return f"{_relative(state, file)}#{fragment}"
    return os.path.normpath(os.path.join(os.path.dirname(_relative(state, file)), location)) + (
        hashed + fragment
    )


def _named(state: _Bundle, target: Target) -> str:
    file, fragment = target
    return _relative(state, file) + (f"#{fragment}" if fragment else "")


def _at(doc: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    node: Any = doc
    for key in keys:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node


def _without(doc: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """A shallow copy of `doc` without the section at `keys`."""
    out = dict(doc)
    if len(keys) == 1:
        out.pop(keys[0], None)
    elif isinstance(out.get(keys[0]), Mapping):
        out[keys[0]] = _without(out[keys[0]], keys[1:])
    return out


def _set(doc: dict[str, Any], keys: tuple[str, ...], value: Any) -> None:
    node = doc
    for key in keys[:-1]:
        node[key] = dict(node.get(key) or {})
        node = node[key]
    node[keys[-1]] = value
