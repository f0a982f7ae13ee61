"""FakeFeishu: a fake Feishu/Lark Open API on 127.0.0.1 that the real lark-oapi client talks to.

It serves what the bot uses (tenant token, bot info, `im/v1/messages` create / reply / patch,
`ephemeral/v1/send` for cards one person sees in a group chat it knows they are in) with
Feishu's response envelope `{"code": 0, "msg": "success", "data": {...}}`, refuses a
request over Feishu's documented size (30 KB of request body for a card: error 230025), records
every call, keeps each message's current content, and takes faults as data (`fail_next`). It also
plays the platform's other half through `FeishuEventSource` (feishu_events.py): events and
card callbacks built, encrypted, signed and POSTed to the bot (`push`). Long connection:
`/callback/ws/endpoint` hands out a websocket on this server, and `push_ws` sends an event over
it as a protobuf data frame, returning the client's answer.
"""

from __future__ import annotations

import asyncio
import base64
import email
import email.policy
import itertools
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web
from lark_oapi.ws.pb.pbbp2_pb2 import Frame

from tests.fakes.feishu_cardkit import CardKitMethods
from tests.fakes.feishu_elements import elements_problem
from tests.fakes.feishu_events import FakeMessage, FeishuEventSource

Predicate = Callable[["FakeFeishu"], Any]
# Feishu's documented request body limits: 30 KB for a card (and rich text), 150 KB for text
CARD_REQUEST_LIMIT = 30 * 1024
TEXT_REQUEST_LIMIT = 150 * 1024


def request_limit(msg_type: str) -> int:
    """The most a send / reply / edit request of this message type may be (error 230025)."""
    return TEXT_REQUEST_LIMIT if msg_type == "text" else CARD_REQUEST_LIMIT


FILE_TYPES = frozenset({"opus", "mp4", "pdf", "doc", "xls", "ppt", "stream"})
FILE_LIMIT = 30 * 1024 * 1024


def multipart_fields(content_type: str, raw: bytes) -> dict[str, bytes]:
    """The fields of a multipart/form-data body (name -> bytes); {} when it is not one."""
    if not content_type.startswith("multipart/form-data"):
        return {}
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.message_from_bytes(head + raw, policy=email.policy.HTTP)
    return {
        part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
        for part in message.iter_parts()
    }


@dataclass
class Call:
    """One recorded API request."""

    op: str
    method: str
    path: str
    query: dict[str, str]
    body: Any
    headers: dict[str, str]
    status: int = 200  # the HTTP status of the answer (429 for an injected throttle)
    code: int = 0  # Feishu's code in the answer
    size: int = 0  # bytes of the request body, what Feishu's size limits are measured on
    raw: bytes = b""  # the body as sent (multipart uploads are parsed from it)


@dataclass
class Ephemeral:
    """A card sent to one person in a group chat; only they see it (not in `messages`)."""

    message_id: str
    chat_id: str
    user: str  # the open_id (or user_id) it was sent to
    card: dict[str, Any]


# Refusals of ephemeral/v1/send. 99992402 is Feishu's "field validation failed"; the codes for
# a chat that is not a group and a person who is not in it are the fake's own (the bot treats
# every refusal alike: the note goes as a direct message instead).
FIELD_INVALID = 99992402
NOT_A_GROUP = 230002
NOT_A_MEMBER = 230013


@dataclass
class Fault:
    status: int
    code: int
    msg: str
    headers: dict[str, str]


class FakeFeishu(FeishuEventSource, CardKitMethods):
    """A fake Open API and event source for one app in one tenant (CardKit card entities in
    feishu_cardkit.py)."""

    def __init__(
        self,
        *,
        app_id: str | None = None,
        app_secret: str = "fake-app-secret",
        verification_token: str = "fake-verification-token",
        encrypt_key: str = "fake-encrypt-key",
        tenant_key: str = "tenant_fake",
        bot_open_id: str = "ou_bot",
    ) -> None:
        # A fresh app id per fake: lark-oapi caches tenant tokens process-wide by app id.
        self.app_id = app_id or f"cli_{secrets.token_hex(8)}"
        self.app_secret = app_secret
        self.verification_token = verification_token
        self.encrypt_key = encrypt_key
        self.tenant_key = tenant_key
        self.bot_open_id = bot_open_id
        self.requests: list[Call] = []
        self.messages: dict[str, FakeMessage] = {}
        self.tokens: set[str] = set()
        self.files: dict[str, dict[str, Any]] = {}  # file_key -> file_type, file_name, data
        self.chat_types: dict[str, str] = {}
        self.members: dict[str, set[str]] = {}
        self.ephemeral: list[Ephemeral] = []  # cards only one person sees (ephemeral/v1/send)
        self._faults: dict[str, list[Fault]] = {}
        self._ids = itertools.count(1)
        self._changed = asyncio.Condition()
        self._ws: web.WebSocketResponse | None = None
        self._ws_connected = asyncio.Event()
        self._ws_replies: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._app = web.Application()
        self._app.router.add_post("/open-apis/auth/v3/tenant_access_token/internal", self._token)
        self._app.router.add_get("/open-apis/bot/v3/info", self._bot_info)
        self._app.router.add_post("/open-apis/im/v1/messages", self._create)
        self._app.router.add_post("/open-apis/im/v1/messages/{message_id}/reply", self._reply)
        self._app.router.add_patch("/open-apis/im/v1/messages/{message_id}", self._patch)
        self._app.router.add_post("/open-apis/im/v1/files", self._upload_file)
        self._app.router.add_post("/open-apis/ephemeral/v1/send", self._ephemeral)
        self._cardkit_routes(self._app.router)
        self._app.router.add_post("/callback/ws/endpoint", self._ws_endpoint)
        self._app.router.add_get("/ws", self._ws_handler)
        self._runner: web.AppRunner | None = None
        self.url = ""

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._runner = web.AppRunner(self._app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # ------------------------------------------------------------ inspection

    def calls(self, op: str) -> list[Call]:
        """Recorded calls of one operation: token, bot.info, message.create/reply/patch."""
        return [c for c in self.requests if c.op == op]

    def fail_next(
        self,
        op: str,
        *,
        status: int = 429,
        code: int = 99991400,
        msg: str = "request trigger frequency limit",
        headers: dict[str, str] | None = None,
        count: int = 1,
    ) -> None:
        """Answer the next `count` calls of `op` with this error instead of serving them."""
        fault = Fault(status, code, msg, dict(headers or {}))
        self._faults.setdefault(op, []).extend([fault] * count)

    async def wait_for(self, predicate: Predicate, timeout: float = 10.0) -> Any:  # noqa: ASYNC109
        """Wait until `predicate(self)` is truthy (checked after every request); return it."""

        async def wait() -> Any:
            async with self._changed:
                return await self._changed.wait_for(lambda: predicate(self))

        return await asyncio.wait_for(wait(), timeout)

    def join(self, chat_id: str, *users: str, chat_type: str = "group") -> None:
        """Put people in a chat (they have not written in it yet)."""
        self.chat_types.setdefault(chat_id, chat_type)
        self.members.setdefault(chat_id, set()).update(users)

    def ephemeral_to(self, user: str) -> list[Ephemeral]:
        """The ephemeral cards `user` was sent, oldest first."""
        return [e for e in self.ephemeral if e.user == user]

    def replies_to(self, root_id: str) -> list[FakeMessage]:
        """Messages posted in the thread of `root_id`, oldest first."""
        return [m for m in self.messages.values() if m.root_id == root_id]

    def cards_in(self, root_id: str) -> list[dict[str, Any]]:
        """Current content of every interactive message in a thread."""
        return [m.content for m in self.replies_to(root_id) if m.msg_type == "interactive"]

    # ------------------------------------------------------------ API handlers

    def _envelope(self, data: Any, *, code: int = 0, msg: str = "success", status: int = 200):
        return web.json_response({"code": code, "msg": msg, "data": data}, status=status)

    async def _record(self, request: web.Request, op: str) -> tuple[Call, web.Response | None]:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        call = Call(
            op, request.method, request.path, dict(request.query), body, dict(request.headers),
            size=len(raw), raw=raw,
        )  # fmt: skip
        self.requests.append(call)
        faults = self._faults.get(op)
        if faults:
            f = faults.pop(0)
            call.status, call.code = f.status, f.code
            return call, web.json_response(
                {"code": f.code, "msg": f.msg, "data": {}}, status=f.status, headers=f.headers
            )
        if op != "token" and request.headers.get("Authorization", "")[7:] not in self.tokens:
            call.status, call.code = 400, 99991663
            return call, web.json_response(
                {"code": 99991663, "msg": "Invalid access token for authorization."}, status=400
            )
        return call, None

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _token(self, request: web.Request) -> web.Response:
        call, fault = await self._record(request, "token")
        if fault is None:
            body = call.body or {}
            if body.get("app_id") != self.app_id or body.get("app_secret") != self.app_secret:
                fault = web.json_response({"code": 10014, "msg": "app secret invalid"})
            else:
                token = f"t-{secrets.token_hex(12)}"
                self.tokens.add(token)
                fault = web.json_response(
                    {"code": 0, "msg": "ok", "tenant_access_token": token, "expire": 7200}
                )
        await self._notify()
        return fault

    async def _bot_info(self, request: web.Request) -> web.Response:
        _, fault = await self._record(request, "bot.info")
        await self._notify()
        if fault is not None:
            return fault
        bot = {
            "activate_status": 2,
            "app_name": "chatops",
            "avatar_url": "",
            "ip_white_list": [],
            "open_id": self.bot_open_id,
        }
        return web.json_response({"code": 0, "msg": "ok", "bot": bot})

    def _new_message(
        self, chat_id: str, body: dict, root: str = "", parent: str = "", size: int = 0
    ):
        content = body.get("content")
        if not isinstance(content, str) or not body.get("msg_type"):
            return None, self._envelope({}, code=230001, msg="invalid message content")
        if body["msg_type"] == "file" and json.loads(content).get("file_key") not in self.files:
            return None, self._envelope({}, code=230001, msg="invalid file_key")
        if size > request_limit(body["msg_type"]):
            return None, self._envelope({}, code=230025, msg="message content too long")
        entity, problem = (None, None)
        if body["msg_type"] == "interactive":
            entity, problem = self.sent_entity(content)
            problem = problem or elements_problem(content)
        if problem:
            return None, self._envelope({}, code=230001, msg=problem)
        mid = f"om_{next(self._ids):06d}{secrets.token_hex(4)}"
        shown = entity or content
        msg = FakeMessage(mid, chat_id, body["msg_type"], root, parent, contents=[shown])
        self.messages[mid] = msg
        if entity is not None:  # a card entity, sent by its card_id: the message shows it
            self.cards[json.loads(content)["data"]["card_id"]].message_id = mid
        return msg, None

    def _message_data(self, msg: FakeMessage) -> dict[str, Any]:
        now = str(int(time.time() * 1000))
        return {
            "message_id": msg.message_id,
            "root_id": msg.root_id,
            "parent_id": msg.parent_id,
            "msg_type": msg.msg_type,
            "create_time": now,
            "update_time": now,
            "deleted": False,
            "updated": False,
            "chat_id": msg.chat_id,
            "sender": {
                "id": self.app_id,
                "id_type": "app_id",
                "sender_type": "app",
                "tenant_key": self.tenant_key,
            },
            "body": {"content": msg.contents[-1]},
        }

    async def _create(self, request: web.Request) -> web.Response:
        call, fault = await self._record(request, "message.create")
        if fault is None:
            body = call.body or {}
            kind = call.query.get("receive_id_type", "")
            receive_id = body.get("receive_id", "")
            chat = receive_id if kind == "chat_id" else f"oc_p2p_{receive_id}"
            msg, fault = self._new_message(chat, body, size=call.size)
            if msg is not None:
                msg.receive_id = body.get("receive_id", "")
                fault = self._envelope(self._message_data(msg))
        await self._notify()
        return fault

    async def _reply(self, request: web.Request) -> web.Response:
        call, fault = await self._record(request, "message.reply")
        if fault is None:
            parent = self.messages.get(request.match_info["message_id"])
            if parent is None:
                fault = self._envelope({}, code=230011, msg="message not found")
            else:
                root = parent.root_id or parent.message_id
                msg, fault = self._new_message(
                    parent.chat_id, call.body or {}, root, parent.message_id, size=call.size
                )
                if msg is not None:
                    fault = self._envelope(self._message_data(msg))
        await self._notify()
        return fault

    async def _ephemeral(self, request: web.Request) -> web.Response:
        """`POST /open-apis/ephemeral/v1/send`: `chat_id`, one of `open_id` / `user_id` /
        `email`, `msg_type` "interactive" and `card` (a card object, not a string), in a group
        chat the person is in; a card over 30 KB is refused like a message (230025)."""
        call, fault = await self._record(request, "ephemeral.send")
        if fault is None:
            code, data = self._send_ephemeral(call)
            call.code = code
            fault = self._envelope({} if code else data, code=code, msg=data if code else "ok")
        await self._notify()
        return fault

    def _send_ephemeral(self, call: Call) -> tuple[int, Any]:
        """(0, the answer's data) or (Feishu's code, its message)."""
        body = call.body if isinstance(call.body, dict) else {}
        chat, card = body.get("chat_id"), body.get("card")
        who = [k for k in ("open_id", "user_id", "email") if body.get(k)]
        if not isinstance(chat, str) or not chat or len(who) != 1:
            return FIELD_INVALID, "field validation failed"
        if body.get("msg_type") != "interactive" or not isinstance(card, dict):
            return FIELD_INVALID, "field validation failed"
        if call.size > CARD_REQUEST_LIMIT:
            return 230025, "message content too long"
        problem = elements_problem(json.dumps(card))
        if problem:
            return 230001, problem
        if self.chat_types.get(chat) != "group":
            return NOT_A_GROUP, "only group chats take it"
        user = str(body[who[0]])
        if user not in self.members.get(chat, set()):
            return NOT_A_MEMBER, "the user is not in the chat"
        mid = f"om_eph_{next(self._ids):06d}{secrets.token_hex(4)}"
        self.ephemeral.append(Ephemeral(mid, chat, user, card))
        return 0, {"message_id": mid}

    async def _upload_file(self, request: web.Request) -> web.Response:
        """`POST /open-apis/im/v1/files`: multipart `file_type`, `file_name`, `file`; at most
        30 MB and never empty (the documented limits)."""
        call, fault = await self._record(request, "file.create")
        if fault is None:
            fields = multipart_fields(request.headers.get("Content-Type", ""), call.raw)
            data = fields.get("file", b"")
            if fields.get("file_type", b"").decode() not in FILE_TYPES:
                fault = self._envelope({}, code=234001, msg="Invalid request param: file_type")
            elif not fields.get("file_name"):
                fault = self._envelope({}, code=234001, msg="Invalid request param: file_name")
            elif not data or len(data) > FILE_LIMIT:
                fault = self._envelope({}, code=234006, msg="The file size is invalid.")
            else:
                key = f"file_v3_{secrets.token_hex(8)}"
                name, kind = fields["file_name"].decode(), fields["file_type"].decode()
                self.files[key] = {"file_type": kind, "file_name": name, "data": data}
                fault = self._envelope({"file_key": key})
        await self._notify()
        return fault

    async def _patch(self, request: web.Request) -> web.Response:
        call, fault = await self._record(request, "message.patch")
        if fault is None:
            msg = self.messages.get(request.match_info["message_id"])
            content = (call.body or {}).get("content")
            if msg is None:
                fault = self._envelope({}, code=230011, msg="message not found")
            elif msg.msg_type != "interactive" or not isinstance(content, str):
                fault = self._envelope({}, code=230001, msg="only cards can be patched")
            elif call.size > request_limit("interactive"):
                fault = self._envelope({}, code=230025, msg="message content too long")
            elif not json.loads(msg.contents[0]).get("config", {}).get("update_multi"):
                fault = self._envelope({}, code=230099, msg="card is not shared (update_multi)")
            elif (problem := elements_problem(content)) is not None:
                fault = self._envelope({}, code=230001, msg=problem)
            else:
                msg.contents.append(content)
                fault = self._envelope({})
        await self._notify()
        return fault

    # ------------------------------------------------------------ long connection

    async def _ws_endpoint(self, request: web.Request) -> web.Response:
        call, _ = await self._record(request, "ws.endpoint")
        body = call.body or {}
        await self._notify()
        if body.get("AppID") != self.app_id or body.get("AppSecret") != self.app_secret:
            return web.json_response({"code": 1000040343, "msg": "invalid app credentials"})
        ws_url = self.url.replace("http://", "ws://") + "/ws?device_id=d1&service_id=1"
        config = {
            "ReconnectCount": -1,
            "ReconnectInterval": 1,
            "ReconnectNonce": 0,
            "PingInterval": 120,
        }
        return web.json_response(
            {"code": 0, "msg": "ok", "data": {"URL": ws_url, "ClientConfig": config}}
        )

    async def _ws_handler(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._ws = ws
        self._ws_connected.set()
        async for msg in ws:
            if msg.type != aiohttp.WSMsgType.BINARY:
                continue
            frame = Frame()
            frame.ParseFromString(msg.data)
            headers = {h.key: h.value for h in frame.headers}
            waiter = self._ws_replies.pop(headers.get("message_id", ""), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(json.loads(frame.payload))
        return ws

    async def push_ws(
        self,
        payload: dict[str, Any],
        timeout: float = 10.0,  # noqa: ASYNC109
    ) -> dict[str, Any]:
        """Send an event over the long connection; returns the client's response frame body."""
        await asyncio.wait_for(self._ws_connected.wait(), timeout)
        assert self._ws is not None
        frame = Frame()
        frame.SeqID, frame.LogID, frame.service, frame.method = 1, 1, 1, 1  # method 1: data
        mid = secrets.token_hex(8)
        for key, value in (
            ("type", "event"),
            ("message_id", mid),
            ("trace_id", mid),
            ("sum", "1"),
            ("seq", "0"),
        ):
            header = frame.headers.add()
            header.key, header.value = key, value
        frame.payload = json.dumps(payload).encode()
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._ws_replies[mid] = waiter
        await self._ws.send_bytes(frame.SerializeToString())
        reply = await asyncio.wait_for(waiter, timeout)
        if reply.get("data"):
            reply["data"] = json.loads(base64.b64decode(reply["data"]))
        return reply
