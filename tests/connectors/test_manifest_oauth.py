"""The `auth: {type: oauth2}` block and the per-action `on_behalf_of` / `fallback` fields: what
a manifest may say, and the readable error when it may not."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.acting_as import ActingAs, acting_as, acting_person
from connectors.loading import parse_manifest
from connectors.manifest import ManifestError

OAUTH: dict[str, Any] = {
    "type": "oauth2",
    "authorize_url": "https://github.com/login/oauth/authorize",
    "token_url": "https://github.com/login/oauth/access_token",
    "scopes": ["repo"],
    "client_id_env": "GH_ID",
    "client_secret_env": "GH_SECRET",
    "pkce": True,
}


def manifest(auth: dict[str, Any], **action: Any) -> dict[str, Any]:
    return {
        "name": "gh",
        "base_url": "https://api.github.com",
        "auth": auth,
        "actions": [{"name": "run", "description": "d", "method": "POST", "path": "/x", **action}],
    }


def test_defaults_come_from_the_auth_block_and_actions_override_them() -> None:
    loaded = parse_manifest(manifest({**OAUTH, "bot_token_env": "GH_BOT"}, fallback="bot"))
    assert acting_as(loaded, loaded.actions[0]) == ActingAs("gh", "requester", "bot")
    assert loaded.env_names() == ["GH_ID", "GH_SECRET", "GH_BOT"]


@pytest.mark.parametrize(
    ("auth", "action", "error"),
    [
        ({"type": "none"}, {"on_behalf_of": "approver"}, "need auth type oauth2"),
        (OAUTH, {"fallback": "bot"}, "needs bot_token_env"),
        ({**OAUTH, "on_behalf_of": "bot"}, {}, "need bot_token_env"),
        (OAUTH, {"on_behalf_of": "approver", "approval": "never"}, "needs an approval"),
        ({**OAUTH, "pkce": False}, {}, "pkce"),
        ({**OAUTH, "token_url": "ftp://x"}, {}, "token_url"),
    ],
)
def test_refused(auth: dict[str, Any], action: dict[str, Any], error: str) -> None:
    with pytest.raises(ManifestError, match=error):
        parse_manifest(manifest(auth, **action))


def test_mcp_servers_cannot_act_as_people() -> None:
    with pytest.raises(ManifestError, match="for http connectors"):
        parse_manifest({"name": "m", "type": "mcp", "url": "https://m.example/mcp", "auth": OAUTH})


def test_the_person_is_the_requester_or_the_last_approver() -> None:
    rule = ActingAs("gh", "approver", "none")
    who = acting_person(rule, platform="slack", workspace="T1", requester="U1", approvers=[])
    assert who is None  # nobody approved: nobody to act as
    who = acting_person(
        rule, platform="slack", workspace="T1", requester="U1", approvers=["U2", "U3"]
    )
    assert who is not None and who.owner == "slack:T1:U3"
    requester = ActingAs("gh", "requester", "none")
    who = acting_person(requester, platform="slack", workspace="T1", requester="U1", approvers=[])
    assert who is not None and who.owner == "slack:T1:U1"
