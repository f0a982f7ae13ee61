"""The model's HTTP client (`bot.model_http`): the SDK's aiohttp transport, with a refused or
dropped connection named as such (the vendored map calls both a connect timeout), and the
environment's proxy still used."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx2
import pytest
from aiohttp import web

from bot.model_http import model_http_client
from tests.server.serve_process import free_port


@pytest.fixture
async def client() -> AsyncIterator[httpx2.AsyncClient]:
    http = model_http_client()
    try:
        yield http
    finally:
        await http.aclose()


async def test_a_refused_connection_is_a_connect_error_not_a_timeout(
    client: httpx2.AsyncClient,
) -> None:
    with pytest.raises(httpx2.ConnectError) as info:
        await client.get(f"http://127.0.0.1:{free_port()}/v1/models")
    assert not isinstance(info.value, httpx2.TimeoutException)


async def test_a_server_gone_mid_answer_is_a_read_error_not_a_timeout(
    client: httpx2.AsyncClient,
) -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{"choices": [')
        await writer.drain()
        writer.close()  # 12 bytes of 1000: the server is gone

    server = await asyncio.start_server(cut, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(httpx2.TransportError) as info:
            async with client.stream("GET", f"http://127.0.0.1:{port}/v1/chat") as response:
                async for _ in response.aiter_bytes():
                    pass
        assert isinstance(info.value, httpx2.ReadError | httpx2.RemoteProtocolError)
        assert not isinstance(info.value, httpx2.TimeoutException)
    finally:
        server.close()
        await server.wait_closed()


async def test_the_proxy_from_the_environment_is_used(
    monkeypatch: pytest.MonkeyPatch, aiohttp_server
) -> None:
    seen: list[str] = []

    async def proxy(request: web.Request) -> web.Response:
        seen.append(str(request.url))
        return web.json_response({"object": "list", "data": []})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", proxy)
    server = await aiohttp_server(app)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    http = model_http_client()  # reads the environment when made, as the SDK's client does
    try:
        answer = await http.get("http://model.invalid/v1/models")
    finally:
        await http.aclose()
    assert answer.status_code == 200
    assert seen and "/v1/models" in seen[0]
