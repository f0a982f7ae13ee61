"""The approval gate of `chatops chat`: a PreToolUse hook that asks at the terminal.

The card a chat platform would show (tool, risk, connector/action, who asked, the agent's reason,
the exact arguments with known secrets masked and secret-looking values marked) is printed
instead, and the answer is read from stdin, or given
up front with `--approve all|none`. Read-only calls never ask. A rejection is told to the model
in words that say not to retry, as the approval rules of DESIGN §3 require.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any, Literal, Protocol, TextIO

from bot.approvals.rules import denial, rejection, resolve_for
from bot.approvals.schema import policy_of
from bot.engine.hooks import HookResult, PreToolUseContext
from bot.engine.notes import ApprovalNote
from bot.redaction import Redactor, mask_known, secret_looking
from bot.statuses import ApprovalStatus

ApproveMode = Literal["ask", "all", "none"]


class AnswerRecorder(Protocol):
    """Where a terminal answer is kept (`bot.terminal.log.TerminalLog`); returns the note the
    call log records with the call (approval id, status, who answered)."""

    async def record_answer(
        self, ctx: PreToolUseContext[Any], status: ApprovalStatus, reason: str
    ) -> ApprovalNote: ...


class TerminalApproval:
    """Ask the person at the terminal (or answer for them with `all` / `none`)."""

    name = "terminal_approval"

    def __init__(
        self,
        mode: ApproveMode,
        *,
        stdin: TextIO,
        stderr: TextIO,
        recorder: AnswerRecorder | None = None,
        zone: str = "UTC",
        redactor: Redactor | None = None,
    ) -> None:
        """`recorder`: keeps each answer as an approval row decided by the OS user; `zone`:
        where manifest rules read the time (`CHATOPS_TIMEZONE`); `redactor`: every secret the
        process knows, masked in what the prompt shows besides the tool's own."""
        self.redactor = redactor
        self.mode = mode
        self.zone = zone
        self.stdin = stdin
        self.stderr = stderr
        self._recorder = recorder
        self._one_prompt_at_a_time = asyncio.Lock()

    async def __call__(self, ctx: PreToolUseContext[Any]) -> HookResult:
        policy = resolve_for(ctx, self.zone).policy
        if policy.denied:  # a manifest rule: nobody is asked, not even at the terminal
            self._say(f"  denied {ctx.tool.name} (rule {policy.rule!r}): {policy.reason}")
            note = ApprovalNote(status="denied", policy_rule=policy.rule)
            return HookResult.block(denial(ctx.tool.name, policy), note=note)
        if not policy.requires_approval:
            return HookResult.allow(
                note=ApprovalNote(status="not_required", policy_rule=policy.rule)
            )
        if self.mode == "all":
            self._say(f"  approved {ctx.tool.name} (--approve all)")
            return await self._approved(ctx, "answered in advance with --approve all")
        if self.mode == "none":
            self._say(f"  rejected {ctx.tool.name} (--approve none)")
            return await self._rejected(ctx, "approvals are answered with --approve none")
        # waiting for the person at the prompt (or for their previous answer) is not run time
        with ctx.waiting_for_human():
            async with self._one_prompt_at_a_time:
                return await self._ask(ctx)

    async def _note(
        self, ctx: PreToolUseContext[Any], status: ApprovalStatus, reason: str
    ) -> ApprovalNote:
        if self._recorder is None:
            return ApprovalNote(status=status)
        return await self._recorder.record_answer(ctx, status, reason)

    async def _approved(self, ctx: PreToolUseContext[Any], reason: str = "") -> HookResult:
        return HookResult.allow(note=await self._note(ctx, ApprovalStatus.APPROVED, reason))

    async def _rejected(self, ctx: PreToolUseContext[Any], reason: str) -> HookResult:
        note = await self._note(ctx, ApprovalStatus.REJECTED, reason)
        return HookResult.block(rejection(ctx.tool.name, by="the user", reason=reason), note=note)

    async def _ask(self, ctx: PreToolUseContext[Any]) -> HookResult:
        tool = ctx.tool
        known = self.redactor.secrets() if self.redactor is not None else []
        secrets = [*tool.secret_values(), *known]
        args = mask_known(dict(ctx.args), secrets)  # shown as sent, known secrets aside
        where = f"{tool.connector}/{tool.action}" if tool.connector else tool.name
        shown = json.dumps(args, indent=2, ensure_ascii=False).splitlines()
        reason = mask_known(ctx.reasoning or "(the agent gave no reason)", secrets).strip()
        lines = [
            "",
            "=== approval needed ===",
            f"  tool:      {tool.name}",
            f"  connector: {where}",
            f"  risk:      {policy_of(tool).risk}",
            f"  asked by:  {', '.join(ctx.requesters) or 'you'}",
            f"  reason:    {reason}",
            "  arguments:",
            *("    " + line for line in shown),
        ]
        if suspect := secret_looking(args):
            lines.append(f"  looks like a secret (shown as sent): {', '.join(suspect)}")
        self._say("\n".join(lines))
        answer = await self._read("Approve this call? [y/N] ")
        if answer.strip().lower() in ("y", "yes"):
            self._say(f"  approved {tool.name}")
            return await self._approved(ctx)
        reason = ""
        if answer:  # not EOF: ask why, so the model can adapt
            reason = (await self._read("Reason (optional): ")).strip()
        self._say(f"  rejected {tool.name}")
        return await self._rejected(ctx, reason)

    async def _read(self, prompt: str) -> str:
        """One line from stdin without blocking the event loop; '' at end of input.

        The read runs in a daemon thread, so Ctrl-C at the prompt exits at once instead of
        waiting for a line that will never come.
        """
        self.stderr.write(prompt)
        self.stderr.flush()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[str] = loop.create_future()

        def read() -> None:
            try:
                line = self.stdin.readline()
            except (OSError, ValueError):
                line = ""
            loop.call_soon_threadsafe(lambda: done.done() or done.set_result(line))

        threading.Thread(target=read, name="approval-prompt", daemon=True).start()
        line = await done
        if not line:
            self.stderr.write("\n")
        return line

    def _say(self, text: str) -> None:
        print(text, file=self.stderr, flush=True)
