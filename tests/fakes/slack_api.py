"""FakeSlack: a local Slack Web API speaking the real wire format, for the real slack_sdk client.

It keeps the messages it was sent (so `chat.update` of an unknown ts fails like Slack does),
enforces the size limits Slack enforces (`msg_too_long`, `invalid_blocks`, and
`msg_blocks_too_long` past about 12,500 characters of text across a message's blocks), serves
file uploads (files.getUploadURLExternal, the upload URL, files.completeUploadExternal),
records every call, and takes faults as data: `fail_next("chat.update", status=429,
headers={"Retry-After": "1"})` or `fail_next("chat.postMessage",
error="channel_not_found")`. Socket Mode is served too:
`apps.connections.open` hands out a WebSocket URL on the same server and `socket_send(...)`
pushes an envelope to the connected client, whose ack is recorded.

Several workspaces (OAuth installs): `register_app(client_id, secret, redirect_uri)` is the
app's credentials, `authorize(team, ...)` what Slack's consent page hands back (a one-time
code), and `oauth.v2.access` checks the code, the client id and secret (HTTP Basic or form)
and the redirect URI like Slack does, then issues a bot token for that team (or Grid org),
with a refresh token when rotation is on. Each token belongs to one team: used on a channel
another team owns (`add_channel`) it gets `channel_not_found`, and once `revoke(team)` ran,
`token_revoked`.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import math
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import WSMsgType, web
from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from tests.fakes.slack_agents import AgentMethods
from tests.fakes.slack_limits import TierLimits

BOT_TOKEN = "xoxb-fake-bot-token"
APP_TOKEN = "xapp-fake-app-token"
TEAM_ID = "T0FAKE"
BOT_USER_ID = "U0BOT"
BOT_ID = "B0BOT"
APP_ID = "A0FAKE"

USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
TS = re.compile(r"^\d{10}\.\d{6}$")
MAX_TEXT = 40_000
MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3_000
MAX_BLOCKS_TEXT = 12_500  # msg_blocks_too_long: Slack's is about 13,200, undocumented


def valid_block(block: dict[str, Any]) -> bool:
    """A block Slack would accept, as slack_sdk's own block models see it: a known type, within
    its limits, no unknown fields; `rich_text` made of known elements whose texts are strings;
    a `plan`'s tasks valid `task_card`s, whose details and output are valid `rich_text`."""
    try:
        parsed = Block.parse(block)
        if parsed is None:
            return False
        parsed.validate_json()
        same = parsed.to_dict() == block  # nested objects validate as they are serialised
    except (SlackObjectFormationError, TypeError, KeyError):
        return False
    if not same:
        return False
    kind = block.get("type")
    if kind == "plan":
        tasks = block.get("tasks") or []
        return bool(str(block.get("title") or "").strip()) and all(
            isinstance(t, dict) and t.get("type") == "task_card" and valid_block(t) for t in tasks
        )
    if kind == "task_card":
        if not str(block.get("title") or "").strip() or len(block["title"]) > 255:
            return False
        parts = [block[k] for k in ("details", "output") if k in block]
        return all(
            isinstance(p, dict) and p.get("type") == "rich_text" and valid_block(p) for p in parts
        )
    return kind != "rich_text" or _valid_rich_text(block)


def _valid_rich_text(block: dict[str, Any]) -> bool:
    for element in block.get("elements") or ():
        if element.get("type") not in _RICH_TEXT_ELEMENTS:
            return False
        for leaf in element.get("elements") or ():
            if leaf.get("type") not in _RICH_TEXT_LEAVES:
                return False
            if leaf["type"] == "text" and not (isinstance(leaf.get("text"), str) and leaf["text"]):
                return False
    return True


def valid_view(view: dict[str, Any]) -> bool:
    """A modal Slack would open, or a home it would publish (a modal's title at most 24
    characters, valid blocks, ...)."""
    try:
        View(**view).validate_json()
    except (SlackObjectFormationError, TypeError):
        return False
    return all(valid_block(block) for block in view.get("blocks", []))


_RICH_TEXT_ELEMENTS = frozenset(
    {"rich_text_section", "rich_text_list", "rich_text_preformatted", "rich_text_quote"}
)
_RICH_TEXT_LEAVES = frozenset(
    {"text", "link", "emoji", "user", "usergroup", "channel", "broadcast", "date", "color"}
)


@dataclass(frozen=True)
class Call:
    """One request the fake received: method name, merged arguments, and headers."""

    method: str
    args: dict[str, Any]
    headers: dict[str, str]
    status: int
    at: float = 0.0  # time.monotonic() when it arrived (benches)


@dataclass
class Grant:
    """What a token was issued for: a team, or (org install) a whole Grid org."""

    team: str | None
    enterprise: str | None = None
    org: bool = False
    refresh: str = ""
    revoked: bool = False


@dataclass
class Code:
    team: str | None
    enterprise: str | None
    org: bool
    client_id: str
    redirect_uri: str | None
    rotation: bool
    user: str


@dataclass
class Fault:
    method: str
    status: int = 200
    error: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    count: int = 1


class FakeSlack(AgentMethods):
    """aiohttp app on 127.0.0.1:0 serving the Web API methods the bot uses (the agent ones,
    streams and sessions, are in slack_agents.py)."""

    def __init__(self, *, token: str = BOT_TOKEN, team_id: str = TEAM_ID) -> None:
        self.token = token
        self.team_id = team_id
        self.grants: dict[str, Grant] = {token: Grant(team_id)}  # token -> what it serves
        self.channel_teams: dict[str, str] = {}  # channel -> the team that owns it
        self.team_orgs: dict[str, str] = {}  # team -> its Enterprise Grid org
        self.apps: dict[str, tuple[str, str | None]] = {}  # client id -> (secret, redirect)
        self.codes: dict[str, Code] = {}
        self._issued = itertools.count(1)
        self.token_lifetime_s = 43_200  # a rotating token's life (Slack's: 12 hours)
        self.close_connections = False  # answer `Connection: close`: every call connects anew
        self._caller = self.grants[token]  # the grant of the request being answered
        self.app = web.Application()
        self.app.router.add_route("*", "/api/{method}", self._handle)
        self.app.router.add_get("/socket", self._socket)
        self.app.router.add_post("/upload/{file_id}", self._upload)
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._calls: list[Call] = []
        self._faults: list[Fault] = []
        self._cond = asyncio.Condition()
        self._ts = itertools.count(1)
        self.messages: dict[tuple[str, str], dict[str, Any]] = {}
        self.ephemeral: list[dict[str, Any]] = []
        self.views: list[dict[str, Any]] = []
        self.used_triggers: set[str] = set()  # a trigger_id opens one view, like Slack's
        self.homes: dict[str, dict[str, Any]] = {}  # user id -> their App Home, as published
        self.users: dict[str, dict[str, Any]] = {}
        self.dms: dict[str, str] = {}  # user id -> the DM channel conversations.open gave
        self.uploads: dict[str, dict[str, Any]] = {}  # file id -> filename, length, content
        self.files: list[dict[str, Any]] = []  # files shared by files.completeUploadExternal
        self.socket_acks: list[dict[str, Any]] = []
        self._sockets: list[web.WebSocketResponse] = []
        self._holds: list[tuple[str, Callable[[dict[str, Any]], bool], asyncio.Event]] = []
        self.limits: TierLimits | None = None  # off unless `enforce_limits` turned it on
        self.rate_limited: list[Call] = []  # the calls the limits answered with 429
        self._agent_state()

    # lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        for ws in list(self._sockets):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        """Base URL for `AsyncWebClient(base_url=...)` (ends with a slash, like Slack's)."""
        return f"http://127.0.0.1:{self._port}/api/"

    # scripting and inspection ------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        *,
        status: int = 200,
        error: str | None = None,
        headers: dict[str, str] | None = None,
        count: int = 1,
    ) -> None:
        """The next `count` calls of `method` fail with an HTTP status or a Slack error code."""
        self._faults.append(Fault(method, status, error, dict(headers or {}), count))

    def enforce_limits(self, limits: TierLimits | None = None) -> TierLimits:
        """Slack's per-workspace method limits from now on (opt-in: off, nothing is
        limited): a call over its budget is answered 429 with `Retry-After`."""
        self.limits = limits or TierLimits()
        return self.limits

    def hold(self, method: str, when: Callable[[dict[str, Any]], bool] = lambda _: True) -> None:
        """Calls of `method` whose arguments match `when` are carried out (the message exists,
        as on Slack) but not answered until `release()`: the bot waits as on a slow network."""
        self._holds.append((method, when, asyncio.Event()))

    def release(self) -> None:
        for _, _, gate in self._holds:
            gate.set()
        self._holds.clear()

    def held(self, method: str) -> list[Call]:
        """Calls of `method` that were carried out while a hold applied to them."""
        return [c for c in self._calls if c.method == method and c.headers.get("X-Held")]

    def calls(self, method: str | None = None) -> list[Call]:
        return [c for c in self._calls if method is None or c.method == method]

    # several workspaces -------------------------------------------------------------------

    def register_app(self, client_id: str, secret: str, redirect_uri: str | None = None) -> None:
        """The app's OAuth credentials (and its one registered redirect URL)."""
        self.apps[client_id] = (secret, redirect_uri)

    def add_channel(self, channel: str, team: str, *, enterprise: str | None = None) -> None:
        """`channel` belongs to `team` (of Grid org `enterprise`): other teams' tokens are
        refused there."""
        self.channel_teams[channel] = team
        if enterprise:
            self.team_orgs[team] = enterprise

    def authorize(
        self,
        team: str | None,
        *,
        client_id: str,
        redirect_uri: str | None = None,
        enterprise: str | None = None,
        org: bool = False,
        rotation: bool = False,
        user: str = "U0INSTALLER",
    ) -> str:
        """A person approved the install on Slack's consent page: the code Slack sends to
        the redirect URL (one use, bound to the client id and the redirect URI asked for)."""
        code = secrets.token_hex(8)
        self.codes[code] = Code(team, enterprise, org, client_id, redirect_uri, rotation, user)
        return code

    def revoke(self, team: str) -> None:
        """The team uninstalled the app: every token issued for it stops working."""
        for grant in self.grants.values():
            if grant.team == team or (grant.org and grant.enterprise == team):
                grant.revoked = True

    def tokens_of(self, team: str) -> list[str]:
        return [t for t, g in self.grants.items() if g.team == team and not g.revoked]

    def team_of(self, call: Call) -> str | None:
        """The team whose token made `call`."""
        token = call.headers.get("Authorization", "").removeprefix("Bearer ")
        grant = self.grants.get(token or str(call.args.get("token") or ""))
        return grant.team if grant is not None else None

    def _allowed(self, grant: Grant, args: dict[str, Any]) -> bool:
        channel = args.get("channel") or args.get("channel_id")
        owner = self.channel_teams.get(channel) if isinstance(channel, str) else None
        if owner is None:
            return True
        if grant.org:
            return self.team_orgs.get(owner) == grant.enterprise
        return owner == grant.team

    def _client_credentials(self, args: dict[str, Any], headers: dict[str, str]) -> tuple[str, str]:
        auth = headers.get("Authorization", "")
        if auth.startswith("Basic "):
            decoded = base64.b64decode(auth.removeprefix("Basic ")).decode()
            client_id, _, secret = decoded.partition(":")
            return client_id, secret
        return str(args.get("client_id") or ""), str(args.get("client_secret") or "")

    def _oauth_v2_access(self, args: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        """Slack's token exchange: a code (with its redirect URI), or a refresh token."""
        client_id, secret = self._client_credentials(args, headers)
        if client_id not in self.apps:
            return {"ok": False, "error": "invalid_client_id"}
        if self.apps[client_id][0] != secret:
            return {"ok": False, "error": "bad_client_secret"}
        if args.get("grant_type") == "refresh_token":
            old = next((g for g in self.grants.values()
                        if g.refresh and g.refresh == args.get("refresh_token")), None)  # fmt: skip
            if old is None or old.revoked:
                return {"ok": False, "error": "invalid_refresh_token"}
            old.revoked = True  # the old access token stops working once refreshed
            return self._issue(Code(old.team, old.enterprise, old.org, client_id, None, True,
                                    "U0INSTALLER"), refreshed=True)  # fmt: skip
        code = self.codes.pop(str(args.get("code") or ""), None)
        if code is None or code.client_id != client_id:
            return {"ok": False, "error": "invalid_code"}
        registered = self.apps[client_id][1]
        if (args.get("redirect_uri") or None) != code.redirect_uri or (
            code.redirect_uri and registered and code.redirect_uri != registered
        ):
            return {"ok": False, "error": "bad_redirect_uri"}
        return self._issue(code)

    def _issue(self, code: Code, *, refreshed: bool = False) -> dict[str, Any]:
        n = next(self._issued)
        where = code.enterprise if code.org else code.team
        token = f"xoxb-{where}-{n}" if not code.rotation else f"xoxe.xoxb-1-{where}-{n}"
        grant = Grant(code.team if not code.org else None, code.enterprise, code.org)
        if code.rotation:
            grant.refresh = f"xoxe-1-{where}-{n}"
        self.grants[token] = grant
        body: dict[str, Any] = {"ok": True, "access_token": token, "token_type": "bot",
                                "scope": "chat:write", "bot_user_id": BOT_USER_ID,
                                "app_id": APP_ID}  # fmt: skip
        if code.rotation:
            body.update(refresh_token=grant.refresh, expires_in=self.token_lifetime_s)
        if refreshed:
            body["team"] = {"id": grant.team} if grant.team else None
            return body
        body.update(
            team={"id": code.team, "name": f"Team {code.team}"} if not code.org else None,
            enterprise={"id": code.enterprise, "name": "Grid"} if code.enterprise else None,
            is_enterprise_install=code.org,
            authed_user={"id": code.user, "scope": "", "token_type": "user"},
        )
        return body

    def add_user(self, user_id: str, name: str, *, is_bot: bool = False) -> None:
        self.users[user_id] = {
            "id": user_id,
            "team_id": self.team_id,
            "name": name,
            "real_name": name.title(),
            "is_bot": is_bot,
            "tz": "Etc/UTC",
            "profile": {"display_name": name, "real_name": name.title()},
        }

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 10) -> Any:  # noqa: ASYNC109
        """Wait until `predicate()` is truthy (re-checked after every call); return its value."""

        async def _wait() -> Any:
            async with self._cond:
                while not (value := predicate()):
                    await self._cond.wait()
                return value

        return await asyncio.wait_for(_wait(), timeout)

    def thread_messages(self, channel: str, root: str) -> list[dict[str, Any]]:
        """Messages the bot posted in a thread (current state, edits applied), oldest first."""
        found = [
            m
            for (ch, _ts), m in self.messages.items()
            if ch == channel and (m.get("thread_ts") == root or m["ts"] == root)
        ]
        return sorted(found, key=lambda m: m["ts"])

    # Socket Mode -------------------------------------------------------------------------

    async def socket_send(self, envelope: dict[str, Any]) -> None:
        """Push one Socket Mode envelope to every connected client."""
        for ws in list(self._sockets):
            await ws.send_str(json.dumps(envelope))

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        await ws.send_str(json.dumps({"type": "hello", "num_connections": 1}))
        self._sockets.append(ws)
        await self._notify()
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    self.socket_acks.append(json.loads(msg.data))
                    await self._notify()
        finally:
            self._sockets.remove(ws)
        return ws

    @property
    def socket_connected(self) -> bool:
        return bool(self._sockets)

    # the Web API -------------------------------------------------------------------------

    async def _notify(self) -> None:
        async with self._cond:
            self._cond.notify_all()

    async def _args(self, request: web.Request) -> dict[str, Any]:
        args: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            raw = await request.text()
            if request.content_type == "application/json":
                args.update(json.loads(raw or "{}"))
            else:
                args.update(dict(parse_qsl(raw)))
        for key in ("blocks", "view", "attachments", "files"):
            if isinstance(args.get(key), str):
                args[key] = json.loads(args[key])
        return args

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await self._args(request)
        headers = dict(request.headers)
        wait = None
        if self.limits is not None:  # Slack answers 429 before acting on the call
            wait = self.limits.take(method, self._limit_key(headers, args), time.monotonic())
        if wait is not None:
            status, body, extra = 429, {}, {"Retry-After": str(max(1, math.ceil(wait)))}
            self.rate_limited.append(Call(method, args, headers, 429, time.monotonic()))
        else:
            status, body, extra = self._respond(method, args, headers)
        gate = next((g for m, when, g in self._holds if m == method and when(args)), None)
        if gate is not None:
            headers["X-Held"] = "1"
        self._calls.append(Call(method, args, headers, status, time.monotonic()))
        await self._notify()
        if gate is not None:
            await gate.wait()
        if self.close_connections:
            extra = {**extra, "Connection": "close"}
        if status != 200:
            return web.json_response(
                {"ok": False, "error": "ratelimited"}, status=status, headers=extra
            )
        return web.json_response(body, headers=extra)

    def _limit_key(self, headers: dict[str, str], args: dict[str, Any]) -> tuple[str, str]:
        """(the calling token's team, the channel): what Slack counts a budget against."""
        token = headers.get("Authorization", "").removeprefix("Bearer ") or args.get("token", "")
        grant = self.grants.get(str(token))
        team = (grant.team or grant.enterprise or "") if grant is not None else ""
        return team, str(args.get("channel") or "")

    def _take_fault(self, method: str) -> Fault | None:
        for fault in self._faults:
            if fault.method == method and fault.count > 0:
                fault.count -= 1
                if fault.count == 0:
                    self._faults.remove(fault)
                return fault
        return None

    def _respond(
        self, method: str, args: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        fault = self._take_fault(method)
        if fault is not None:
            if fault.status != 200:
                return fault.status, {}, fault.headers
            return 200, {"ok": False, "error": fault.error or "fatal_error"}, fault.headers
        if method == "oauth.v2.access":  # the app's client credentials, no token
            return 200, self._oauth_v2_access(args, headers), {}
        auth = headers.get("Authorization", "")
        if not auth and "token" in args:
            auth = f"Bearer {args['token']}"
        if not auth:
            return 200, {"ok": False, "error": "not_authed"}, {}
        if method == "apps.connections.open":
            if auth != f"Bearer {APP_TOKEN}":
                return 200, {"ok": False, "error": "invalid_auth"}, {}
        else:
            grant = self.grants.get(auth.removeprefix("Bearer "))
            if grant is None:
                return 200, {"ok": False, "error": "invalid_auth"}, {}
            if grant.revoked:
                return 200, {"ok": False, "error": "token_revoked"}, {}
            if not self._allowed(grant, args):
                return 200, {"ok": False, "error": "channel_not_found"}, {}
            self._caller = grant
        if method in self.unavailable:
            return 200, {"ok": False, "error": self.unavailable[method]}, {}
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return 200, {"ok": False, "error": "unknown_method"}, {}
        return 200, handler(args), {}

    def _next_ts(self) -> str:
        return f"1700000000.{next(self._ts):06d}"

    def _check_content(self, args: dict[str, Any]) -> str | None:
        text = args.get("text") or ""
        blocks = args.get("blocks") or []
        if not text and not blocks:
            return "no_text"
        if len(text) > MAX_TEXT:
            return "msg_too_long"
        if len(blocks) > MAX_BLOCKS:
            return "invalid_blocks"
        if _blocks_text(blocks) > MAX_BLOCKS_TEXT:
            return "msg_blocks_too_long"
        for block in blocks:
            if not self._block_ok(block):
                return "invalid_blocks"
            section = block.get("text") if block.get("type") == "section" else None
            if section and len(section.get("text", "")) > MAX_SECTION_TEXT:
                return "invalid_blocks"
            for fld in block.get("fields", []) or []:
                if len(fld.get("text", "")) > 2000:
                    return "invalid_blocks"
        return None

    def _block_ok(self, block: dict[str, Any]) -> bool:
        """A valid block of a type this workspace renders (`refuse_block_type`)."""
        return valid_block(block) and block.get("type") not in self.refused_block_types

    def _m_auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        grant = self._caller
        answer = {
            "ok": True,
            "url": "https://fake-team.slack.com/",
            "team": "Fake Team",
            "user": "chatops",
            "team_id": grant.team if grant.team is not None else self.team_id,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "app_id": APP_ID,
            "is_enterprise_install": grant.org,
        }
        if grant.enterprise:
            answer["enterprise_id"] = grant.enterprise
        return answer

    def _m_chat_postMessage(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = args.get("channel")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if error := self._check_content(args):
            return {"ok": False, "error": error}
        ts = self._next_ts()
        message = {
            "type": "message",
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "app_id": "A0FAKE",
            "team": self.team_id,
            "text": args.get("text", ""),
            "blocks": args.get("blocks", []),
            "ts": ts,
        }
        if args.get("thread_ts"):
            message["thread_ts"] = args["thread_ts"]
        self.messages[(channel, ts)] = message
        return {"ok": True, "channel": channel, "ts": ts, "message": message}

    def _m_chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, ts = args.get("channel", ""), args.get("ts", "")
        message = self.messages.get((channel, ts))
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if message.get("streaming"):  # a stream is changed by appends until it is stopped
            return {"ok": False, "error": "cant_update_message"}
        if error := self._check_content({**message, **args}):
            return {"ok": False, "error": error}
        if "text" in args:
            message["text"] = args["text"]
        if "blocks" in args:
            message["blocks"] = args["blocks"]
        message["edited"] = {"user": BOT_USER_ID, "ts": self._next_ts()}
        return {
            "ok": True,
            "channel": channel,
            "ts": ts,
            "text": message["text"],
            "message": message,
        }

    def _m_chat_postEphemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        if not args.get("channel") or not args.get("user"):
            return {"ok": False, "error": "user_not_in_channel"}
        if error := self._check_content(args):
            return {"ok": False, "error": error}
        self.ephemeral.append(args)
        return {"ok": True, "message_ts": self._next_ts()}

    def _m_views_open(self, args: dict[str, Any]) -> dict[str, Any]:
        """A modal for one trigger_id (used once: `exchanged_trigger_id` after), valid as
        slack_sdk's models see it, at most 100 blocks, and a submit button when it has inputs."""
        trigger = args.get("trigger_id")
        if not isinstance(trigger, str) or not trigger:
            return {"ok": False, "error": "invalid_trigger_id"}
        if trigger in self.used_triggers:
            return {"ok": False, "error": "exchanged_trigger_id"}
        view = args.get("view") or {}
        if isinstance(view, str):  # slack_sdk sends the view as JSON text in a form body
            view = json.loads(view)
        if view.get("type") != "modal" or len(view.get("blocks", [])) > 100:
            return {"ok": False, "error": "invalid_arguments"}
        inputs = any(b.get("type") == "input" for b in view.get("blocks", []))
        if not valid_view(view) or (inputs and not view.get("submit")):
            return {"ok": False, "error": "invalid_arguments"}
        self.used_triggers.add(trigger)
        stored = {
            **view,
            "id": f"V{len(self.views) + 1:06d}",
            "team_id": self.team_id,
            "state": {"values": {}},
            "hash": "1700000000.abcdef",
        }
        self.views.append(stored)
        return {"ok": True, "view": stored}

    def _m_views_publish(self, args: dict[str, Any]) -> dict[str, Any]:
        """A user's App Home: a `home` view Slack would accept (slack_sdk's View model and the
        blocks' own checks), at most 100 blocks, kept per user (the latest wins)."""
        user = args.get("user_id")
        if not isinstance(user, str) or not user:
            return {"ok": False, "error": "invalid_arguments"}
        view = args.get("view") or {}
        if view.get("type") != "home" or len(view.get("blocks", [])) > 100:
            return {"ok": False, "error": "invalid_arguments"}
        if not valid_view(view):
            return {"ok": False, "error": "invalid_arguments"}
        stored = {**view, "id": f"VH{user}", "team_id": self.team_id, "type": "home"}
        self.homes[user] = stored
        return {"ok": True, "view": stored}

    def _m_conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        messages = self.thread_messages(args.get("channel", ""), args.get("ts", ""))
        if not messages:
            return {"ok": False, "error": "thread_not_found"}
        return {
            "ok": True,
            "messages": messages,
            "has_more": False,
            "response_metadata": {"next_cursor": ""},
        }

    def _m_conversations_open(self, args: dict[str, Any]) -> dict[str, Any]:
        """A DM with one user (`users`: comma-separated ids, as Slack takes them); the same
        user gets the same D channel every time."""
        users = [u for u in str(args.get("users") or "").split(",") if u]
        if not users and not args.get("channel"):
            return {"ok": False, "error": "users_list_not_supplied"}
        if len(users) != 1:
            return {"ok": False, "error": "not_implemented"}  # group DMs: not used by the bot
        if not USER_ID.match(users[0]) or (self.users and users[0] not in self.users):
            return {"ok": False, "error": "user_not_found"}
        channel = self.dms.setdefault(users[0], f"D{users[0][1:]}")
        return {"ok": True, "channel": {"id": channel}}

    def _m_chat_getPermalink(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, ts = str(args.get("channel") or ""), str(args.get("message_ts") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not TS.match(ts):
            return {"ok": False, "error": "message_not_found"}
        link = f"https://fake-team.slack.com/archives/{channel}/p{ts.replace('.', '')}"
        return {"ok": True, "channel": channel, "permalink": link}

    def _m_users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(args.get("user", ""))
        if user is None:
            return {"ok": False, "error": "user_not_found"}
        return {"ok": True, "user": user}

    def _m_files_getUploadURLExternal(self, args: dict[str, Any]) -> dict[str, Any]:
        if not args.get("filename") or not str(args.get("length", "")).isdigit():
            return {"ok": False, "error": "invalid_arguments"}
        file_id = f"F{len(self.uploads) + 1:08d}"
        self.uploads[file_id] = {"filename": args["filename"], "length": int(args["length"])}
        return {"ok": True, "upload_url": f"http://127.0.0.1:{self._port}/upload/{file_id}",
                "file_id": file_id}  # fmt: skip

    async def _upload(self, request: web.Request) -> web.Response:
        upload = self.uploads.get(request.match_info["file_id"])
        if upload is None:
            return web.Response(status=404, text="unknown upload")
        upload["content"] = await request.read()
        return web.Response(text=f"OK - {len(upload['content'])}")

    def _m_files_completeUploadExternal(self, args: dict[str, Any]) -> dict[str, Any]:
        if args.get("thread_ts") and not args.get("channel_id"):
            return {"ok": False, "error": "invalid_arguments"}  # a reply needs its channel
        shared = []
        for item in args.get("files") or []:
            upload = self.uploads.get(item.get("id", ""))
            if upload is None or "content" not in upload:
                return {"ok": False, "error": "file_not_found"}
            if len(upload["content"]) != upload["length"]:
                return {"ok": False, "error": "file_upload_size_mismatch"}
            if upload.get("completed"):
                return {"ok": False, "error": "file_not_found"}  # an upload is shared once
            upload["completed"] = True
            shared.append({"id": item["id"], "title": item.get("title") or upload["filename"],
                           "name": upload["filename"]})  # fmt: skip
        if not shared:
            return {"ok": False, "error": "invalid_arguments"}
        channel = args.get("channel_id") or ""
        for info in shared:
            content = self.uploads[info["id"]]["content"].decode()
            comment = args.get("initial_comment")
            self.files.append({**info, "channel": channel, "thread_ts": args.get("thread_ts"),
                               "content": content, "initial_comment": comment})  # fmt: skip
        if channel:  # the share appears in the thread as a message carrying the file
            ts = self._next_ts()
            self.messages[(channel, ts)] = {
                "type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID,
                "text": args.get("initial_comment") or "", "files": shared, "ts": ts,
                **({"thread_ts": args["thread_ts"]} if args.get("thread_ts") else {}),
            }  # fmt: skip
        return {"ok": True, "files": shared}

    def _m_apps_connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "url": f"ws://127.0.0.1:{self._port}/socket"}


def _blocks_text(blocks: list[Any]) -> int:
    """Text carried by all of a message's blocks (text objects and rich text elements), in
    UTF-16 code units, as Slack counts it."""
    total = 0
    pending: list[Any] = list(blocks)
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            text = node.get("text")
            if node.get("type") in ("mrkdwn", "plain_text", "text") and isinstance(text, str):
                total += len(text.encode("utf-16-le")) // 2
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return total
