"""Long-connection mode: lark-oapi's websocket client in a thread of its own.

`lark.ws.Client.start()` blocks forever and drives a module-level event loop
(`lark_oapi.ws.client.loop`, bound at import time, possibly to the app's own loop). So the
client is built and started inside a dedicated thread that first installs a fresh loop there;
the app's loop is never touched by the SDK. Events reach the surface's handlers through the
shared `EventDispatcherHandler`, which hands work to the app's loop thread-safely.
"""

from __future__ import annotations

import asyncio
import logging
import threading

import lark_oapi as lark
from lark_oapi.ws import client as ws_client_module

log = logging.getLogger(__name__)


class LongConnection:
    """One websocket connection to Feishu/Lark, owned by the surface's cleanup context."""

    def __init__(
        self,
        app_id: str,
        app_secret: str,
        domain: str,
        dispatcher: lark.EventDispatcherHandler,
    ) -> None:
        self._app_id = app_id
        self._app_secret = app_secret
        self._domain = domain
        self._dispatcher = dispatcher
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="feishu-longconn", daemon=True)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(5.0)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        ws_client_module.loop = loop  # the SDK's client runs on this module-level loop
        self._loop = loop
        self._ready.set()
        try:
            while not self._stopping.is_set():
                client = lark.ws.Client(
                    self._app_id,
                    self._app_secret,
                    event_handler=self._dispatcher,
                    domain=self._domain,
                    log_level=lark.LogLevel.WARNING,
                )
                try:
                    client.start()  # returns only when the loop is stopped or it gives up
                except RuntimeError:
                    # "Event loop stopped before Future completed" is how stop() ends it
                    if not self._stopping.is_set():
                        log.exception("Feishu long connection stopped unexpectedly")
                except Exception:  # noqa: BLE001 - logged; reconnect unless stopping
                    log.exception("Feishu long connection failed")
                if not self._stopping.is_set():
                    self._stopping.wait(5.0)
        finally:
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the client's loop (repeatedly: the SDK re-enters it while reconnecting)."""
        self._stopping.set()
        loop = self._loop
        deadline = 20
        while self._thread.is_alive() and deadline > 0:
            deadline -= 1
            if loop is not None and not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(loop.stop)
                except RuntimeError:
                    break  # closed meanwhile
            self._thread.join(timeout / 20)
