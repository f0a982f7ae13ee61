"""`credentials__disconnect`: a person disconnects their own account from chat ("disconnect gh").

A built-in tool, there only when some connector acts as people. It acts on the run's requester
alone (from the verified `Audience`, never from the model's arguments), so nobody can disconnect
someone else: the token is revoked at the provider (when it declares `revoke_url`) and deleted,
and the next call acting as them asks them to connect again. It changes nothing but the asker's
own link, so it needs no approval.
"""

from __future__ import annotations

from typing import Any

from bot.approvals.schema import ApprovalPolicy, policy_metadata
from bot.engine.tools import Audience, Tool, ToolResult
from connectors.oauth_service import OAuthService
from connectors.oauth_vault import Person

DISCONNECT_TOOL_NAME = "credentials__disconnect"


def disconnect_tool(oauth: OAuthService) -> Tool:
    """The tool over the service's connectors (call it after the connectors loaded)."""
    connectors = oauth.connectors

    async def invoke_for(audience: Audience, args: dict[str, Any]) -> ToolResult:
        connector = args.get("connector")
        if connector not in connectors:
            return ToolResult.error(f"No connector {connector!r} acts as people here.")
        who = audience.requester or next(iter(audience.requesters), "")
        if not who:
            return ToolResult.error("Nobody to disconnect: the request has no user.")
        person = Person(audience.platform, audience.workspace, who)
        if await oauth.disconnect(connector, person.owner):
            return ToolResult(f"{who}'s {connector} account is disconnected (token revoked).")
        return ToolResult(f"{who} had no {connector} account connected.")

    async def invoke(args: dict[str, Any]) -> ToolResult:
        return ToolResult.error("Disconnecting needs a chat user (chatops serve).")

    return Tool(
        name=DISCONNECT_TOOL_NAME,
        description="Disconnect the requesting user's own account from a connector that acts "
        "as people (revokes and deletes their stored token); use when they ask to disconnect",
        parameters={
            "type": "object",
            "properties": {"connector": {"type": "string", "enum": connectors}},
            "required": ["connector"],
            "additionalProperties": False,
        },
        invoke=invoke,
        invoke_for=invoke_for,
        connector="credentials",
        action="disconnect",
        metadata=policy_metadata(ApprovalPolicy(approval="never", mutating=False, risk="low")),
    )
