"""`chatops manifests validate|list|schema|explain|import-openapi`: checked without network.

Problems are printed one per line (file, action, field) and give exit status 1; they are never
tracebacks. `validate` also notes secret variables that are not set, because the bot leaves a
connector whose secrets are missing out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from bot.approvals.schema import policy_of
from bot.config import connector_environ, load_settings
from bot.errors import UserError
from connectors.loading import (
    base_url_problem,
    load_manifest_dir,
    missing_env,
)
from connectors.manifest import (
    AnyConnector,
    HttpConnector,
    ManifestError,
    McpConnector,
    manifest_json_schema,
)
from connectors.manifest_auth import auth_choice
from connectors.sql.manifest import SqlConnector

if TYPE_CHECKING:
    from bot.engine.tools import Tool

EXIT_INVALID = 1
MIN_SCHEMA_CHARS = 500


def _directory(args: argparse.Namespace) -> Path:
    if getattr(args, "dir", None):
        return Path(args.dir)
    return load_settings().chatops_manifests_dir


def _load(directory: Path, err: TextIO) -> list[tuple[Path, AnyConnector]] | None:
    try:
        return load_manifest_dir(directory)
    except ManifestError as exc:
        for line in str(exc).splitlines():
            print(f"error: {line}", file=err)
        return None


def validate(directory: Path, out: TextIO, err: TextIO) -> int:
    loaded = _load(directory, err)
    if loaded is None:
        return EXIT_INVALID
    if not loaded:
        print(f"{directory}: no manifests (*.yaml, *.yml)", file=out)
    environ = connector_environ()  # the environment over .env, read once
    for path, manifest in loaded:
        if isinstance(manifest, HttpConnector):
            what = f"{len(manifest.actions)} action(s)"
        elif isinstance(manifest, SqlConnector):
            what = f"SQL ({manifest.dialect}), {len(manifest.action_names())} action(s)"
        else:
            what = f"MCP server ({'stdio' if manifest.command else 'streamable HTTP'})"
        print(f"ok: {path}: {manifest.name}, {what}", file=out)
        for name in missing_env(manifest, environ):
            note = f"  note: {name} is not set; the bot leaves {manifest.name!r} out until it is"
            print(note, file=out)
        chosen = "" if isinstance(manifest, SqlConnector) else auth_choice(manifest.auth, environ)
        if chosen:
            print(f"  auth: {chosen}", file=out)
        problem = base_url_problem(manifest, environ)
        if problem:
            print(f"  note: {problem}; the bot will not start with it", file=out)
    return 0


def _approval_label(required: bool, approval: str, risk: str) -> str:
    if not required:
        return "no approval" + (" (auto: read-only)" if approval == "auto" else "")
    return f"approval {'(auto: mutating)' if approval == 'auto' else 'required'}, risk {risk}"


def list_tools(
    directory: Path, out: TextIO, err: TextIO, *, connect: bool = False, bot: str | None = None
) -> int:
    loaded = _load(directory, err)
    if loaded is None:
        return EXIT_INVALID
    failed = False
    if connect:
        from bot.config import Settings
        from connectors.mcp_listing import connected
        from connectors.schema_fit import SchemaBudget

        budget = SchemaBudget(max_chars=Settings().chatops_tool_schema_max_chars)
        servers = [m for _, m in loaded if isinstance(m, McpConnector)]
        listed = asyncio.run(connected(servers, budget=budget))
    for _, manifest in loaded:
        if isinstance(manifest, HttpConnector):
            for action in manifest.actions:
                policy = action.policy(mutating=action.is_mutating)
                label = _approval_label(policy.requires_approval, policy.approval, policy.risk)
                print(
                    f"{manifest.name}__{action.name}\t{action.method} {action.path}\t"
                    f"{label}\t{action.description}",
                    file=out,
                )
            continue
        if isinstance(manifest, SqlConnector):
            _print_sql(manifest, out)
            continue
        where = " ".join(manifest.command) if manifest.command else manifest.url
        if connect:
            problem = _print_connected(manifest, listed[manifest.name], f"MCP {where}", out)
            if problem:
                print(f"error: {problem}", file=err)
                failed = True
            continue
        print(f"{manifest.name}__*\tMCP {where}\ttools listed when the server starts", file=out)
        for rule in manifest.tools:
            print(f"  rule {rule.match}: approval {rule.approval}, risk {rule.risk}", file=out)
    if connect:
        from connectors.breaker_view import print_failing

        print_failing(bot or f"http://127.0.0.1:{load_settings().port}", out, err)
    return EXIT_INVALID if failed else 0


def _print_sql(manifest: SqlConnector, out: TextIO) -> None:
    for action in manifest.actions:
        mutating = action.is_mutating(manifest.dialect)
        policy = action.policy(mutating=mutating)
        label = _approval_label(policy.requires_approval, policy.approval, policy.risk)
        kind = "SQL write" if mutating else "SQL read"
        print(f"{manifest.name}__{action.name}\t{kind}\t{label}\t{action.description}", file=out)
    if manifest.query is not None:
        policy = manifest.query.policy(mutating=False)
        label = _approval_label(policy.requires_approval, policy.approval, policy.risk)
        line = f"{manifest.name}__{manifest.query.name}\tSQL query (read-only)\t{label}"
        print(f"{line}\t{manifest.query.description}", file=out)


def _print_connected(
    manifest: McpConnector, tools: list[Tool] | str, where: str, out: TextIO
) -> str | None:
    """One MCP connector's real tools: the approval and risk that apply, what decided them,
    the description and the argument schema the model sees. A problem is returned instead."""
    if isinstance(tools, str):
        return tools
    if not tools:
        print(f"{manifest.name}__*\t{where}\tthe server lists no tools", file=out)
    for tool in tools:
        policy = policy_of(tool)
        label = _approval_label(policy.requires_approval, policy.approval, policy.risk)
        if policy.approvers or policy.min_approvals > 1 or not policy.allow_self_approval:
            label += (
                f", approvers {list(policy.approvers) or 'anyone'}, "
                f"min {policy.min_approvals}, self-approval "
                f"{'allowed' if policy.allow_self_approval else 'refused'}"
            )
        description = " ".join(tool.description.split())  # one line per tool
        print(f"{tool.name}\t{where}\t{label}\t{description}", file=out)
        print(f"  decided by: {policy.decided_by}", file=out)
        schema = json.dumps(tool.parameters, ensure_ascii=False, separators=(",", ":"))
        print(f"  arguments: {schema}", file=out)
    return None


def import_openapi(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from connectors.openapi import (
        load_spec,
        manifest_from_openapi,
        manifest_yaml,
        spec_server_url,
    )
    from connectors.schema_fit import SchemaBudget

    spec = Path(args.spec)
    max_chars = args.max_schema_chars
    if max_chars is None:
        from bot.config import Settings

        max_chars = Settings().chatops_tool_schema_max_chars
    if max_chars < MIN_SCHEMA_CHARS:
        raise UserError(f"--max-schema-chars must be at least {MIN_SCHEMA_CHARS}")

    def progress(message: str) -> None:
        print(f"progress: {message}", file=err, flush=True)

    try:
        load_notes: list[str] = []
        doc = load_spec(spec, progress=progress, notes=load_notes)
        if args.base_url is None and not args.use_spec_server:
            server = spec_server_url(doc)
            where = (
                f"names the server {server}, which would receive the connector's credentials"
                if server
                else "names no absolute server URL"
            )
            raise UserError(
                f"{spec} {where}: pass --base-url URL (the API's address), "
                "or --use-spec-server to use the spec's"
            )
        manifest, report = manifest_from_openapi(
            doc,
            args.name,
            base_url=args.base_url,
            budget=SchemaBudget(max_chars=max_chars),
            progress=progress,
            environ=connector_environ(),
        )
    except ManifestError as exc:
        reason = str(exc).removeprefix(f"{spec}: ")  # the file is named once
        raise UserError(f"cannot import {spec}: {reason}") from None
    text = manifest_yaml(manifest, source=spec.name)
    for note in load_notes + report.notes:
        print(f"note: {note}", file=err)
    for skipped in report.skipped:
        print(f"warning: {skipped}", file=err)
    count = len(manifest["actions"])
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}: {count} action(s) for connector {args.name!r}", file=err)
    else:
        out.write(text)
    largest, size = report.largest_schema
    print(
        f"imported {count} of {report.operations} operation(s), {len(report.skipped)} skipped; "
        f"largest tool schema: {args.name}__{largest} ({size} characters, limit {max_chars})",
        file=err,
    )
    return 0


def manifests_command(
    args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Entry point of `chatops manifests VERB`."""
    out = out or sys.stdout
    err = err or sys.stderr
    if args.verb == "schema":
        print(json.dumps(manifest_json_schema(), indent=2), file=out)
        return 0
    if args.verb == "import-openapi":
        return import_openapi(args, out, err)
    if args.verb == "explain":
        from connectors.explain import explain_command

        return explain_command(args, out)
    directory = _directory(args)
    if args.verb == "validate":
        return validate(directory, out, err)
    if args.verb == "list":
        return list_tools(directory, out, err, connect=args.connect, bot=args.bot)
    raise UserError(f"unknown manifests verb {args.verb!r}")
