"""Which of Slack's agent features each workspace has: learned from Slack's own answers.

Answer streams, plan blocks and agent sessions are newer than the rest of the Web API: an app
without the scope, a workspace without the feature, an older grid answers with an error. The
first such answer turns the feature off for that workspace, with one log line; from then on
the surface does what works everywhere (one post, the classic checklist, no session).
"""

from __future__ import annotations

import logging
from typing import Literal

from slack_sdk.errors import SlackApiError

log = logging.getLogger(__name__)

Feature = Literal["stream", "plan", "session"]
# Slack's answers meaning "not for this app or workspace" (not "this one request was wrong")
UNAVAILABLE = frozenset(
    {
        "not_allowed",
        "missing_scope",
        "not_allowed_token_type",
        "feature_disabled",  # agents.sessions.setStatus: agent features off in the workspace
        "unknown_method",
        "method_deprecated",
        "no_permission",
    }
)
# a plan block Slack does not render here comes back as a block error
PLAN_REFUSED = frozenset({"invalid_blocks", "invalid_blocks_format"})


def slack_error(exc: SlackApiError) -> str:
    return str(exc.response.get("error") or "")


class WorkspaceFeatures:
    """Features turned off per workspace (owned by the surface; bounded by its workspaces)."""

    def __init__(self, *, plan: bool = True) -> None:
        """`plan`: status messages as a plan at all (`CHATOPS_STATUS_STYLE=plan`)."""
        self._plan = plan
        self._off: dict[str, set[Feature]] = {}

    def has(self, workspace: str, feature: Feature) -> bool:
        if feature == "plan" and not self._plan:
            return False
        return feature not in self._off.get(workspace, ())

    def turn_off(self, workspace: str, feature: Feature, error: str) -> None:
        """Slack refused the feature: off for the workspace from now on (logged once)."""
        off = self._off.setdefault(workspace, set())
        if feature in off:
            return
        off.add(feature)
        log.warning(
            "slack: %s is not available in workspace %s (%s); using the fallback from now on",
            _NAMES[feature], workspace or "?", error,
        )  # fmt: skip

    def refused(self, workspace: str, feature: Feature, exc: SlackApiError) -> bool:
        """True (and the feature off) when `exc` says the feature is unavailable here."""
        error = slack_error(exc)
        gone = error in UNAVAILABLE or (feature == "plan" and error in PLAN_REFUSED)
        if gone:
            self.turn_off(workspace, feature, error)
        return gone


_NAMES: dict[Feature, str] = {
    "stream": "answer streaming (chat.startStream)",
    "plan": "plan blocks in status messages",
    "session": "agent session status (agents.sessions.setStatus)",
}
