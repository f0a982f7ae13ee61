"""OpenAPI 3.0 / 3.1 document -> connector manifest (`chatops manifests import-openapi`).

One operation becomes one action: operationId -> name, path and query parameters plus the JSON
request body -> one JSON Schema of arguments, every operation but GET is marked `mutating: true`
with `approval: auto` (so it waits for a human). Only local `$ref`s (`#/...`) are followed. The
result is validated as a manifest before it is written, so an import never produces a file the
bot refuses.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from connectors.loading import parse_manifest
from connectors.manifest import PATH_PARAM_RE, ManifestError

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
BODY_METHODS = frozenset({"post", "put", "patch"})
PLACEHOLDER_BASE = "https://api.example.com"
_OPENAPI_ONLY = ("discriminator", "xml", "externalDocs", "nullable")
_MAX_REF_DEPTH = 12


def load_spec(path: Path) -> dict[str, Any]:
    """An OpenAPI document from JSON or YAML (JSON is YAML)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read: {exc.strerror}", path=path) from None
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{path}: not UTF-8 text (byte {exc.start})", path=path) from None
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        raise ManifestError(f"{path}: not JSON or YAML: {exc}", path=path) from None
    if not isinstance(data, dict) or not str(data.get("openapi", "")).startswith("3."):
        raise ManifestError(f"{path}: not an OpenAPI 3.x document (no 'openapi: 3.x')", path=path)
    return data


class _Refs:
    """Resolves local `$ref`s, replacing a cycle or a too-deep chain with an open schema."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.doc = doc

    def lookup(self, ref: str) -> Any:
        if not ref.startswith("#/"):
            raise ManifestError(f"only local $refs are supported, not {ref!r}")
        node: Any = self.doc
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or part not in node:
                raise ManifestError(f"$ref {ref!r} does not resolve")
            node = node[part]
        return node

    def resolve(self, node: Any, seen: tuple[str, ...] = ()) -> Any:
        if isinstance(node, Mapping):
            ref = node.get("$ref")
            if isinstance(ref, str):
                if ref in seen or len(seen) >= _MAX_REF_DEPTH:
                    return {"type": "object", "description": f"(recursive {ref.split('/')[-1]})"}
                return self.resolve(self.lookup(ref), (*seen, ref))
            return {key: self.resolve(value, seen) for key, value in node.items()}
        if isinstance(node, list):
            return [self.resolve(item, seen) for item in node]
        return node


def to_json_schema(schema: Any) -> Any:
    """OpenAPI 3.0 schema dialect -> JSON Schema 2020-12 (nullable, boolean exclusive bounds)."""
    if isinstance(schema, list):
        return [to_json_schema(item) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {k: to_json_schema(v) for k, v in schema.items() if k not in _OPENAPI_ONLY}
    if schema.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    for bound, exclusive in (("maximum", "exclusiveMaximum"), ("minimum", "exclusiveMinimum")):
        flag = out.get(exclusive)
        if isinstance(flag, bool):
            del out[exclusive]
            if flag and bound in out:
                out[exclusive] = out.pop(bound)
    return out


def _name(raw: str) -> str:
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", raw)
    name = re.sub(r"[^a-zA-Z0-9_-]+", "_", name)
    name = re.sub(r"_{2,}", "_", name).strip("_").lower()
    return name or "action"


def _base_url(doc: Mapping[str, Any]) -> tuple[str, list[str]]:
    notes: list[str] = []
    servers = doc.get("servers") or []
    url = servers[0].get("url", "") if servers and isinstance(servers[0], Mapping) else ""
    if servers:
        for var, spec in (servers[0].get("variables") or {}).items():
            url = url.replace("{" + var + "}", str(spec.get("default", "")))
    if not re.match(r"^https?://[^/?#]+", url):
        notes.append(f"no absolute server URL in the spec: base_url set to {PLACEHOLDER_BASE}")
        url = PLACEHOLDER_BASE + (url if url.startswith("/") else "")
    return url.rstrip("/"), notes


def _auth(doc: Mapping[str, Any], name: str) -> dict[str, Any]:
    schemes = (doc.get("components") or {}).get("securitySchemes") or {}
    wanted = [key for req in doc.get("security") or [] for key in req] or list(schemes)
    prefix = re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_")
    for key in wanted:
        scheme = schemes.get(key) or {}
        kind = scheme.get("type")
        if kind == "http" and str(scheme.get("scheme", "")).lower() == "basic":
            return {
                "type": "basic",
                "username_env": f"{prefix}_USERNAME",
                "password_env": f"{prefix}_PASSWORD",
            }
        if kind in ("http", "oauth2", "openIdConnect"):
            return {"type": "bearer", "token_env": f"{prefix}_TOKEN"}
        if kind == "apiKey" and scheme.get("in") == "header":
            return {"type": "header", "header": scheme["name"], "value_env": f"{prefix}_API_KEY"}
        if kind == "apiKey" and scheme.get("in") == "query":
            return {"type": "query", "param": scheme["name"], "value_env": f"{prefix}_API_KEY"}
    return {"type": "none"}


def _action(
    refs: _Refs, path: str, method: str, op: Mapping[str, Any], shared: list[Any]
) -> tuple[dict[str, Any], list[str]]:
    notes: list[str] = []
    properties: dict[str, Any] = {}
    required: list[str] = []
    query_args: list[str] = []
    params = {}
    for raw in [*shared, *(op.get("parameters") or [])]:
        param = refs.resolve(raw)
        params[(param.get("in"), param.get("name"))] = param  # operation level wins
    for (where, pname), param in params.items():
        if where not in ("path", "query"):
            notes.append(f"{method.upper()} {path}: {where} parameter {pname!r} skipped")
            continue
        schema = to_json_schema(param.get("schema") or {"type": "string"})
        if param.get("description") and "description" not in schema:
            schema = {**schema, "description": param["description"]}
        properties[pname] = schema
        if where == "path" or param.get("required"):
            required.append(pname)
        if where == "query" and method in BODY_METHODS:
            query_args.append(pname)
    for pname in PATH_PARAM_RE.findall(path):
        if pname not in properties:  # the spec forgot to declare it; the URL still needs it
            properties[pname] = {"type": "string"}
            required.append(pname)
            notes.append(f"{method.upper()} {path}: undeclared path parameter {pname!r} added")
    body = refs.resolve(op.get("requestBody") or {})
    content = body.get("content") or {}
    json_body = next((v for k, v in content.items() if "json" in k), None)
    if json_body is not None and method in BODY_METHODS:
        schema = to_json_schema(json_body.get("schema") or {})
        if schema.get("type", "object") == "object" and "properties" in schema:
            for prop, prop_schema in schema["properties"].items():
                if isinstance(prop_schema, Mapping) and prop_schema.get("readOnly"):
                    continue
                properties.setdefault(prop, prop_schema)
            required += [r for r in schema.get("required") or [] if r in properties]
        else:
            notes.append(f"{method.upper()} {path}: request body is not an object; skipped")
    elif content:
        notes.append(f"{method.upper()} {path}: non-JSON request body skipped")
    text = op.get("summary") or op.get("description") or f"{method.upper()} {path}"
    action: dict[str, Any] = {
        "name": _name(op.get("operationId") or f"{method}_{path}"),
        "description": " ".join(str(text).split())[:500],
        "method": method.upper(),
        "path": path,
        "parameters": {
            "type": "object",
            "properties": properties,
            **({"required": sorted(set(required), key=required.index)} if required else {}),
        },
    }
    if query_args:
        action["query_args"] = query_args
    if method != "get":  # a spec cannot prove an operation safe: only GET is trusted to read
        action["mutating"] = True
        action["approval"] = "auto"
        action["risk"] = "high" if method == "delete" else "medium"
    return action, notes


def spec_server_url(doc: Mapping[str, Any]) -> str | None:
    """The spec's first absolute server URL (variables at their defaults), if it has one."""
    url, notes = _base_url(doc)
    return None if notes else url


def manifest_from_openapi(
    doc: Mapping[str, Any], name: str, *, base_url: str | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The manifest (as a dict, validated) and notes on what could not be imported.

    `base_url` is where the connector's credentials will be sent; without it the spec's own
    server URL is used (the CLI asks for explicit consent to that).
    """
    refs = _Refs(doc)
    if base_url is None:
        base_url, notes = _base_url(doc)
    else:
        base_url, notes = base_url.rstrip("/"), []
    info = doc.get("info") or {}
    actions: list[dict[str, Any]] = []
    taken: set[str] = set()
    room = 64 - len(name) - 2
    for path, item in (doc.get("paths") or {}).items():
        item = refs.resolve(item) if isinstance(item, Mapping) else {}
        shared = item.get("parameters") or []
        for method in METHODS:
            op = item.get(method)
            if not isinstance(op, Mapping):
                continue
            action, more = _action(refs, path, method, op, shared)
            notes += more
            base = action["name"][: max(room, 1)]
            candidate, n = base, 2
            while candidate in taken:
                suffix = f"_{n}"
                candidate, n = base[: max(room - len(suffix), 1)] + suffix, n + 1
            action["name"] = candidate
            taken.add(candidate)
            actions.append(action)
    if not actions:
        raise ManifestError("the OpenAPI document has no operations under 'paths'")
    manifest: dict[str, Any] = {
        "name": name,
        "description": " ".join(str(info.get("title") or name).split())[:200],
        "base_url": base_url,
        "auth": _auth(doc, name),
        "headers": {"Accept": "application/json"},
        "actions": actions,
    }
    parse_manifest(copy.deepcopy(manifest), source=f"<imported {name}>")
    return manifest, notes


def manifest_yaml(manifest: Mapping[str, Any], *, source: str) -> str:
    """The manifest as YAML with a header saying where it came from."""
    header = (
        f"# Imported from {source} by `chatops manifests import-openapi`.\n"
        "# Review approvals (approval/approvers/risk) and result.pick before use.\n"
    )
    return header + yaml.safe_dump(dict(manifest), sort_keys=False, allow_unicode=True, width=100)
