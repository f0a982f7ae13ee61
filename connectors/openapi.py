"""OpenAPI 3.0 / 3.1 document -> connector manifest (`chatops manifests import-openapi`).

One operation becomes one action (`openapi_ops`): operationId in snake_case, arguments from the
parameters and the request body, schemas normalised to what model APIs accept and shaped to a
size budget (`openapi_schema`, `schema_fit`); every operation but GET is marked `mutating: true`
with `approval: auto` (so it waits for a human). An operation that cannot be imported is skipped
with a note naming it and the JSON path of the problem; the others still import. Every action
is validated as a manifest action before it is kept, so an import never produces a file the
bot refuses.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import ValidationError

from connectors.loading import YAML_DUMPER, parse_manifest
from connectors.manifest import CHECKED_SCHEMAS, TOOL_NAME_RE, HttpAction, ManifestError
from connectors.openapi_auth import import_auth
from connectors.openapi_doc import Progress, RefError, deref, pointer
from connectors.openapi_load import load_spec
from connectors.openapi_ops import SkipOperation, import_operation, operation_label
from connectors.openapi_schema import SchemaConverter
from connectors.schema_fit import SchemaBudget, schema_chars

__all__ = [
    "ImportReport",
    "load_spec",
    "manifest_from_openapi",
    "manifest_yaml",
    "spec_server_url",
]

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
PLACEHOLDER_BASE = "https://api.example.com"
PROGRESS_EVERY = 100
SAME_NOTE_SHOWN = 3  # a note repeated for more operations than this is shown once, counted


@dataclass
class ImportReport:
    """What an import did: notes for the user, skipped operations with reasons, sizes."""

    notes: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    operations: int = 0
    largest_schema: tuple[str, int] = ("", 0)


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


def spec_server_url(doc: Mapping[str, Any]) -> str | None:
    """The spec's first absolute server URL (variables at their defaults), if it has one."""
    url, notes = _base_url(doc)
    return None if notes else url


def manifest_from_openapi(
    doc: Mapping[str, Any],
    name: str,
    *,
    base_url: str | None = None,
    budget: SchemaBudget = SchemaBudget(),  # noqa: B008 - frozen
    progress: Progress | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], ImportReport]:
    """The manifest (as a dict, validated) and a report of what could not be imported.

    `base_url` is where the connector's credentials will be sent; without it the spec's own
    server URL is used (the CLI asks for explicit consent to that). `environ` only serves to
    say which auth alternative the environment completes.
    """
    if base_url is None:
        base_url, notes = _base_url(doc)
    else:
        base_url, notes = base_url.rstrip("/"), []
    auth, auth_notes = import_auth(doc, name, environ)
    report = ImportReport(notes=notes + auth_notes)
    converter = SchemaConverter(doc)
    operations = list(_operations(doc, report))
    report.operations = len(operations) + len(report.skipped)  # + those not even read
    if progress is not None and len(operations) > PROGRESS_EVERY:
        progress(f"importing {len(operations)} operations")
    actions: list[dict[str, Any]] = []
    checked: list[HttpAction] = []  # validated once; the manifest check below reuses them
    schemas: set[str] = set()  # schema parts already checked (shared $defs: once)
    op_notes: list[str] = []
    names = _ActionNames(room=64 - len(name) - 2)
    for count, (path, method, op, shared) in enumerate(operations, 1):
        if progress is not None and count % PROGRESS_EVERY == 0:
            progress(f"  {count} of {len(operations)} operations")
        label = _label(method, path, op)
        try:
            imported = import_operation(
                converter, budget, path=path, method=method, op=op, shared=shared
            )
            action = imported.action
            action["name"] = names.claim(action["name"])
            model = _check_action(action, name, schemas)
        except (SkipOperation, RefError) as exc:
            report.skipped.append(f"{label}: skipped at {exc.pointer}: {exc}")
            continue
        except ManifestError as exc:
            report.skipped.append(f"{label}: skipped at {pointer('paths', path, method)}: {exc}")
            continue
        op_notes += imported.notes
        actions.append(action)
        checked.append(model)
        size = schema_chars(action["parameters"])
        if size > report.largest_schema[1]:
            report.largest_schema = (action["name"], size)
    report.notes += _grouped(op_notes) + converter.notes
    if not actions:
        why = f"{len(report.skipped)} skipped" if report.skipped else "none under 'paths'"
        if not report.skipped and doc.get("webhooks"):
            why += "; its webhooks are requests the API sends, not ones it answers"
        raise ManifestError(f"the OpenAPI document has no operation to import ({why})")
    info = doc.get("info") or {}
    manifest: dict[str, Any] = {
        "name": name,
        "description": " ".join(str(info.get("title") or name).split())[:200],
        "base_url": base_url,
        "auth": auth,
        "headers": {"Accept": "application/json", **_common_headers(actions)},
        "actions": actions,
    }
    # the connector as a whole (names, fields); its actions were each checked above
    parse_manifest({**manifest, "actions": checked}, source=f"<imported {name}>")
    return manifest, report


def _operations(doc: Mapping[str, Any], report: ImportReport):
    """(path, method, operation, shared parameters) for every operation under `paths`."""
    for path, raw in (doc.get("paths") or {}).items():
        try:
            item, _ = deref(doc, raw, pointer("paths", path))
        except RefError as exc:
            report.skipped.append(f"{path}: skipped at {exc.pointer}: {exc}")
            continue
        if not isinstance(item, Mapping):
            continue
        shared = item.get("parameters") if isinstance(item.get("parameters"), list) else []
        for method in METHODS:
            try:  # DigitalOcean's operations are references (to files, bundled by now)
                op, _ = deref(doc, item.get(method), pointer("paths", path, method))
            except RefError as exc:
                label = operation_label(method, str(path))
                report.skipped.append(f"{label}: skipped at {exc.pointer}: {exc}")
                continue
            if isinstance(op, Mapping):
                yield str(path), method, op, shared


def _label(method: str, path: str, op: Mapping[str, Any]) -> str:
    label = operation_label(method, path)
    op_id = op.get("operationId")
    return f"{label} ({op_id})" if op_id else label


class _ActionNames:
    """Unique action names that keep `<connector>__<action>` within 64 characters."""

    def __init__(self, room: int) -> None:
        self.room = max(room, 1)
        self.taken: set[str] = set()

    def claim(self, wanted: str) -> str:
        base = wanted[: self.room]
        candidate, n = base, 2
        while candidate in self.taken:
            suffix = f"_{n}"
            candidate, n = base[: max(self.room - len(suffix), 1)] + suffix, n + 1
        self.taken.add(candidate)
        return candidate


def _check_action(action: dict[str, Any], connector: str, schemas: set[str]) -> HttpAction:
    """Validate one action as the manifest loader will (schema, names, fields)."""
    if not TOOL_NAME_RE.match(f"{connector}__{action['name']}"):
        raise ManifestError(f"tool name {connector}__{action['name']} is not a valid name")
    try:
        context = {CHECKED_SCHEMAS: schemas}
        return HttpAction.model_validate(copy.deepcopy(action), context=context)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'action'}: "
            f"{err['msg'].removeprefix('Value error, ')}"
            for err in exc.errors()
        )
        raise ManifestError(problems) from None


def _common_headers(actions: list[dict[str, Any]]) -> dict[str, str]:
    """A static header that at least half the actions send, all with the same value (like
    PagerDuty's versioned `Accept`), moves up to the connector."""
    values: dict[str, set[str]] = {}
    counts: Counter[str] = Counter()
    for action in actions:
        for key, value in (action.get("headers") or {}).items():
            values.setdefault(key, set()).add(value)
            counts[key] += 1
    common = {
        key: next(iter(found))
        for key, found in values.items()
        if len(found) == 1 and counts[key] * 2 >= len(actions)
    }
    for action in actions:
        for key in common:
            action.get("headers", {}).pop(key, None)
        if "headers" in action and not action["headers"]:
            del action["headers"]
    return common


def _grouped(notes: list[str]) -> list[str]:
    """Notes in order; one said for many operations (`GET /x: header parameter 'From' ...`) is
    shown once with a count."""
    by_text: Counter[str] = Counter()
    first: dict[str, str] = {}
    for note in notes:
        label, _, text = note.partition(": ")
        by_text[text] += 1
        first.setdefault(text, label)
    out: list[str] = []
    shown: set[str] = set()
    for note in notes:
        label, _, text = note.partition(": ")
        if by_text[text] <= SAME_NOTE_SHOWN:
            out.append(note)
        elif text not in shown:
            shown.add(text)
            out.append(f"{text} ({by_text[text]} operations, e.g. {first[text]})")
    return out


def manifest_yaml(manifest: Mapping[str, Any], *, source: str) -> str:
    """The manifest as YAML with a header saying where it came from."""
    header = (
        f"# Imported from {source} by `chatops manifests import-openapi`.\n"
        "# Review approvals (approval/approvers/risk) and result.pick before use.\n"
    )
    body = yaml.dump(
        dict(manifest), Dumper=YAML_DUMPER, sort_keys=False, allow_unicode=True, width=100
    )
    return header + body
