"""Which token speaks for which Slack workspace: one bot token, or one per OAuth install.

Every outbound Web API call is made with the token of the workspace the thread lives in
(`SlackClients.client`), so a message for team A can never go out with team B's token.
With `SLACK_BOT_TOKEN` there is one workspace and one client. With OAuth installs the token
comes from the installation store: the workspace's own install, else its Enterprise Grid
organisation's (an org-wide install serves every workspace of the org; the org of a team is
learned from the verified requests it sends). A token with rotation on is refreshed through
`oauth.v2.access` shortly before it expires, and the new one saved. Clients are kept per token
(bounded), sharing the app's session, meter and retry handlers. An installation read from the
store is kept `FOUND_TTL_S` (a status edit does not cost a query); an uninstall here drops
it at once, one in another process within that time (Slack refuses the revoked token anyway).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict

from slack_sdk.oauth.installation_store import Installation
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.token_rotation.async_rotator import AsyncTokenRotator
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import NotInstalled
from bot.surfaces.slack.client import MeteredWebClient
from bot.surfaces.slack.identity import SlackIdentity

log = logging.getLogger(__name__)
MAX_CLIENTS = 1_000  # clients kept (one per token in use); the oldest is dropped past it
MAX_ORGS = 100_000  # team -> Enterprise Grid org learned from requests
FOUND_TTL_S = 30.0  # how long an installation read from the store is used without asking again


class SlackClients:
    """The Web API client of each workspace (see the module docstring)."""

    def __init__(
        self,
        base: MeteredWebClient,
        installations: AsyncInstallationStore | None = None,
        *,
        rotator: AsyncTokenRotator | None = None,
        rotation_minutes: int = 120,
    ) -> None:
        """`base`: the one client (single-token mode), and the template of the others;
        `installations`: OAuth mode's store (None: single-token mode)."""
        self.base = base
        self.installations = installations
        self._rotator = rotator
        self._rotation_minutes = rotation_minutes
        self._clients: OrderedDict[str, AsyncWebClient] = OrderedDict()
        self._orgs: OrderedDict[str, str] = OrderedDict()
        self._found: OrderedDict[str, tuple[float, Installation]] = OrderedDict()
        self._rotating = asyncio.Lock()  # one refresh at a time: a refresh token is used once

    @property
    def oauth(self) -> bool:
        return self.installations is not None

    def learn_org(self, team_id: str, enterprise_id: str | None) -> None:
        """A verified request said team `team_id` belongs to this Grid org."""
        if not (self.oauth and team_id and enterprise_id):
            return
        self._orgs[team_id] = enterprise_id
        self._orgs.move_to_end(team_id)
        while len(self._orgs) > MAX_ORGS:
            self._orgs.popitem(last=False)

    def teams_of(self, enterprise_id: str) -> list[str]:
        """The teams of a Grid org seen so far (an org-wide uninstall ends them all)."""
        return [team for team, org in self._orgs.items() if org == enterprise_id]

    async def installation(self, team_id: str) -> Installation:
        """The installation serving `team_id` (its own, else its org's), tokens fresh.
        Raises `NotInstalled`."""
        store = self.installations
        if store is None or not team_id:
            raise NotInstalled(f"no Slack installation for workspace {team_id or '(none)'}")
        kept = self._found.get(team_id)
        if kept is not None and time.monotonic() - kept[0] < FOUND_TTL_S:
            return await self._fresh(team_id, kept[1])
        org = self._orgs.get(team_id)
        found = await store.async_find_installation(enterprise_id=org, team_id=team_id)
        if found is None and org is not None:
            found = await store.async_find_installation(
                enterprise_id=org, team_id=None, is_enterprise_install=True
            )
        if found is None or not found.bot_token:
            self._found.pop(team_id, None)
            raise NotInstalled(f"no Slack installation for workspace {team_id}")
        self._keep(team_id, found)
        return await self._fresh(team_id, found)

    def _keep(self, team_id: str, installation: Installation) -> None:
        self._found[team_id] = (time.monotonic(), installation)
        self._found.move_to_end(team_id)
        while len(self._found) > MAX_CLIENTS:
            self._found.popitem(last=False)

    async def _fresh(self, team_id: str, installation: Installation) -> Installation:
        """The installation with its bot token rotated when it is about to expire."""
        if self._rotator is None or not installation.bot_refresh_token:
            return installation
        async with self._rotating:
            kept = self._found.get(team_id)
            if kept is not None and kept[1].bot_token != installation.bot_token:
                installation = kept[1]  # refreshed by a concurrent caller meanwhile
            rotated = await self._rotator.perform_token_rotation(
                installation=installation, minutes_before_expiration=self._rotation_minutes
            )
            if rotated is not None:
                await self._saved(team_id, rotated)
        return rotated or installation

    async def _saved(self, team_id: str, rotated: Installation) -> None:
        """The refreshed tokens stored, and used from now on."""
        assert self.installations is not None
        await self.installations.async_save(rotated)
        self._keep(team_id, rotated)
        log.info("slack: the bot token of %s was rotated", rotated.team_id or rotated.enterprise_id)

    async def client(self, team_id: str) -> AsyncWebClient:
        """The client whose token belongs to `team_id`'s installation. Raises `NotInstalled`."""
        if not self.oauth:
            return self.base
        installation = await self.installation(team_id)
        token = installation.bot_token or ""
        client = self._clients.get(token)
        if client is None:
            client = MeteredWebClient(
                token=token,
                base_url=self.base.base_url,
                timeout=self.base.timeout,
                retry_handlers=self.base.retry_handlers,
                meter=self.base.meter,
                session=self.base.session,
            )
            self._clients[token] = client
            while len(self._clients) > MAX_CLIENTS:
                self._clients.popitem(last=False)
        self._clients.move_to_end(token)
        return client

    def forget(self, team_id: str) -> None:
        """The workspace was uninstalled: drop its learned org and any client of its token
        (what is left is refused by the store from now on)."""
        self._orgs.pop(team_id, None)
        self._found.pop(team_id, None)
        self._clients.clear()  # tokens are not keyed by team here: cheap to rebuild

    async def identity(self, team_id: str) -> SlackIdentity:
        """The bot as installed in `team_id` (app, org, bot user). Raises `NotInstalled`."""
        installation = await self.installation(team_id)
        return SlackIdentity(
            team_id=team_id,
            app_id=installation.app_id or "",
            enterprise_id=installation.enterprise_id or None,
            bot_user_id=installation.bot_user_id or "",
        )
