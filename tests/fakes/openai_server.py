"""FakeOpenAI: an OpenAI-compatible `/v1/chat/completions` on 127.0.0.1 for the real openai SDK.

Scripted per test: each request pops one `Turn` (or asks `respond_with`'s function). Requests with
`stream: true` are answered as SSE `chat.completion.chunk`s then `data: [DONE]`, exactly as the
SDK parses them. Every request body is recorded in order; faults are data (`fail_next`).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Turn:
    """One scripted model reply (or an HTTP error when `status` is not 200)."""

    content: str | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    reasoning: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    cut_stream_after: int | None = None  # streaming: drop the connection after N chunks
    error_after: int | None = None  # streaming: an SSE error event after N chunks, then [DONE]
    hold_after: int | None = None  # streaming: after N chunks wait for `release_stream()`
    chunk_delay_s: float = 0.0  # streaming: the pause before each chunk (a model's pace)
    chunk_chars: int = 8  # streaming: characters per content chunk
    error_message: str | None = None  # an HTTP error's message (a server may echo the key)
    stall: bool = False  # never answer (until the fake stops): the client's timeout must fire
    reset: bool = False  # drop the connection before any answer (a connection reset)


def answer(text: str, *, reasoning: str | None = None) -> Turn:
    """A plain assistant message."""
    return Turn(content=text, reasoning=reasoning)


def answering(text: str, on_synthesis: Callable[[], Any] | None = None) -> Callable[..., Turn]:
    """A `respond_with` function: the model answers `text` at once; `on_synthesis()` runs when
    the answer starts streaming (to arm a fault for just the answer's post)."""

    def respond(body: dict[str, Any]) -> Turn:
        if body.get("stream") and on_synthesis is not None:
            on_synthesis()
        return answer(text)

    return respond


def tool_call(name: str, args: dict[str, Any], *, id: str | None = None) -> Turn:  # noqa: A002
    """One native function call."""
    return Turn(tool_calls=(_call(name, args, id),))


def tool_calls(*calls: tuple[str, dict[str, Any]]) -> Turn:
    """Several native function calls in one response (the engine runs them in parallel)."""
    return Turn(tool_calls=tuple(_call(name, args, None) for name, args in calls))


def json_action_call(name: str, args: dict[str, Any], reasoning: str = "") -> Turn:
    """A JSON-mode tool call as content (DESIGN §2 action protocol)."""
    body = {"reasoning": reasoning, "action": "tool_call", "tool_name": name, "tool_args": args}
    return Turn(content=json.dumps(body))


def json_final(answer: str, reasoning: str = "") -> Turn:
    """A JSON-mode final answer as content."""
    return Turn(
        content=json.dumps({"reasoning": reasoning, "action": "final_answer", "answer": answer})
    )


def error(
    status: int = 500, *, headers: dict[str, str] | None = None, message: str | None = None
) -> Turn:
    """A scripted HTTP error in the turn sequence (`message`: the error body's message)."""
    return Turn(status=status, headers=dict(headers or {}), error_message=message)


def broken_stream(text: str, *, after: int = 1) -> Turn:
    """A streaming reply whose connection drops after `after` content chunks."""
    return Turn(content=text, cut_stream_after=after)


def failed_stream(text: str, *, after: int = 1) -> Turn:
    """A streaming reply that reports an error in the stream (an SSE `error` event) after
    `after` content chunks, as a server whose generation fails midway does."""
    return Turn(content=text, error_after=after)


def stalled() -> Turn:
    """A request that is never answered: the client times out."""
    return Turn(stall=True)


def reset() -> Turn:
    """A connection dropped before any byte of the answer."""
    return Turn(reset=True)


def held_stream(text: str, *, after: int = 1) -> Turn:
    """A streaming reply that stops after `after` content chunks until `release_stream()`."""
    return Turn(content=text, hold_after=after)


def _call(name: str, args: dict[str, Any], id_: str | None) -> dict[str, Any]:
    return {
        "id": id_ or f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


MAX_TOOLS = 128  # OpenAI refuses a request with more tools (400 array_above_max_length)
MAX_REQUEST_BYTES = 1024 * 1024  # a bigger body is answered 413, as by the real API's front


class FakeOpenAI:
    """aiohttp app on 127.0.0.1:0 speaking the chat completions wire format. Like the real
    API, it refuses more than `MAX_TOOLS` tools (400) and bodies over `MAX_REQUEST_BYTES` (413);
    each refusal is kept in `refused`."""

    def __init__(self, *, model: str = "fake-model", think_s: float = 0.0) -> None:
        """`think_s`: how long each answer takes, as a real model thinks (benches)."""
        self.model = model
        self.think_s = think_s
        self.requests: list[dict[str, Any]] = []
        self.request_bytes: list[int] = []  # the size of each of `requests` as it was received
        self.headers: list[dict[str, str]] = []
        # (time.monotonic(), request body) of each stream's first content chunk (benches)
        self.first_chunks: list[tuple[float, dict[str, Any]]] = []
        self.unexpected: list[dict[str, Any]] = []
        self.refused: list[tuple[int, str]] = []  # (status, reason) of each request refused
        self._turns: deque[Turn] = deque()
        self._faults: deque[Turn] = deque()
        self._fn: Callable[[dict[str, Any]], Turn] | None = None
        self._routes: list[tuple[Callable[[dict[str, Any]], bool], Callable[..., Turn]]] = []
        self._cond: asyncio.Condition | None = None
        self._gate: asyncio.Event | None = None
        self._stream_gate: asyncio.Event | None = None
        self._stopped: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self._port = 0
        self.app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        self.app.router.add_post("/v1/chat/completions", self._completions)
        self.app.router.add_get("/v1/models", self._models)
        self.models_asked = 0  # how often GET /v1/models was answered (the readiness probe)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    async def start(self) -> None:
        self._cond = asyncio.Condition()
        self._gate = asyncio.Event()
        self._gate.set()
        self._stream_gate = asyncio.Event()
        self._stopped = asyncio.Event()
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._stopped is not None:
            self._stopped.set()
        if self._gate is not None:
            self._gate.set()
        if self._stream_gate is not None:
            self._stream_gate.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- scripting ---------------------------------------------------------------------------

    def script(self, *turns: Turn) -> None:
        """Append turns; each chat completion request pops the next one."""
        self._turns.extend(turns)

    def respond_with(self, fn: Callable[[dict[str, Any]], Turn]) -> None:
        """Answer with `fn(request_body)` whenever no scripted turn is left."""
        self._fn = fn

    def answer_when(
        self, matches: Callable[[dict[str, Any]], bool], fn: Callable[[dict[str, Any]], Turn]
    ) -> None:
        """Requests for which `matches(body)` holds are answered by `fn(body)`, before any
        fault or scripted turn (e.g. the compaction calls, apart from the loop's script)."""
        self._routes.append((matches, fn))

    def fail_next(
        self, status: int = 500, count: int = 1, headers: dict[str, str] | None = None
    ) -> None:
        """The next `count` requests get this HTTP error (before any scripted turn is used)."""
        for _ in range(count):
            self._faults.append(error(status, headers=headers))

    def fault_next(self, turn: Turn, count: int = 1) -> None:
        """The next `count` requests get this turn (a `stalled()`, `reset()` or
        `broken_stream(...)` fault) before any scripted turn is used."""
        self._faults.extend([turn] * count)

    def hold(self) -> None:
        """Park incoming requests until `release()` (to act while the model 'thinks')."""
        assert self._gate is not None, "start() first"
        self._gate.clear()

    def release(self) -> None:
        assert self._gate is not None, "start() first"
        self._gate.set()

    def release_stream(self) -> None:
        """Let streams held by `held_stream` go on."""
        assert self._stream_gate is not None, "start() first"
        self._stream_gate.set()

    @property
    def remaining(self) -> int:
        return len(self._turns)

    def assert_complete(self) -> None:
        """Every scripted turn was used and no request went unanswered."""
        assert not self._turns, f"{len(self._turns)} scripted turn(s) never requested"
        assert not self._faults, f"{len(self._faults)} scripted fault(s) never hit"
        assert not self.unexpected, f"{len(self.unexpected)} request(s) had no scripted turn"

    async def wait_for_requests(self, n: int, timeout: float = 10) -> None:  # noqa: ASYNC109
        """Wait until at least `n` requests arrived (bounded)."""
        assert self._cond is not None, "start() first"

        async def _wait() -> None:
            async with self._cond:  # type: ignore[union-attr]
                await self._cond.wait_for(lambda: len(self.requests) >= n)  # type: ignore[union-attr]

        await asyncio.wait_for(_wait(), timeout)

    # -- helpers for assertions --------------------------------------------------------------

    def messages(self, index: int = -1) -> list[dict[str, Any]]:
        """The messages of one recorded request."""
        return self.requests[index]["messages"]

    def streamed_requests(self) -> list[dict[str, Any]]:
        return [body for body in self.requests if body.get("stream")]

    # -- the endpoint ------------------------------------------------------------------------

    async def _models(self, request: web.Request) -> web.Response:
        """`GET /v1/models`, as OpenAI lists them (the bot's readiness probe asks it)."""
        self.models_asked += 1
        if not request.headers.get("Authorization", "").startswith("Bearer "):
            return web.json_response({"error": {"message": "no key"}}, status=401)
        model = {"id": "fake-model", "object": "model", "owned_by": "tests"}
        return web.json_response({"object": "list", "data": [model]})

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        if (request.content_length or 0) > MAX_REQUEST_BYTES:
            reason = f"request of {request.content_length} bytes is too large"
            self.refused.append((413, reason))
            return _error_response(413, reason, {})
        raw = await request.read()
        body = json.loads(raw)
        tools = body.get("tools") or []
        if len(tools) > MAX_TOOLS:
            reason = (
                "Invalid 'tools': array too long. Expected an array with maximum length "
                f"{MAX_TOOLS}, but got an array with length {len(tools)} instead."
            )
            self.refused.append((400, reason))
            return _error_response(400, reason, {})
        async with self._cond:  # type: ignore[union-attr]
            self.requests.append(body)
            self.request_bytes.append(len(raw))
            self.headers.append(dict(request.headers))
            self._cond.notify_all()  # type: ignore[union-attr]
        await self._gate.wait()  # type: ignore[union-attr]
        if self.think_s:
            await asyncio.sleep(self.think_s)  # the model's latency, not synchronisation
        turn = self._next_turn(body)
        if turn is None:
            self.unexpected.append(body)
            return _error_response(400, "FakeOpenAI: no scripted turn left for this request", {})
        if turn.stall:
            await self._stopped.wait()
        if turn.reset or turn.stall:
            if request.transport is not None:  # (a timed-out client may have gone already)
                request.transport.close()
            return web.Response()
        if turn.status != 200:
            message = turn.error_message or f"FakeOpenAI scripted HTTP {turn.status}"
            return _error_response(turn.status, message, turn.headers)
        if body.get("stream"):
            return await self._stream(request, body, turn)
        return web.json_response(self._completion(body, turn))

    def _next_turn(self, body: dict[str, Any]) -> Turn | None:
        for matches, fn in self._routes:
            if matches(body):
                return fn(body)
        if self._faults:
            return self._faults.popleft()
        if self._turns:
            return self._turns.popleft()
        if self._fn is not None:
            return self._fn(body)
        return None

    def _usage(self, body: dict[str, Any], turn: Turn) -> dict[str, int]:
        prompt = turn.prompt_tokens
        if prompt is None:
            prompt = len(json.dumps(body.get("messages", []))) // 4
        completion = turn.completion_tokens
        if completion is None:
            completion = len(turn.content or "") // 4 + 8 * len(turn.tool_calls) + 1
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def _completion(self, body: dict[str, Any], turn: Turn) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": turn.content}
        if turn.tool_calls:
            message["tool_calls"] = list(turn.tool_calls)
        if turn.reasoning is not None:
            message["reasoning_content"] = turn.reasoning
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if turn.tool_calls else "stop",
                    "logprobs": None,
                }
            ],
            "usage": self._usage(body, turn),
        }

    async def _stream(
        self, request: web.Request, body: dict[str, Any], turn: Turn
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        try:
            await response.prepare(request)
        except ConnectionResetError:  # the client hung up first (a bench ending): no traceback
            return response
        base = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", self.model),
        }

        async def send(delta: dict[str, Any], finish: str | None = None) -> None:
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

        await send({"role": "assistant", "content": ""})
        if turn.reasoning:
            await send({"reasoning_content": turn.reasoning})
        for sent, piece in enumerate(_pieces(turn.content or "", turn.chunk_chars)):
            if turn.cut_stream_after is not None and sent >= turn.cut_stream_after:
                request.transport.close()  # type: ignore[union-attr]
                return response
            if turn.error_after is not None and sent >= turn.error_after:
                failed = {"error": {"message": "generation failed", "type": "server_error"}}
                await response.write(f"data: {json.dumps(failed)}\n\n".encode())
                await response.write(b"data: [DONE]\n\n")
                await response.write_eof()
                return response
            if turn.hold_after is not None and sent == turn.hold_after:
                await self._stream_gate.wait()  # type: ignore[union-attr]
            if turn.chunk_delay_s:
                await asyncio.sleep(turn.chunk_delay_s)  # the model's pace, not synchronisation
            if sent == 0:
                self.first_chunks.append((time.monotonic(), body))
            await send({"content": piece})
        for index, call in enumerate(turn.tool_calls):
            await send({"tool_calls": [{"index": index, **call}]})
        await send({}, "tool_calls" if turn.tool_calls else "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            usage_chunk = {**base, "choices": [], "usage": self._usage(body, turn)}
            await response.write(f"data: {json.dumps(usage_chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _pieces(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _error_response(status: int, message: str, headers: dict[str, str]) -> web.Response:
    payload = {"error": {"message": message, "type": "fake_error", "code": status}}
    return web.json_response(payload, status=status, headers=headers)
