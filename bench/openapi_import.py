"""Bench: `import-openapi` on a large generated OpenAPI document, and on the published ones.

Generates a JSON document (default 1,000 operations, about 5 MB) whose request bodies share
component schemas the way published APIs do: every component refers to two others, a binary
tree of references twenty levels deep (inlined at every use, that tree alone is a million
copies), `allOf` compositions, nullable references, `oneOf` alternatives, form bodies, odd
parameter names. Times reading (`load_spec`) and importing (`manifest_from_openapi`, every
action validated) in a fresh interpreter, whose peak resident memory growth (VmHWM) is the
import's memory figure. The baseline is `json.loads` of the same text in the same run. Then
the published documents in tests/data (PagerDuty, OpenAI, Twilio), read and imported alike.

    .venv/bin/python bench/openapi_import.py [--operations N]
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from connectors.openapi import load_spec, manifest_from_openapi

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
PUBLISHED = {
    "pagerduty": "pagerduty-rest-openapiv3.json.xz",
    "openai": "openai-openapi.yaml.xz",
    "twilio": "twilio_api_v2010.json.xz",
}
COMPONENTS = 400
TREE_LEVELS = 20


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def components() -> dict[str, Any]:
    """Shared schemas: a deep binary tree of references plus a web of entities."""
    schemas: dict[str, Any] = {}
    for level in range(TREE_LEVELS):
        child = f"Tree{level + 1}"
        schemas[f"Tree{level}"] = {
            "type": "object",
            "description": f"Tree level {level}",
            "properties": {"left": ref(child), "right": ref(child), "note": {"type": "string"}},
        }
    schemas[f"Tree{TREE_LEVELS}"] = {"type": "string", "description": "a leaf"}
    for i in range(COMPONENTS):
        a, b = (i * 7 + 1) % COMPONENTS, (i * 13 + 5) % COMPONENTS
        schemas[f"Entity{i}"] = {
            "allOf": [
                ref(f"Base{i % 10}"),
                {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string", "description": f"Name of entity {i}. " * 4},
                        "owner": {"allOf": [ref(f"Entity{a}")], "nullable": True},
                        "links": {"type": "array", "items": ref(f"Entity{b}")},
                        "kind": {"oneOf": [ref("Tree0"), {"type": "string", "enum": ["x", "y"]}]},
                        "xml": {"type": "string", "example": "<a/>"},
                    },
                    "xml": {"name": f"entity{i}"},
                },
            ]
        }
    for i in range(10):
        schemas[f"Base{i}"] = {
            "type": "object",
            "properties": {
                "id": {"type": "string", "readOnly": True},
                "created": {"type": "string", "format": "date-time", "nullable": True},
            },
        }
    return schemas


def samples(i: int) -> dict[str, Any]:
    """What published documents carry besides schemas: code samples and response examples
    (the importer reads past them; they make the document as big as real ones)."""
    code = f"curl https://api.example.com/v1/things/{i} -H 'Authorization: Bearer $KEY'\n" * 25
    example = {"id": f"thing-{i}", "items": [{"n": n, "label": f"item {n}"} for n in range(40)]}
    return {
        "x-codeSamples": [{"lang": "shell", "source": code}],
        "responses": {"200": {"description": "OK", "content": {"application/json": {
            "schema": ref(f"Entity{i % COMPONENTS}"), "example": example}}}},
    }  # fmt: skip


def operation(i: int) -> tuple[str, dict[str, Any]]:
    path = f"/things{i // 2}/{{thing_id}}"
    params = [
        {"name": "thing_id", "in": "path", "required": True, "schema": {"type": "string"}},
        {"name": "DateCreated<", "in": "query", "schema": {"type": "string"}},
        {"name": "include[]", "in": "query", "schema": {"type": "array", "items": ref("Base0")}},
    ]
    if i % 2 == 0:
        return path, {"get": {"operationId": f"getThing{i}", "parameters": params, **samples(i)}}
    media = "application/x-www-form-urlencoded" if i % 10 == 1 else "application/json"
    body = {"required": True, "content": {media: {"schema": ref(f"Entity{i % COMPONENTS}")}}}
    if media != "application/json":
        body = {"content": {media: {"schema": ref(f"Base{i % 10}")}}}
    post = {"operationId": f"update-thing-{i}", "summary": f"Update thing {i}",
            "description": "Updates one thing. " * 40, "parameters": params,
            "requestBody": body, **samples(i)}  # fmt: skip
    return path, {"post": post}


def generated_spec(operations: int) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for i in range(operations):
        path, item = operation(i)
        paths.setdefault(path, {}).update(item)
    return {
        "openapi": "3.0.3",
        "info": {"title": "Generated", "version": "1"},
        "servers": [{"url": "https://api.example.com/v1"}],
        "paths": paths,
        "components": {"schemas": components()},
    }


def peak_rss_kib() -> int:
    """This process's peak resident memory. `/proc/self/status` VmHWM where there is one:
    `ru_maxrss` keeps the parent's high-water mark across fork and exec on Linux."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def measure(path: Path, name: str) -> dict[str, Any]:
    """Read and import one document in this (fresh) process: times and memory growth."""
    rss_start = peak_rss_kib()
    started = time.perf_counter()
    doc = load_spec(path)
    parsed = time.perf_counter()
    manifest, report = manifest_from_openapi(doc, name)
    done = time.perf_counter()
    rss_peak = peak_rss_kib()
    return {
        "parse_s": parsed - started,
        "import_s": done - parsed,
        "peak_mb": (rss_peak - rss_start) / 1024,
        "actions": len(manifest["actions"]),
        "operations": report.operations,
        "largest": report.largest_schema[1],
    }


def in_child(path: Path, name: str) -> dict[str, Any]:
    """`measure` in a new interpreter, so its peak memory is the import's alone."""
    out = subprocess.run(
        [sys.executable, __file__, "--measure", str(path), "--name", name],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)


def unpack(name: str, directory: Path) -> Path:
    source = DATA / name
    opener = lzma.open if source.suffix == ".xz" else gzip.open
    target = directory / source.with_suffix("").name
    with opener(source, "rb") as packed:
        target.write_bytes(packed.read())
    return target


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--operations", type=int, default=1000)
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--name", default="generated", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure is not None:
        print(json.dumps(measure(args.measure, args.name)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "generated.json"
        text = json.dumps(generated_spec(args.operations))
        spec.write_text(text)
        started = time.perf_counter()
        json.loads(text)
        baseline = time.perf_counter() - started
        got = in_child(spec, "generated")
        total = got["parse_s"] + got["import_s"]
        print(f"bench: openapi_generated_spec_size = {len(text) / 1e6:.1f} MB")
        print(f"bench: openapi_generated_operations = {got['operations']} operations")
        print(f"bench: openapi_generated_imported = {got['actions']} actions")
        print(f"bench: openapi_generated_parse_seconds = {got['parse_s']:.2f} s")
        print(f"bench: openapi_generated_import_seconds = {got['import_s']:.2f} s")
        print(f"bench: openapi_generated_total_seconds = {total:.2f} s")
        print(f"bench: openapi_generated_vs_json_parse = {total / baseline:.0f} x")
        print(f"bench: openapi_generated_peak_memory = {got['peak_mb']:.1f} MB")
        print(f"bench: openapi_generated_largest_schema = {got['largest']} chars")
        for name, packed in PUBLISHED.items():
            if not (DATA / packed).exists():
                continue
            got = in_child(unpack(packed, Path(tmp)), name)
            total = got["parse_s"] + got["import_s"]
            print(f"bench: openapi_{name}_seconds = {total:.2f} s")
            print(f"bench: openapi_{name}_peak_memory = {got['peak_mb']:.1f} MB")
            imported = f"{got['actions']} of {got['operations']}"
            print(f"bench: openapi_{name}_imported = {imported} actions")


if __name__ == "__main__":
    main()
