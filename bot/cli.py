"""The `chatops` command: serve, chat, audit, manifests, triggers, workspaces, credentials.

Each subcommand's work lives in its own module; this file only parses arguments, so `--help`
is the one place the command line is described. Errors a user can fix are printed as one line
and exit non-zero, never as a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import NoReturn

from bot.errors import UserError

EXIT_USAGE = 2


def _version() -> str:
    """The installed distribution's version (the one `pip` and the image report)."""
    try:
        return metadata.version("chatops")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _port(text: str) -> int:
    """A TCP port, 1-65535 (`bind()` would say less, with a traceback)."""
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1-65535)")
    return int(text)


class _Parser(argparse.ArgumentParser):
    """A usage error is one line and exit status 2, like every other error of the command."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _whole_number(text: str) -> int:
    """argparse type of a count such as `audit --limit`: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="chatops",
        description="Chat-ops bot: an AI agent drives your systems from Slack or Feishu/Lark, "
        "and a human approves every risky step.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the bot (Slack, Feishu and the web console)")
    serve.add_argument("--host", default="0.0.0.0", help="address to bind (default 0.0.0.0)")
    serve.add_argument("--port", type=_port, default=None, help="port (default $PORT or 8080)")

    chat = commands.add_parser(
        "chat",
        help="one conversation with the agent in the terminal",
        description="One conversation with the agent in the terminal. Every tool call and every "
        "approval answered here goes to the call log of $DATABASE_URL, as with chatops serve.",
    )
    chat.add_argument("request", nargs="+", metavar="REQUEST", help="what you want done")
    chat.add_argument(
        "--manifests",
        metavar="DIR",
        default=None,
        help="connector manifests (default $CHATOPS_MANIFESTS_DIR or ./manifests)",
    )
    chat.add_argument(
        "--approve",
        choices=["ask", "all", "none"],
        default="ask",
        help="answer approvals at the prompt (ask), approve all, or reject all",
    )

    audit = commands.add_parser("audit", help="who ran what, who approved it, and what failed")
    audit.add_argument(
        "--since",
        default="7d",
        help="window start: a duration ago (30m, 12h, 7d, 4w) or an ISO time",
    )
    audit.add_argument("--until", default=None, help="window end: a duration ago or an ISO time")
    audit.add_argument("--connector", default=None, help="only this connector")
    audit.add_argument("--action", default=None, help="only this action")
    audit.add_argument("--user", default=None, help="only calls this user requested or approved")
    audit.add_argument(
        "--platform", default=None, help="only this platform: slack, feishu, console"
    )
    audit.add_argument(
        "--workspace",
        default=None,
        help="only this workspace: a Slack team id, a Feishu tenant key",
    )
    audit.add_argument(
        "--format",
        choices=["md", "csv", "json"],
        default="md",
        help="md: Markdown tables (default); json: the report model; csv: every call of the "
        "window, one row each (streamed, any size; --limit does not apply)",
    )
    audit.add_argument(
        "--limit",
        type=_whole_number,
        default=None,
        metavar="N",
        help="mutating calls md and json list, the rest counted as left out (default 100; "
        "0: the summary alone; --format csv lists every call)",
    )
    audit.add_argument(
        "--out",
        metavar="FILE",
        default=None,
        help="write here instead of stdout, atomically: an interrupted run leaves no half file",
    )

    manifests = commands.add_parser(
        "manifests", help="validate, list and import connector manifests"
    )
    verbs = manifests.add_subparsers(dest="verb", required=True, metavar="VERB")
    validate = verbs.add_parser("validate", help="check every manifest in DIR")
    validate.add_argument("dir", nargs="?", default=None, metavar="DIR")
    listing = verbs.add_parser("list", help="list the tools the manifests in DIR declare")
    listing.add_argument("dir", nargs="?", default=None, metavar="DIR")
    listing.add_argument(
        "--connect",
        action="store_true",
        help="start or reach each MCP server and list its real tools: arguments, approval, "
        "risk and what decided them (exit 1 when a server cannot be reached); and ask the "
        "running bot (--bot) which connectors are failing (circuit breaker open)",
    )
    listing.add_argument(
        "--bot",
        default=None,
        metavar="URL",
        help="the running bot, whose GET /readyz says which connectors are failing "
        "(default http://127.0.0.1:$PORT)",
    )
    verbs.add_parser("schema", help="print the manifest JSON Schema")
    explain = verbs.add_parser(
        "explain",
        help="show which approval rule a call would match and the policy that results "
        "(nothing is run)",
    )
    explain.add_argument("file", metavar="FILE", help="one manifest file")
    explain.add_argument("action", metavar="ACTION", help="the action as written in FILE")
    explain.add_argument(
        "--args", default="{}", metavar="JSON", help="the call's arguments as a JSON object"
    )
    explain.add_argument("--user", action="append", default=[], metavar="U",
                         help="a requester's user id (repeat for several)")  # fmt: skip
    explain.add_argument("--channel", default="", metavar="C", help="the channel id")
    explain.add_argument("--platform", default="slack", help="slack | feishu | console")
    explain.add_argument(
        "--at",
        default=None,
        metavar="TIME",
        help="when the call is made, ISO 8601 (default: now); rules read it as `time`",
    )
    explain.add_argument(
        "--granter",
        default="",
        metavar="U",
        help='also say whether U\'s "approve for this thread" on an earlier call (the --grant-* '
        "options) would cover this call, and why",
    )
    explain.add_argument(
        "--grant-args", default=None, metavar="JSON",
        help="the arguments of the call the grant was made on (default: --args)",
    )  # fmt: skip
    explain.add_argument(
        "--grant-user", action="append", default=[], metavar="U",
        help="a requester of the granted call (default: --user)",
    )  # fmt: skip
    explain.add_argument(
        "--grantee", action="append", default=[], metavar="U",
        help="a person the grant covers (default: the granted call's requesters)",
    )  # fmt: skip
    explain.add_argument(
        "--grant-at", default=None, metavar="TIME",
        help="when the grant was made, ISO 8601 (default: --at)",
    )  # fmt: skip
    openapi = verbs.add_parser(
        "import-openapi", help="turn an OpenAPI 3 or Swagger 2.0 document into a manifest"
    )
    openapi.add_argument(
        "spec", metavar="SPEC", help="OpenAPI 3.0/3.1 or Swagger 2.0 file (JSON or YAML)"
    )
    openapi.add_argument("--name", required=True, help="connector name")
    openapi.add_argument("--out", metavar="FILE", default=None, help="write here instead of stdout")
    openapi.add_argument(
        "--max-schema-chars",
        type=int,
        default=None,
        metavar="N",
        help="largest argument schema per tool, in characters of JSON; bigger ones are cut "
        "down (default $CHATOPS_TOOL_SCHEMA_MAX_CHARS or 16000)",
    )
    server = openapi.add_mutually_exclusive_group()
    server.add_argument(
        "--base-url",
        metavar="URL",
        default=None,
        help="the API's address (the connector's credentials are sent there); one of this "
        "or --use-spec-server is required",
    )
    server.add_argument(
        "--use-spec-server",
        action="store_true",
        help="use the spec's first server URL as the API's address (trust the spec with the "
        "credentials)",
    )
    triggers = commands.add_parser(
        "triggers", help="validate and list the inbound webhooks that open conversations"
    )
    trigger_verbs = triggers.add_subparsers(dest="verb", required=True, metavar="VERB")
    check = trigger_verbs.add_parser("validate", help="check every trigger in DIR")
    check.add_argument(
        "dir", nargs="?", default=None, metavar="DIR", help="default $CHATOPS_TRIGGERS_DIR"
    )
    shown = trigger_verbs.add_parser("list", help="list the routes the triggers in DIR declare")
    shown.add_argument(
        "dir", nargs="?", default=None, metavar="DIR", help="default $CHATOPS_TRIGGERS_DIR"
    )
    workspaces = commands.add_parser(
        "workspaces", help="check the per-workspace settings (CHATOPS_WORKSPACES_FILE)"
    )
    workspace_verbs = workspaces.add_subparsers(dest="verb", required=True, metavar="VERB")
    checked = workspace_verbs.add_parser(
        "validate", help="check FILE against the connector manifests"
    )
    checked.add_argument(
        "file", nargs="?", default=None, metavar="FILE", help="default $CHATOPS_WORKSPACES_FILE"
    )
    checked.add_argument(
        "--manifests", default=None, metavar="DIR", help="default $CHATOPS_MANIFESTS_DIR"
    )
    credentials = commands.add_parser(
        "credentials", help="people's connected accounts (connectors with auth type oauth2)"
    )
    credential_verbs = credentials.add_subparsers(dest="verb", required=True, metavar="VERB")
    shown_creds = credential_verbs.add_parser("list", help="who connected which connector")
    shown_creds.add_argument("--user", default=None, metavar="U", help="only this user id")
    revoke = credential_verbs.add_parser(
        "revoke",
        help="revoke a user's tokens at the provider and delete them (they connect again "
        "when next needed)",
    )
    revoke.add_argument("--user", required=True, metavar="U", help="the user id")
    revoke.add_argument("--connector", default=None, metavar="C", help="only this connector")
    credential_verbs.add_parser("key", help="print a new CHATOPS_CREDENTIALS_KEY")
    return parser


def run_command(args: argparse.Namespace) -> int:
    """Dispatch to the subcommand's module (imported lazily: `--help` stays fast)."""
    if args.command == "serve":
        from bot.config import load_settings
        from bot.startup_imports import frozen_imports
        from bot.storage.opening import prepare_database

        # a bad setting or DATABASE_URL is told before the bot's imports (two seconds of them)
        settings = load_settings()
        prepare_database(settings.database_url)
        with frozen_imports():
            from bot.server import serve_command

        return serve_command(args, settings)
    if args.command == "chat":
        from bot.terminal.chat import chat_command

        return chat_command(args)
    if args.command == "audit":
        from bot.audit.cli import audit_command

        return audit_command(args)
    if args.command == "workspaces":
        from bot.workspaces import workspaces_command

        return workspaces_command(args)
    if args.command == "triggers":
        from bot.triggers.cli import triggers_command

        return triggers_command(args)
    if args.command == "credentials":
        from connectors.credentials_cli import credentials_command

        return credentials_command(args)
    from connectors.cli import manifests_command

    return manifests_command(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status = run_command(args)
        sys.stdout.flush()  # a closed pipe must surface here, not at interpreter exit
        return status
    except UserError as exc:
        print(f"chatops: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("chatops: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`chatops manifests list | head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
