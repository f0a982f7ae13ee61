"""`chatops chat`: one conversation with the agent and the connector manifests, in the terminal.

Steps go to stderr as they happen (thinking, each tool call with its arguments, the first line
of each observation, approvals), so stdout carries only the synthesised answer and can be piped.
Approvals are asked at the prompt, or answered up front with `--approve all|none`.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from pathlib import Path
from typing import TextIO

from bot.config import Settings, connector_environ, load_settings
from bot.engine.events import (
    AnswerReset,
    Compact,
    Done,
    Inject,
    IterationDone,
    IterationStart,
    Phase,
    StepEvent,
    ThinkingDone,
    ThinkingStart,
)
from bot.engine.tools import ToolRegistry
from bot.errors import UserError
from bot.model_http import model_http_client
from bot.redaction import Redactor, install_log_redaction, redact, redact_text
from bot.statuses import RunStatus
from bot.terminal.approval import ApproveMode, TerminalApproval
from bot.terminal.log import TerminalLog, TerminalLogError

LLM_VARIABLES = "OPENAI_API_KEY (or OPENAI_BASE_URL for a local OpenAI-compatible server)"
ARGS_SHOWN_CHARS = 300
EXIT_NO_ANSWER = 1


def first_line(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "(empty)"
    return line if len(line) <= limit else line[: limit - 3] + "..."


SHOWN_TOOL_NAMES = 20  # an import of thousands of actions is not listed whole


def tools_line(names: list[str]) -> str:
    """The tools the conversation may use, for the start-up line: the first few and a count."""
    if not names:
        return "none"
    shown = ", ".join(names[:SHOWN_TOOL_NAMES])
    more = len(names) - SHOWN_TOOL_NAMES
    return shown if more <= 0 else f"{shown}, ... and {more} more ({len(names)} tools)"


class StepPrinter:
    """The `emit` callable: one short line on stderr per step event, secrets redacted."""

    def __init__(
        self, tools: ToolRegistry, stderr: TextIO, redactor: Redactor | None = None
    ) -> None:
        self.tools = tools
        self.stderr = stderr
        self.redactor = redactor

    def _secrets(self, tool_name: str) -> list[str]:
        """The tool's own secrets and every other one the process knows."""
        tool = self.tools.get(tool_name)
        own = list(tool.secret_values()) if tool is not None else []
        return [*own, *(self.redactor.secrets() if self.redactor is not None else ())]

    def _say(self, text: str) -> None:
        print(text, file=self.stderr, flush=True)

    def __call__(self, event: StepEvent) -> None:
        if isinstance(event, ThinkingStart):
            self._say(f"[{event.iteration}] thinking...")
        elif isinstance(event, ThinkingDone) and event.reasoning.strip():
            self._say(f"[{event.iteration}] reasoning: {first_line(event.reasoning)}")
        elif isinstance(event, IterationStart):
            args = json.dumps(
                redact(event.tool_args, self._secrets(event.tool_name)), ensure_ascii=False
            )
            if len(args) > ARGS_SHOWN_CHARS:
                args = args[: ARGS_SHOWN_CHARS - 3] + "..."
            self._say(f"[{event.iteration}] -> {event.tool_name} {args}")
        elif isinstance(event, IterationDone):
            text = redact_text(event.observation, self._secrets(event.tool_name))
            mark = "blocked" if event.blocked else "error" if event.error else "ok"
            self._say(f"[{event.iteration}] <- {event.tool_name} ({mark}): {first_line(text)}")
        elif isinstance(event, Phase):
            self._say(f"[*] {event.phase.replace('_', ' ')} ({event.total_tools} tools)")
        elif isinstance(event, Compact):
            how = "summarised" if event.summarized else "dropped with a note"
            self._say(
                f"[*] context compacted ({how}): {event.original_messages} -> "
                f"{event.kept_messages} messages, ~{event.tokens_before} -> "
                f"~{event.tokens_after} tokens"
            )
        elif isinstance(event, Inject):
            self._say(f"[*] note to the agent: {first_line(event.content, 120)}")
        elif isinstance(event, AnswerReset):
            self._say(
                "[!] the answer broke off while being written; the agent's own answer is used"
            )
        elif isinstance(event, Done):
            tokens = event.usage.total_tokens
            self._say(
                f"[*] done: {event.iterations} iteration(s), {tokens} tokens, {event.elapsed:.1f}s"
            )


def chat_command(
    args: argparse.Namespace,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Entry point of `chatops chat`; returns the exit status (0 when there is an answer)."""
    settings = load_settings()
    if not settings.llm_configured:
        raise UserError(
            f"no language model is configured: set {LLM_VARIABLES}, and CHATOPS_MODEL "
            f"for the model name (now {settings.chatops_model!r})"
        )
    explicit = args.manifests is not None
    directory = Path(args.manifests) if explicit else settings.chatops_manifests_dir
    request = " ".join(args.request).strip()
    if not request:
        raise UserError("say what you want done, e.g. chatops chat 'list open incidents'")
    return asyncio.run(
        _chat(
            settings,
            directory,
            request,
            mode=args.approve,
            explicit_dir=explicit,
            no_directory=not explicit and not directory.is_dir(),
            stdin=stdin or sys.stdin,
            stdout=stdout or sys.stdout,
            stderr=stderr or sys.stderr,
        )
    )


async def _chat(
    settings: Settings,
    directory: Path,
    request: str,
    *,
    mode: ApproveMode,
    explicit_dir: bool,
    no_directory: bool,
    stdin: TextIO,
    stdout: TextIO,
    stderr: TextIO,
) -> int:
    from bot.engine.agent import ReActAgent
    from bot.engine.llm import LLMError, OpenAICompatibleLLM
    from connectors.breaker import breakers_for
    from connectors.connector_set import ConnectorSet
    from connectors.http import client_session
    from connectors.manifest import ManifestError

    try:
        record = await TerminalLog.open(settings, user=_user())
    except TerminalLogError as exc:
        raise UserError(str(exc)) from None
    if no_directory:  # said after the database opened: a database error is the only line
        print(f"[*] no {directory} directory: chatting without tools", file=stderr)
    async with client_session(settings.chatops_connector_max_connections) as http:
        try:
            connectors = await ConnectorSet.load(
                directory,
                http=http,
                missing_ok=not explicit_dir,
                environ=connector_environ(),
                breakers=breakers_for(settings),
            )
        except ManifestError as exc:
            record.close()
            raise UserError(f"cannot load the connector manifests in {directory}:\n{exc}") from None
        for note in [*connectors.skipped, *(down.describe() for down in connectors.down)]:
            print(f"[!] {note}", file=stderr, flush=True)
        llm = None
        redactor = Redactor(settings.secret_values(), source=connectors.tools.secret_values)
        uninstall = install_log_redaction(redactor)  # this command's log lines
        try:
            llm = OpenAICompatibleLLM.from_settings(settings, http_client=model_http_client())
            approval = TerminalApproval(
                mode, stdin=stdin, stderr=stderr, recorder=record, zone=settings.chatops_timezone,
                redactor=redactor,
            )  # fmt: skip
            hooks = record.install(
                approval, settings, name=TerminalApproval.name, redactor=redactor
            )
            agent = ReActAgent(
                llm,
                connectors.tools,
                hooks=hooks,
                limits=settings.engine_limits,
                compact_llm=llm.compact_llm(settings),
            )
            printer = StepPrinter(connectors.tools, stderr, redactor)
            print(f"[*] tools: {tools_line(connectors.tools.names())}", file=stderr, flush=True)
            context = await record.start(request)
            try:
                result = await agent.run(request, context=context, emit=printer)
                try:
                    answer = await agent.synthesize(result, emit=printer)
                except LLMError as exc:  # the key was refused while the answer was written
                    result.failure, result.stopped = exc, "error"
                    answer = f"I could not complete this request: {exc.user_message}."
                answer = redactor.known_text(answer)
            except BaseException as exc:
                await asyncio.shield(record.finish(RunStatus.FAILED, error=type(exc).__name__))
                raise
            ended = await record.finish(
                RunStatus.FAILED if result.stopped == "error" else RunStatus.DONE, answer=answer
            )
            if not ended:
                print(
                    "[!] this run was taken over by another chatops process while this one was "
                    "paused; the audit shows its outcome from there",
                    file=stderr,
                    flush=True,
                )
        finally:
            await connectors.close()
            if llm is not None:
                await llm.close()
            await record.aclose()
            uninstall()
    print(answer, file=stdout, flush=True)
    if result.stopped == "error":
        return EXIT_NO_ANSWER
    return 0


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "terminal"
