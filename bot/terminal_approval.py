"""The approval gate of `chatops chat`: a PreToolUse hook that asks at the terminal.

The card a chat platform would show (tool, risk, connector/action, the agent's reason, the exact
arguments with secrets redacted) is printed instead, and the answer is read from stdin, or given
up front with `--approve all|none`. Read-only calls never ask. A rejection is told to the model
in words that say not to retry, as the approval rules of DESIGN §3 require.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Literal, TextIO

from bot.redaction import redact
from hooks.registry import HookResult, PreToolUseContext

ApproveMode = Literal["ask", "all", "none"]


def rejection_message(tool: str, reason: str = "") -> str:
    """The observation for a rejected call: the model must not try the same call again."""
    why = f" Reason: {reason}." if reason else ""
    return (
        f"The user rejected this call: {tool} was NOT run.{why} Do not retry this call; "
        "continue without it, or explain to the user what you would have done."
    )


class TerminalApproval:
    """Ask the person at the terminal (or answer for them with `all` / `none`)."""

    name = "terminal_approval"

    def __init__(self, mode: ApproveMode, *, stdin: TextIO, stderr: TextIO) -> None:
        self.mode = mode
        self.stdin = stdin
        self.stderr = stderr
        self._one_prompt_at_a_time = asyncio.Lock()

    async def __call__(self, ctx: PreToolUseContext) -> HookResult:
        policy = ctx.tool.policy
        if not policy.requires_approval:
            return HookResult.allow()
        if self.mode == "all":
            self._say(f"  approved {ctx.tool.name} (--approve all)")
            return HookResult.allow(notes={"approval": "approved", "approvers": ["terminal"]})
        if self.mode == "none":
            self._say(f"  rejected {ctx.tool.name} (--approve none)")
            return HookResult.block(
                rejection_message(ctx.tool.name, "approvals are answered with --approve none"),
                notes={"approval": "rejected"},
            )
        async with self._one_prompt_at_a_time:
            return await self._ask(ctx)

    async def _ask(self, ctx: PreToolUseContext) -> HookResult:
        tool = ctx.tool
        args = redact(dict(ctx.args), tool.secret_values())
        where = f"{tool.connector}/{tool.action}" if tool.connector else tool.name
        shown = json.dumps(args, indent=2, ensure_ascii=False).splitlines()
        lines = [
            "",
            "=== approval needed ===",
            f"  tool:      {tool.name}",
            f"  connector: {where}",
            f"  risk:      {tool.policy.risk}",
            f"  reason:    {(ctx.reasoning or '(the agent gave no reason)').strip()}",
            "  arguments:",
            *("    " + line for line in shown),
        ]
        self._say("\n".join(lines))
        answer = await self._read("Approve this call? [y/N] ")
        if answer.strip().lower() in ("y", "yes"):
            self._say(f"  approved {tool.name}")
            return HookResult.allow(notes={"approval": "approved", "approvers": ["terminal"]})
        reason = ""
        if answer:  # not EOF: ask why, so the model can adapt
            reason = (await self._read("Reason (optional): ")).strip()
        self._say(f"  rejected {tool.name}")
        return HookResult.block(
            rejection_message(tool.name, reason), notes={"approval": "rejected"}
        )

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
