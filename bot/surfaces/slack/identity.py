"""Which Slack installation the bot is, and whether a verified request is for it.

A valid signature proves Slack sent a request for this app's signing secret, not that it is for
the workspace (and Enterprise Grid organisation) the bot serves. The installation is learned
once from `auth.test` (team id, enterprise id, app id; `bots.info` gives the app id when
`auth.test` does not), and every event, click and command is checked against it before anything
is stored. A click by a user whose own team is another one (Slack Connect: a member of another
organisation in a shared channel) is marked external: such a user decides an approval only if
its manifest names them (`ApprovalBroker`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient


@dataclass(frozen=True)
class SlackIdentity:
    team_id: str
    app_id: str
    enterprise_id: str | None = None
    bot_user_id: str = ""

    def is_home(self, team_id: object) -> bool:
        """True when a user's team is this workspace (or its Enterprise Grid organisation)."""
        return isinstance(team_id, str) and team_id in (self.team_id, self.enterprise_id)


class SlackInstallation:
    """The bot's `SlackIdentity`, asked of Slack once (concurrent callers share the answer);
    with OAuth installs, the identity of the installation serving the request's team."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        installed: Callable[[str], Awaitable[SlackIdentity]] | None = None,
    ) -> None:
        """`installed`: OAuth mode's lookup of a team's installation (raises `NotInstalled`)."""
        self._client = client
        self._installed = installed
        self._identity: SlackIdentity | None = None
        self._lock = asyncio.Lock()

    @property
    def several(self) -> bool:
        """True with OAuth installs: each request is judged by its own team's installation."""
        return self._installed is not None

    async def identity(self, team: str = "") -> SlackIdentity:
        """Raises what the Web API raises: without an identity nothing is accepted (OAuth
        mode: `NotInstalled` for a team without an installation)."""
        if self._installed is not None:
            return await self._installed(team)
        async with self._lock:
            if self._identity is None:
                auth = await self._client.auth_test()
                app_id = auth.get("app_id")
                if not app_id:
                    bot = await self._client.bots_info(bot=auth["bot_id"])
                    app_id = (bot.get("bot") or {}).get("app_id")
                self._identity = SlackIdentity(
                    team_id=str(auth["team_id"]),
                    app_id=str(app_id or ""),
                    enterprise_id=auth.get("enterprise_id") or None,
                    bot_user_id=str(auth.get("user_id") or ""),
                )
            return self._identity


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def request_team(body: Mapping[str, Any]) -> str:
    """The workspace a verified request comes from: `team_id` (events, slash commands), or
    the `team` object of an interaction ('' when it carries none)."""
    team: object = body.get("team_id")
    if body.get("type") in ("block_actions", "view_submission"):
        team_object = body.get("team")
        team = team_object.get("id") if isinstance(team_object, dict) else None
    return team if isinstance(team, str) else ""


def request_enterprise(body: Mapping[str, Any]) -> str | None:
    """The Enterprise Grid org a verified request comes from (None outside a grid)."""
    org: object = body.get("enterprise_id")
    if body.get("type") in ("block_actions", "view_submission"):
        org_object = body.get("enterprise")
        org = org_object.get("id") if isinstance(org_object, dict) else None
    return org if isinstance(org, str) and org else None


def request_problem(
    body: Mapping[str, Any], me: SlackIdentity, *, org_installs: bool = False
) -> str | None:
    """Why a verified request (event, interaction or slash command) is not for this
    installation, or None when it is. Clicks are checked against their card separately.
    `org_installs`: an Enterprise Grid org-wide install is one of ours (OAuth mode)."""
    if not me.app_id or _text(body.get("api_app_id")) != me.app_id:
        return f"api_app_id {body.get('api_app_id')!r} is not this app's"
    enterprise = body.get("enterprise_id")
    team: object = body.get("team_id")
    if body.get("type") in ("block_actions", "view_submission"):
        team_object = body.get("team")
        enterprise_object = body.get("enterprise")
        team = team_object.get("id") if isinstance(team_object, dict) else None
        enterprise = enterprise_object.get("id") if isinstance(enterprise_object, dict) else None
        if body.get("is_enterprise_install") and not org_installs:  # not this bot's kind
            return "an organisation-wide installation"
        user = body.get("user")
        if not isinstance(user, dict) or _text(user.get("id")) is None or _text(team) is None:
            return "no user or team"
        # a Slack Connect member clicks from their own team: allowed this far, the card check
        # and the approvers decide (`is_external`)
    elif team != me.team_id:
        return f"team_id {team!r} is not this workspace"
    if (enterprise or None) != me.enterprise_id:
        return f"enterprise {enterprise!r} is not this organisation"
    return None


def is_external(body: Mapping[str, Any], me: SlackIdentity) -> bool:
    """The clicking user belongs to another team than this workspace (Slack Connect)."""
    user = body.get("user")
    return not (isinstance(user, dict) and me.is_home(user.get("team_id")))
