"""The web console's HTTP routes: the page and its files, the conversations, messages, decisions
and the event stream; the approvals and call-log views are `browse.py`'s.

A request typed in the browser becomes an `InboundMessage` on the "console" platform and goes
through the `dispatch` port like a Slack mention. Every route sits behind `guard.py` (a local
browser, or a public console's token); POSTs must be same-origin JSON.
"""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
from typing import Any

from aiohttp import web

from bot.chat.controls import RATINGS, FeedbackClick, StopRequest
from bot.chat.forms import EditForm
from bot.chat.ports import SurfacePorts
from bot.chat.questions import ACTIONS as QUESTION_ACTIONS
from bot.chat.threads import InboundMessage, ThreadRef
from bot.config import Settings
from bot.engine.llm import LLM_NOT_CONFIGURED
from bot.surfaces.console.browse import BrowseRoutes
from bot.surfaces.console.files import ROUTE as FILES_ROUTE
from bot.surfaces.console.guard import ConsoleGuard, check_console_settings
from bot.surfaces.console.manage import ThreadControls
from bot.surfaces.console.ports import ConsolePorts
from bot.surfaces.console.signin import (
    CALLBACK_PATH,
    SIGNIN_PATH,
    SIGNOUT_PATH,
    USER_KEY,
    ConsoleIdentity,
)
from bot.surfaces.console.static import PAGE_ROUTES, StaticFiles
from bot.surfaces.console.stream import serve_events
from bot.surfaces.console.surface import (
    APPROVALS_ROOT,
    CHANNEL,
    DEFAULT_USER,
    PLATFORM,
    WORKSPACE,
    ConsoleSurface,
    item_json,
    thread_json,
)

LLM_BANNER = LLM_NOT_CONFIGURED  # the one text, as the server's start-up log says it
MAX_TEXT_CHARS = 20_000
THREAD_ITEMS = 1000  # the latest items of a thread a page loads
ROOT_PATTERN = re.compile(r"^[0-9a-f]{32}$")  # roots the console makes (uuid4 hex)
CLIENT_ID = re.compile(r"^[A-Za-z0-9_-]{8,64}$")  # the page's id for one message it sends
DECISIONS = (
    "approve",
    "reject",
    "approve_thread",
    "approve_edited",
    "request_changes",
    "approve_all",  # a batch card's: every pending call of the approval's batch, or none
    "reject_all",
)
# DecisionResult.status -> HTTP status of the console's approval endpoint
DECISION_HTTP_STATUS = {
    "decided": 200,
    "recorded": 200,
    "already_decided": 409,
    "unauthorized": 403,
    "self_approval_refused": 403,
    "grant_refused": 403,
    "wrong_platform": 403,
    "not_found": 404,
    "wrong_card": 409,
    "edit_refused": 422,
}
# AnswerResult.status -> HTTP status of the console's question endpoint
ANSWER_HTTP_STATUS = {
    "answered": 200,
    "invalid": 422,
    "unauthorized": 403,
    "not_found": 404,
    "closed": 409,
}
# StopResult.status -> HTTP status of the console's stop endpoint
STOP_HTTP_STATUS = {
    "stopping": 202,
    "already_stopping": 409,
    "refused": 403,
    "not_running": 409,
    "not_found": 404,
}


class ConsoleRoutes:
    """The console's HTTP handlers, bound to the ports and one `ConsoleSurface`."""

    def __init__(
        self,
        ports: SurfacePorts,
        settings: Settings,
        surface: ConsoleSurface,
        identity: ConsoleIdentity | None = None,
    ) -> None:
        self.ports = ports
        self.settings = settings
        self.surface = surface
        self.identity = identity or ConsoleIdentity(settings)

    async def state(self, request: web.Request) -> web.Response:
        """The bot's own state (model, tools, surfaces, connectors) and the latest event id."""
        status = self.ports.status()
        return web.json_response(
            {
                "llm_configured": status.llm_configured,
                "banner": None if status.llm_configured else LLM_BANNER,
                "model": status.model,
                "tools": list(status.tools),
                "surfaces": list(status.surfaces),
                "skipped_connectors": list(status.skipped_connectors),
                "connectors_down": list(status.connectors_down),
                "cursor": await self.surface.store.cursor(),
                # who the page is used by: `verified`, the server knows (the page hides its
                # "you are" box); else the page names its user (a local console)
                "identity": {
                    "user": request.get(USER_KEY),
                    "verified": self.identity.verified,
                    "mode": self.identity.mode,
                },
            }
        )

    async def threads(self, request: web.Request) -> web.Response:
        """The sidebar: conversations, the one changed last first."""
        cursor = await self.surface.store.cursor()
        found = await self.surface.store.threads(hidden=(APPROVALS_ROOT,))
        return web.json_response({"threads": [thread_json(t) for t in found], "cursor": cursor})

    async def thread(self, request: web.Request) -> web.Response:
        """One conversation as it stands: its items in order, the event id they are as of
        (read first: the stream resumes from it, so nothing falls between the two), and
        the asker's ratings of its answers (run id -> up or down: the signed-in user, or on
        a local console `?user=`, as for a feedback click)."""
        root = request.match_info["root"]
        cursor = await self.surface.store.cursor()
        found = await self.surface.store.thread(root)
        if found is None or root == APPROVALS_ROOT:
            return _error(404, "no such conversation")
        items = await self.surface.store.items(root, THREAD_ITEMS)
        rated = [str(i.data.get("feedback_run")) for i in items if i.data.get("feedback_run")]
        user = _user(request, dict(request.query))
        return web.json_response(
            {
                "thread": thread_json(found),
                "items": [item_json(item) for item in items],
                "cursor": cursor,
                "ratings": await self.surface.store.ratings(rated, user),  # the viewer's thumbs
            }
        )

    async def post_message(self, request: web.Request) -> web.Response:
        """A message: it joins its thread (new when `thread` is null) before it is dispatched,
        then says what became of it. `client_id` (the page's id for it) makes sending twice
        harmless: the second time changes nothing."""
        body = await _json_body(request)
        text = str(body.get("text") or "").strip()
        if not text:
            return _error(400, "type a request first")
        if len(text) > MAX_TEXT_CHARS:
            return _error(413, f"a request is at most {MAX_TEXT_CHARS} characters")
        if not self.settings.llm_configured:
            return _error(503, LLM_BANNER)
        client_id = body.get("client_id") or uuid.uuid4().hex
        if not isinstance(client_id, str) or not CLIENT_ID.match(client_id):
            return _error(400, "client_id is 8 to 64 letters, digits, '-' or '_'")
        user, item_id = _user(request, body), f"m-{client_id}"
        sent_before = await self.surface.store.item(item_id)
        if sent_before is not None:  # sent again: it belongs where it went the first time
            root = sent_before.root
        else:
            root = body.get("thread") or uuid.uuid4().hex
            if not isinstance(root, str) or not ROOT_PATTERN.match(root):
                return _error(404, "no such conversation")
            if body.get("thread") and await self.surface.store.thread(root) is None:
                return _error(404, "no such conversation")
        thread = ThreadRef(PLATFORM, WORKSPACE, CHANNEL, root)
        message = InboundMessage(
            thread=thread,
            event_id=f"console-{client_id}",
            user_id=user,
            text=text,
            message_id=client_id,
        )
        created = await self.surface.post_user_message(thread, item_id, text, user)
        try:
            outcome = await self.ports.dispatch(message, None)
        except Exception:
            await self.surface.acknowledge(thread, item_id, text, user, "failed")
            raise
        if created or outcome.kind != "duplicate":
            await self.surface.acknowledge(thread, item_id, text, user, outcome.kind)
        status = 202 if created or outcome.kind != "duplicate" else 200
        return web.json_response(
            {"thread": root, "outcome": outcome.kind, "id": item_id}, status=status
        )

    async def decide(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        decision = body.get("decision")
        if decision not in DECISIONS:
            return _error(400, f"decision must be one of {', '.join(DECISIONS)}")
        grantees = body.get("grantees")
        if grantees is not None and (
            not isinstance(grantees, list) or not all(isinstance(g, str) for g in grantees)
        ):
            return _error(400, "grantees must be a list of user names")
        approval_id, user = request.match_info["approval_id"], _user(request, body)
        arguments, base = None, str(body.get("fingerprint") or "")
        if decision == "approve_edited":  # checked first: a bad edit stays in the dialog
            values = body.get("values")
            if not isinstance(values, dict) or not all(
                isinstance(v, str | None) for v in values.values()
            ):
                return _error(400, "values must map each argument to its text (or null)")
            checked = await self.ports.decisions.check_edit(
                approval_id, user, values, fingerprint=base, platform=PLATFORM
            )
            if not checked.ok or checked.arguments is None:
                return web.json_response(
                    {"status": "edit_refused", "message": checked.message(),
                     "errors": dict(checked.errors)},
                    status=422,
                )  # fmt: skip
            arguments = dict(checked.arguments)
        result = await self.ports.decisions.decide(
            approval_id,
            user,
            decision,
            str(body.get("reason") or ""),
            platform=PLATFORM,
            grantees=grantees,
            arguments=arguments,
            fingerprint=base,
        )
        return web.json_response(
            {"status": result.status, "message": result.message},
            status=DECISION_HTTP_STATUS.get(result.status, 200),
        )

    async def edit_form(self, request: web.Request) -> web.Response:
        """`GET /console/api/approvals/{approval_id}/form?user=...`: the form to edit the call
        in (one field per argument), for someone who may approve it; else why not."""
        user = _user(request, dict(request.query))
        form = await self.ports.decisions.edit_form(
            request.match_info["approval_id"], user, platform=PLATFORM
        )
        if not isinstance(form, EditForm):
            return web.json_response(
                {"status": form.status, "message": form.message},
                status=DECISION_HTTP_STATUS.get(form.status, 403),
            )
        fields = [dataclasses.asdict(field) for field in form.fields]
        return web.json_response(
            {"approval_id": form.approval_id, "tool_name": form.tool_name, "title": form.title,
             "note": form.note, "fingerprint": form.fingerprint, "fields": fields}
        )  # fmt: skip

    async def answer_question(self, request: web.Request) -> web.Response:
        """`POST /console/api/questions/{question_id}` with `action` accept (and `values`, each
        field's text), decline or cancel: a tool's question, answered by one of the run's
        requesters (`bot.elicitation`). Never an approval: the broker is not asked."""
        body = await _json_body(request)
        action = body.get("action")
        if action not in QUESTION_ACTIONS:
            return _error(400, f"action must be one of {', '.join(QUESTION_ACTIONS)}")
        values = body.get("values") or {}
        if not isinstance(values, dict) or not all(
            isinstance(v, str | None) for v in values.values()
        ):
            return _error(400, "values must map each field to its text (or null)")
        if self.ports.questions is None:
            return _error(404, "There is no such open question.")
        result = await self.ports.questions.answer(
            request.match_info["question_id"],
            _user(request, body),
            action,
            values,
            platform=PLATFORM,
        )
        return web.json_response(
            {"status": result.status, "message": result.message, "errors": dict(result.errors)},
            status=ANSWER_HTTP_STATUS[result.status],
        )

    async def stop(self, request: web.Request) -> web.Response:
        """`POST /console/api/runs/{run_id}/stop`: the run manager decides (requesters and
        approvers only, console runs only)."""
        body = await _json_body(request)
        result = await self.ports.stop(
            StopRequest(
                platform=PLATFORM,
                user_id=_user(request, body),
                run_id=request.match_info["run_id"],
            )  # fmt: skip
        )
        return web.json_response(
            {"status": result.status, "message": result.message},
            status=STOP_HTTP_STATUS[result.status],
        )

    async def feedback(self, request: web.Request) -> web.Response:
        """`POST /console/api/runs/{run_id}/feedback` with `rating` up or down: stored before
        the answer (it counts once applied: a console run with an answer)."""
        body = await _json_body(request)
        rating = body.get("rating")
        if rating not in RATINGS:
            return _error(400, "rating must be up or down")
        click = FeedbackClick(platform=PLATFORM, user_id=_user(request, body), rating=rating,
                              run_id=request.match_info["run_id"])  # fmt: skip
        await self.ports.inbox.accept_feedback(click)
        return web.json_response({"status": "recorded"}, status=202)

    async def events(self, request: web.Request) -> web.StreamResponse:
        return await serve_events(request, self.surface)


async def _json_body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object; JSON is UTF-8 whatever charset the Content-Type claims."""
    try:
        body = json.loads((await request.read()).decode("utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, or nested absurdly deep
        raise web.HTTPBadRequest(text="the body is not valid UTF-8 JSON") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="the body must be a JSON object")
    return body


def _user(request: web.Request, body: dict[str, Any]) -> str:
    """Who the request is from: the signed-in (or proxy-named) user the guard found, or on a
    local console the name its page sends (nobody else reaches a local console)."""
    known = request.get(USER_KEY)
    if isinstance(known, str):
        return known
    user = str(body.get("user") or "").strip()[:64]
    return user or DEFAULT_USER


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def setup_console(
    app: web.Application, ports: SurfacePorts, console: ConsolePorts, settings: Settings
) -> ConsoleSurface:
    """Mount the console (its page at `/` and the page's own addresses, its files, the
    `/console/api/...` routes) and register it with the run manager (a `StartupError` for a
    public console without a token)."""
    identity = ConsoleIdentity(settings)
    check_console_settings(settings, identity)
    surface = ConsoleSurface(console.items)
    routes = ConsoleRoutes(ports, settings, surface, identity)
    browse = BrowseRoutes(ports, console)
    static = StaticFiles()
    app.middlewares.append(static.not_found)  # the console's own 404 page for a browser
    guard = ConsoleGuard(settings, identity)
    if identity.mode == "oidc":
        app.router.add_get(SIGNIN_PATH, guard.page(identity.sign_in))
        app.router.add_get(CALLBACK_PATH, guard.page(identity.callback))
        app.router.add_post(SIGNOUT_PATH, guard.api(identity.sign_out))
    for path in PAGE_ROUTES:
        app.router.add_get(path, guard.page(static.page))
    app.router.add_get("/console/static/{name}", guard.page(static.file))
    app.router.add_get("/favicon.ico", guard.page(static.favicon))
    api = "/console/api"
    app.router.add_get(f"{api}/state", guard.api(routes.state))
    app.router.add_get(f"{api}/events", guard.api(routes.events))
    app.router.add_get(f"{api}/threads", guard.api(routes.threads))
    app.router.add_get(f"{api}/threads/{{root}}", guard.api(routes.thread))
    app.router.add_post(f"{api}/messages", guard.api(routes.post_message))
    controls = ThreadControls(surface)
    app.router.add_post(f"{api}/threads/{{root}}/rename", guard.api(controls.rename))
    app.router.add_post(f"{api}/threads/{{root}}/delete", guard.api(controls.delete))
    app.router.add_get(FILES_ROUTE, guard.api(surface.files.serve))
    app.router.add_get(f"{api}/approvals", guard.api(browse.approvals))
    app.router.add_post(f"{api}/approvals/{{approval_id}}", guard.api(routes.decide))
    app.router.add_get(f"{api}/approvals/{{approval_id}}/form", guard.api(routes.edit_form))
    app.router.add_get(f"{api}/calls", guard.api(browse.calls))
    app.router.add_post(f"{api}/questions/{{question_id}}", guard.api(routes.answer_question))
    app.router.add_post(f"{api}/runs/{{run_id}}/stop", guard.api(routes.stop))
    app.router.add_post(f"{api}/runs/{{run_id}}/feedback", guard.api(routes.feedback))
    ports.register(surface)
    ports.listen(surface.on_run_event)

    async def close_streams(_: web.Application) -> None:
        surface.close()

    app.on_shutdown.append(close_streams)
    return surface
