"""The model's HTTP client: the openai SDK's aiohttp transport, its failures named rightly.

The SDK's default transport (httpx over httpcore) costs a fifth more CPU per call, and its
pool checks every idle connection on every request: with many runs holding model
connections at once that is most of the cost (issue 29; `bench/engine_overhead.py`). The
SDK ships an aiohttp transport (`openai.DefaultAioHttpClient`), but the map it turns aiohttp's
errors with picks the first match, so a refused connection, a reset or a server closing
mid-answer all come out as a connect *timeout*: the run would tell its thread the model
"timed out" when it was not there. `NamedFailures` re-raises those as httpx2 says them
(`ConnectError`, `ReadError`), on the request and while a streamed body is read.
The wrapping goes where the SDK's own aiohttp client makes its transports, so proxies from
the environment still apply as with the default client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx2
import openai

# most specific first: ClientConnectorError is a ClientOSError is a ClientConnectionError
_RENAMED: tuple[tuple[type[BaseException], type[httpx2.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx2.ConnectTimeout),
    (aiohttp.ClientConnectorError, httpx2.ConnectError),
    (aiohttp.ServerDisconnectedError, httpx2.RemoteProtocolError),
    (aiohttp.ClientOSError, httpx2.ReadError),
)


def _renamed(exc: httpx2.TransportError) -> httpx2.TransportError:
    """The error httpx2 would have raised for the aiohttp error behind `exc`."""
    cause = exc.__cause__
    for aiohttp_error, named in _RENAMED:
        if isinstance(cause, aiohttp_error):
            if type(exc) is named:
                return exc
            renamed = named(str(exc) or type(cause).__name__, request=_request_of(exc))
            renamed.__cause__ = cause
            return renamed
    return exc


def _request_of(exc: httpx2.TransportError) -> httpx2.Request | None:
    try:
        return exc.request
    except RuntimeError:  # httpx2 raises when no request was attached
        return None


class _NamedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except httpx2.TransportError as exc:
            raise _renamed(exc) from exc.__cause__

    async def aclose(self) -> None:
        await self._inner.aclose()


class NamedFailures(httpx2.AsyncBaseTransport):
    """Wraps a transport: its aiohttp failures named as httpx2 names them."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except httpx2.TransportError as exc:
            raise _renamed(exc) from exc.__cause__
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _NamedStream(response.stream)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class ModelHttpClient(openai.DefaultAioHttpClient):
    """`openai.DefaultAioHttpClient` (the SDK's defaults: timeout, limits, proxies from the
    environment) with every transport it makes wrapped in `NamedFailures`."""

    def _init_transport(self, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        return NamedFailures(super()._init_transport(*args, **kwargs))

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        return NamedFailures(super()._init_proxy_transport(*args, **kwargs))


def model_http_client() -> httpx2.AsyncClient:
    """The HTTP client the bot gives `openai.AsyncOpenAI(http_client=...)`."""
    return ModelHttpClient()
