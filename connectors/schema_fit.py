"""One tool's argument schema, shaped to fit a model request: shared parts once, bounded depth
and size.

A schema arrives as a root plus named definitions (`$defs`). Shaping keeps each definition once
(a definition used in one place only is written in place, where a model reads it best), cuts
nesting deeper than `max_depth` levels below the arguments (the cut node keeps its type and
description, with `CUT_NOTE`), and gives every array schema its `items` (model APIs refuse one
without). When the result is longer than `max_chars`, it is shaped again with less: shorter
descriptions, fewer enum values, shallower nesting; a schema that still does not fit raises
`SchemaTooLarge`, so a tool never makes every model request fail.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.config import DEFAULT_SCHEMA_MAX_CHARS
from bot.errors import ConnectorError

DEFS_PREFIX = "#/$defs/"
DATA_KEYWORDS = ("enum", "const", "default")  # JSON values, not schemas: never walked
DEFAULT_MAX_CHARS = DEFAULT_SCHEMA_MAX_CHARS  # the setting's default (`bot.config`)
DEFAULT_MAX_DEPTH = 8
CUT_NOTE = "(nested fields omitted)"
_CHILD_KEYS = ("properties", "items", "additionalProperties", "prefixItems", "anyOf", "oneOf")


class SchemaTooLarge(ConnectorError):
    """Even the smallest shape of a schema is over the size limit."""


@dataclass(frozen=True)
class SchemaBudget:
    """How big one tool's argument schema may be (characters of compact JSON) and how deep."""

    max_chars: int = DEFAULT_MAX_CHARS
    max_depth: int = DEFAULT_MAX_DEPTH


@dataclass(frozen=True)
class _Stage:
    depth: int
    top_chars: int | None  # descriptions of the arguments themselves
    nested_chars: int | None  # descriptions below them (0: none)
    max_enum: int | None


def schema_chars(schema: Any) -> int:
    """The size a schema adds to a model request (compact JSON)."""
    return len(json.dumps(schema, ensure_ascii=False, separators=(",", ":")))


def _stages(max_depth: int) -> list[_Stage]:
    """Ever smaller shapes: descriptions and enums shrink before nesting is cut."""
    return [
        _Stage(max_depth, None, None, None),
        _Stage(max_depth, None, 300, None),
        _Stage(max_depth, 300, 100, 50),
        _Stage(max_depth, 200, 0, 20),
        *(_Stage(min(max_depth, d), 160, 0, 20) for d in (5, 4, 3)),
        _Stage(min(max_depth, 2), 120, 0, 10),
        _Stage(1, 80, 0, 0),
        _Stage(1, 0, 0, 0),
    ]


def fit_schema(
    root: Mapping[str, Any], defs: Mapping[str, Any], budget: SchemaBudget = SchemaBudget()
) -> tuple[dict[str, Any], str]:
    """The shaped schema, and a note saying what was cut ('' when nothing was).

    The first stage usually fits; otherwise the smallest stage index that fits is found by
    bisection (each stage is smaller than the one before).
    """
    stages = _stages(budget.max_depth)
    tried: dict[int, tuple[dict[str, Any], int, int]] = {}

    def attempt(index: int) -> bool:
        shaper = _Shaper(defs, stages[index])
        shaped = shaper.shape(root)
        tried[index] = (shaped, schema_chars(shaped), shaper.cut)
        return tried[index][1] <= budget.max_chars

    if not attempt(0):
        low, high = 1, len(stages) - 1
        if not attempt(high):
            raise SchemaTooLarge(
                f"its argument schema needs {tried[high][1]} characters even when cut down "
                f"(the limit is {budget.max_chars})"
            )
        while low < high:
            middle = (low + high) // 2
            if attempt(middle):
                high = middle
            else:
                low = middle + 1
    index = min(i for i, (_, size, _) in tried.items() if size <= budget.max_chars)
    shaped, _, cut = tried[index]
    notes = [f"nesting below {stages[index].depth} level(s) omitted"] if cut else []
    if index:
        notes.append(f"descriptions and enums shortened to fit {budget.max_chars} characters")
    return shaped, "; ".join(notes)


def fit_whole_schema(schema: Mapping[str, Any], budget: SchemaBudget) -> Mapping[str, Any]:
    """A complete schema (its definitions under `$defs`) as it is when it fits, else shaped
    (an MCP server's input schema); raises `SchemaTooLarge`."""
    if schema_chars(schema) <= budget.max_chars:
        return schema
    defs = schema.get("$defs")
    root = {k: v for k, v in schema.items() if k != "$defs"}
    shaped, _ = fit_schema(root, defs if isinstance(defs, Mapping) else {}, budget)
    return shaped


class _Shaper:
    """One shaping pass at one stage."""

    def __init__(self, defs: Mapping[str, Any], stage: _Stage) -> None:
        self.defs = defs
        self.stage = stage
        self.cut = 0

    def shape(self, root: Mapping[str, Any]) -> dict[str, Any]:
        depths = self._min_depths(root)
        out_root = self._node(root, 0)
        out_defs = {name: self._node(self.defs[name], depth) for name, depth in depths.items()}
        edges = {name: refs_in(schema) for name, schema in out_defs.items()}
        uses = Counter(refs_in(out_root))
        for targets in edges.values():
            uses.update(targets)
        recursive = in_cycles(edges)
        inline = {n for n in out_defs if uses[n] == 1 and n not in recursive}
        kept = {n: _inline(s, out_defs, inline) for n, s in out_defs.items() if n not in inline}
        shaped = dict(_inline(out_root, out_defs, inline))
        if kept:
            shaped["$defs"] = kept
        return shaped

    # depth: the arguments are level 1; a property, `items` or `additionalProperties` is one
    # level below its schema; `anyOf`/`oneOf` alternatives are on the level of their schema
    def _children(self, node: Mapping[str, Any], depth: int) -> list[tuple[Any, int]]:
        found: list[tuple[Any, int]] = []
        props = node.get("properties")
        if isinstance(props, Mapping):
            found += [(v, depth + 1) for v in props.values()]
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), Mapping):
                found.append((node[key], depth + 1))
        for key, step in (("prefixItems", 1), ("anyOf", 0), ("oneOf", 0)):
            if isinstance(node.get(key), list):
                found += [(v, depth + step) for v in node[key]]
        return found

    def _is_cut(self, node: Mapping[str, Any], depth: int) -> bool:
        return depth >= self.stage.depth and self._nests(node, set())

    def _nests(self, node: Any, seen: set[str]) -> bool:
        """Does the node hold fields or elements (itself or in its alternatives)?"""
        if not isinstance(node, Mapping):
            return False
        name = ref_name(node)
        if name is not None:
            if name in seen or name not in self.defs:
                return name in seen
            return self._nests(self.defs[name], seen | {name})
        if node.get("properties") or isinstance(node.get("additionalProperties"), Mapping):
            return True
        if isinstance(node.get("items"), Mapping) and node["items"]:
            return True
        if node.get("prefixItems"):
            return True
        alternatives = [*(node.get("anyOf") or []), *(node.get("oneOf") or [])]
        return any(self._nests(alt, seen) for alt in alternatives)

    def _min_depths(self, root: Mapping[str, Any]) -> dict[str, int]:
        """The shallowest level each kept definition is used at (definitions only reached
        below the cut are not kept)."""
        best: dict[str, int] = {}
        pending: list[tuple[Any, int]] = [(root, 0)]
        while pending:
            node, depth = pending.pop()
            if not isinstance(node, Mapping) or self._is_cut(node, depth):
                continue
            name = ref_name(node)
            if name is not None:
                if name in self.defs and depth < best.get(name, depth + 1):
                    best[name] = depth
                    pending.append((self.defs[name], depth))
                continue
            pending.extend(self._children(node, depth))
        return best

    def _node(self, node: Any, depth: int) -> Any:
        if not isinstance(node, Mapping):
            return node
        if self._is_cut(node, depth):
            self.cut += 1
            return self._stub(node, depth)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "properties" and isinstance(value, Mapping):
                out[key] = {name: self._node(v, depth + 1) for name, v in value.items()}
            elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
                out[key] = self._node(value, depth + 1)
            elif key in ("prefixItems", "anyOf", "oneOf") and isinstance(value, list):
                step = 1 if key == "prefixItems" else 0
                out[key] = [self._node(v, depth + step) for v in value]
            elif key == "description":
                text = self._description(value, depth)
                if text:
                    out[key] = text
            else:
                out[key] = value
        return self._finish(out)

    def _finish(self, out: dict[str, Any]) -> dict[str, Any]:
        limit = self.stage.max_enum
        enum = out.get("enum")
        if limit is not None and isinstance(enum, list) and len(enum) > limit:
            del out["enum"]
            if limit and out.get("description"):
                sample = ", ".join(json.dumps(v) for v in enum[:3])
                out["description"] += f" (one of {len(enum)} values, e.g. {sample})"
        for key in ("anyOf", "oneOf"):
            if isinstance(out.get(key), list):
                unique = [a for i, a in enumerate(out[key]) if a not in out[key][:i]]
                if len(unique) == 1 and isinstance(unique[0], Mapping):
                    del out[key]
                    out = {**unique[0], **out}
                else:
                    out[key] = unique
        kinds = out.get("type")
        is_array = kinds == "array" or (isinstance(kinds, list) and "array" in kinds)
        if is_array and "items" not in out and "prefixItems" not in out:
            out["items"] = {}
        return out

    def _stub(self, node: Mapping[str, Any], depth: int) -> dict[str, Any]:
        """A cut node: its own scalar keywords (type, format, enum...) and a note."""
        target = self._target(node)
        out = {k: v for k, v in target.items() if k not in _CHILD_KEYS and k != "$ref"}
        out.update({k: v for k, v in node.items() if k not in _CHILD_KEYS and k != "$ref"})
        if "type" not in out:
            kinds = [
                self._target(alt).get("type")
                for key in ("anyOf", "oneOf")
                for alt in target.get(key) or []
                if isinstance(alt, Mapping)
            ]
            flat = [k for kind in kinds for k in (kind if isinstance(kind, list) else [kind])]
            if flat and all(isinstance(k, str) for k in flat):
                out["type"] = list(dict.fromkeys(flat)) if len(set(flat)) > 1 else flat[0]
        text = self._description(out.get("description", ""), depth)
        out["description"] = f"{text} {CUT_NOTE}" if text else CUT_NOTE
        return self._finish(out)

    def _target(self, node: Mapping[str, Any]) -> Mapping[str, Any]:
        seen: set[str] = set()
        while (name := ref_name(node)) is not None and name not in seen and name in self.defs:
            seen.add(name)
            target = self.defs[name]
            if not isinstance(target, Mapping):
                break
            node = target
        return node

    def _description(self, text: Any, depth: int) -> str:
        if not isinstance(text, str):
            return ""
        limit = self.stage.top_chars if depth <= 1 else self.stage.nested_chars
        return text if limit is None else cut_text(text, limit)


def cut_text(text: str, limit: int) -> str:
    """`text` in at most `limit` characters, cut at a word boundary with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    if limit <= 1:
        return ""
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space >= limit // 2:
        head = head[:space]
    return head.rstrip(" ,;:.") + "…"


def ref_name(schema: Any) -> str | None:
    """The `$defs` name a schema points at, if it is a local reference (`#/$defs/<name>`)."""
    if isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str):
        ref = schema["$ref"]
        if ref.startswith(DEFS_PREFIX):
            return ref[len(DEFS_PREFIX) :]
    return None


def refs_in(schema: Any) -> list[str]:
    """Names of the `$defs` a schema refers to, anywhere inside it (with repeats)."""
    found: list[str] = []
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            name = ref_name(node)
            if name is not None:
                found.append(name)
            stack.extend(v for k, v in node.items() if k not in DATA_KEYWORDS)
        elif isinstance(node, list):
            stack.extend(node)
    return found


def in_cycles(edges: Mapping[str, list[str]]) -> set[str]:
    """The nodes of a directed graph that lie on a cycle (Tarjan's strongly connected
    components, iteratively: no recursion limit, linear time)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[str] = set()
    graph = {node: [t for t in targets if t in edges] for node, targets in edges.items()}
    for start in graph:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            targets = graph[node]
            if child < len(targets):
                work.append((node, child + 1))
                target = targets[child]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    found.update(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def _inline(node: Any, defs: Mapping[str, Any], inline: set[str]) -> Any:
    """Write the definitions in `inline` in place of their one reference."""
    if isinstance(node, list):
        return [_inline(v, defs, inline) for v in node]
    if not isinstance(node, Mapping):
        return node
    name = ref_name(node)
    if name is not None and name in inline:
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        target = _inline(defs[name], defs, inline)
        return {**target, **siblings} if isinstance(target, Mapping) else target
    return {k: (v if k in DATA_KEYWORDS else _inline(v, defs, inline)) for k, v in node.items()}
