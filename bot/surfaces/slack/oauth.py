"""Slack OAuth installs: `GET /slack/install`, `GET /slack/oauth_redirect`, and uninstalls.

bolt's `AsyncOAuthFlow` runs the install (a state issued to the installer's browser as a
cookie and in the state store, Slack's consent page, then `oauth.v2.access` with the code and
the app's client id and secret) and saves the installation in the bot's database
(`installs.py`); the token of each workspace comes from there (`workspaces.py`). Tokens with
rotation on carry a refresh token and are refreshed before they expire (bolt's authorize for
inbound requests, `SlackClients` for outbound calls). `app_uninstalled` and `tokens_revoked`
delete what the workspace (or the Grid org) installed, before the ack, then stop the runs of
its threads in this process: nothing is posted there again, and nothing it sends is accepted.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.oauth.async_oauth_flow import AsyncOAuthFlow
from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore
from slack_sdk.oauth.token_rotation.async_rotator import AsyncTokenRotator

from bot.config import Settings, split_list
from bot.surfaces.slack.client import MeteredWebClient
from bot.surfaces.slack.workspaces import SlackClients

log = logging.getLogger(__name__)
INSTALL_PATH = "/slack/install"
REDIRECT_PATH = "/slack/oauth_redirect"
UNINSTALL_EVENTS = frozenset({"app_uninstalled", "tokens_revoked"})
# stop the runs of these workspaces (platform, workspace) -> how many were stopped
EndWorkspace = Callable[[str, str], Awaitable[int]]


@dataclass(frozen=True)
class OAuthStores:
    """Where installs are kept (the wiring builds them on the bot's database:
    `bot.storage.slack_installs`): installations and tokens, and the install states."""

    installations: AsyncInstallationStore
    states: AsyncOAuthStateStore


@dataclass(frozen=True)
class SlackOAuth:
    """What OAuth mode adds: bolt's flow (for the routes and bolt's authorize), the store and
    the clients of every workspace."""

    flow: AsyncOAuthFlow
    installations: AsyncInstallationStore
    clients: SlackClients


def build_oauth(settings: Settings, stores: OAuthStores, client: MeteredWebClient) -> SlackOAuth:
    """The flow over `stores`; `client` (no token of its own) is the template of every
    workspace's client and makes the flow's `oauth.v2.access` and `auth.test` calls."""
    assert settings.slack_client_id and settings.slack_client_secret  # slack_mode_problem
    secret = settings.slack_client_secret.get_secret_value()
    installations = stores.installations
    flow_settings = AsyncOAuthSettings(
        client_id=settings.slack_client_id,
        client_secret=secret,
        scopes=split_list(settings.slack_scopes),
        user_scopes=[],
        redirect_uri=settings.slack_redirect_uri,
        install_path=INSTALL_PATH,
        redirect_uri_path=REDIRECT_PATH,
        installation_store=installations,
        state_store=stores.states,
        token_rotation_expiration_minutes=settings.slack_token_rotation_minutes,
        logger=log,
    )
    flow = AsyncOAuthFlow(client=client, logger=log, settings=flow_settings)
    rotator = AsyncTokenRotator(
        client_id=settings.slack_client_id, client_secret=secret, client=client
    )
    clients = SlackClients(
        client,
        installations,
        rotator=rotator,
        rotation_minutes=settings.slack_token_rotation_minutes,
    )
    return SlackOAuth(flow=flow, installations=installations, clients=clients)


def add_install_routes(app: web.Application, flow: AsyncOAuthFlow) -> None:
    """`GET /slack/install` (the "Add to Slack" page, setting the state cookie) and
    `GET /slack/oauth_redirect` (Slack sends the installer back with a code)."""

    def bolt_request(request: web.Request) -> AsyncBoltRequest:
        return AsyncBoltRequest(body="", query=request.query_string, headers=request.headers)  # type: ignore[arg-type]

    async def install(request: web.Request) -> web.Response:
        return await to_aiohttp_response(await flow.handle_installation(bolt_request(request)))

    async def oauth_redirect(request: web.Request) -> web.Response:
        return await to_aiohttp_response(await flow.handle_callback(bolt_request(request)))

    app.router.add_get(INSTALL_PATH, install)
    app.router.add_get(REDIRECT_PATH, oauth_redirect)


class Uninstalls:
    """`app_uninstalled` and `tokens_revoked` (of the bot token): the workspace's tokens
    deleted, its runs stopped."""

    def __init__(self, oauth: SlackOAuth, end_workspace: EndWorkspace) -> None:
        self._oauth = oauth
        self._end = end_workspace

    async def accept(self, body: Mapping[str, Any]) -> None:
        """One verified uninstall event (raises when the store fails: Slack retries)."""
        event = body.get("event") if isinstance(body.get("event"), dict) else {}
        team = _text(body.get("team_id"))
        enterprise = _text(body.get("enterprise_id"))
        whole_org = _org_install(body)
        where = {"enterprise_id": enterprise, "team_id": None if whole_org else team}
        store = self._oauth.installations
        teams = self._oauth.clients.teams_of(enterprise) if whole_org and enterprise else []
        teams = list(dict.fromkeys([t for t in (team, *teams) if t]))
        if event.get("type") == "app_uninstalled":
            await store.async_delete_all(**where)
        else:
            tokens = event.get("tokens") if isinstance(event.get("tokens"), dict) else {}
            if not tokens.get("bot"):
                # only people's tokens: the install asks no user scopes, so none is stored
                # (the installer's row holds the bot token, which still serves the workspace)
                return
            await store.async_delete_all(**where)
        stopped = 0
        for each in teams:
            self._oauth.clients.forget(each)
            stopped += await self._end("slack", each)
        log.warning(
            "slack: %s removed the app (%s): its tokens are deleted, %d run(s) stopped",
            ", ".join(teams) or enterprise or "?", event.get("type"), stopped,
        )  # fmt: skip


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _org_install(body: Mapping[str, Any]) -> bool:
    """The event is for an Enterprise Grid org-wide install (its `authorizations` say so)."""
    found = body.get("authorizations")
    first = found[0] if isinstance(found, list) and found and isinstance(found[0], dict) else {}
    return bool(first.get("is_enterprise_install") or body.get("is_enterprise_install"))
