"""`chatops serve` as a child process pointed at the fakes, for crash tests: start it, talk to
it the way Slack does (signed requests over HTTP), and `kill -9` it at the moment a test picks.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.slack_api import BOT_TOKEN
from tests.slack.payloads import SIGNING_SECRET, as_body, block_actions, signed_headers

CHATOPS = str(Path(sys.executable).with_name("chatops"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_env(
    *, database_url: str, manifests: Path, slack_url: str, llm_url: str, **extra: str
) -> dict[str, str]:
    """The environment of a bot on the fakes (Slack in HTTP mode, the model, the manifests)."""
    slack = {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": slack_url,
    }
    return model_env(database_url=database_url, manifests=manifests, llm_url=llm_url) | {
        **slack,
        **{k.upper(): v for k, v in extra.items()},
    }


def feishu_serve_env(
    *, database_url: str, manifests: Path, fake: FakeFeishu, llm_url: str
) -> dict[str, str]:
    """The environment of a bot on the fakes with Feishu (webhook mode) as its chat platform."""
    return model_env(database_url=database_url, manifests=manifests, llm_url=llm_url) | {
        "FEISHU_APP_ID": fake.app_id,
        "FEISHU_APP_SECRET": fake.app_secret,
        "FEISHU_VERIFICATION_TOKEN": fake.verification_token,
        "FEISHU_ENCRYPT_KEY": fake.encrypt_key,
        "FEISHU_DOMAIN": fake.url,
    }


def model_env(*, database_url: str, manifests: Path, llm_url: str) -> dict[str, str]:
    """The database, the manifests and the fake model: what every serve process is given."""
    return {
        "DATABASE_URL": database_url,
        "CHATOPS_MANIFESTS_DIR": str(manifests),
        "OPENAI_BASE_URL": llm_url,
        "OPENAI_API_KEY": "sk-test-not-a-secret",
        "CHATOPS_MODEL": "fake-model",
        "CHATOPS_LLM_MAX_RETRIES": "0",
    }


class ServeProcess:
    """One `chatops serve` process; its log lines are kept in `log`. `command`: what runs
    `serve` (default the `chatops` script; a bench may pass a launcher of the same CLI)."""

    def __init__(
        self, cwd: Path, env: dict[str, str], *, command: Sequence[str] = (CHATOPS,)
    ) -> None:
        self.cwd = cwd
        self.env = env
        self.command = tuple(command)
        self.port = free_port()
        self.log: list[str] = []
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._changed = asyncio.Condition()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    async def start(self) -> None:
        """Start and wait until it listens."""
        self._proc = await asyncio.create_subprocess_exec(
            *self.command, "serve", "--host", "127.0.0.1", "--port", str(self.port),
            cwd=self.cwd, env={**os.environ, **self.env},
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        self._reader = asyncio.create_task(self._read())
        await self.wait_log("Running on", 60)

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        async for line in self._proc.stderr:
            async with self._changed:
                self.log.append(line.decode())
                self._changed.notify_all()
        async with self._changed:
            self._changed.notify_all()

    async def wait_log(self, marker: str, timeout: float = 30) -> str:  # noqa: ASYNC109
        """The first log line containing `marker`, waiting for it."""

        def found() -> str | None:
            return next((line for line in self.log if marker in line), None)

        async def wait() -> str:
            async with self._changed:
                while (line := found()) is None:
                    if self._reader is not None and self._reader.done():
                        raise AssertionError("chatops serve exited:\n" + "".join(self.log))
                    await self._changed.wait()
                return line

        return await asyncio.wait_for(wait(), timeout)

    async def kill(self) -> None:
        """`kill -9`: no shutdown code runs."""
        assert self._proc is not None
        self._proc.send_signal(signal.SIGKILL)
        await self._finish()

    async def stop(self) -> int:
        """SIGTERM, and the exit status."""
        assert self._proc is not None
        if self._proc.returncode is None:
            self._proc.send_signal(signal.SIGTERM)
        return await self._finish()

    async def _finish(self) -> int:
        assert self._proc is not None
        code = await asyncio.wait_for(self._proc.wait(), 30)
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
        return code


@asynccontextmanager
async def serving(cwd: Path, env: dict[str, str]) -> AsyncIterator[ServeProcess]:
    """A started process, killed at the end if the test left it running; when the block
    fails, the end of its log is printed (pytest shows it with the failure)."""
    process = ServeProcess(cwd, env)
    await process.start()
    try:
        yield process
    except BaseException:
        said = [line for line in process.log if "HTTP Request" not in line]
        print(f"--- chatops serve, pid {process.pid} ---\n" + "".join(said[-80:]))
        raise
    finally:
        if process._proc is not None and process._proc.returncode is None:
            await process.kill()


class SlackSender:
    """Posts signed Slack requests to a serve process, as Slack does (one session per test)."""

    def __init__(self, http: aiohttp.ClientSession) -> None:
        self.http = http

    async def send(self, process: ServeProcess, payload: dict[str, Any] | str) -> int:
        body = as_body(payload)
        async with self.http.post(
            f"{process.url}/slack/events", data=body, headers=signed_headers(body)
        ) as response:
            await response.read()
            return response.status

    async def click(
        self, process: ServeProcess, card: dict[str, Any], action_id: str, *, user: str
    ) -> int:
        return await self.send(process, block_actions(card, action_id, user=user))
