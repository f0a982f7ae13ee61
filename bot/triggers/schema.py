"""The trigger file format (docs/triggers.md) as pydantic models.

One YAML file per trigger, validated like a connector manifest: every model forbids unknown
fields (`connectors.manifest_rules.Strict`), so a typo is an error naming the file, the field
and its line and column (`bot.triggers.loading`). Templates are compiled when the file loads,
so a syntax error is told by `chatops triggers validate`, not by the first alert.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from bot.triggers.templates import TemplateProblem, check_template
from connectors.manifest import ENV_PATTERN, NAME_PATTERN
from connectors.manifest_rules import Strict

Source = Literal["alertmanager", "pagerduty", "hmac"]
TRIGGER_REQUESTER = "trigger"  # `requester:` value: the trigger itself asks (`trigger:<name>`)
DEFAULT_REPLAY_WINDOW_S = 300
GROUP_RE = re.compile(r"^group:(.+)$")


class Where(Strict):
    """The chat channel the trigger opens its threads in."""

    platform: Literal["slack", "feishu"]
    channel: str = Field(min_length=1, description="Slack channel id (C...) or Feishu chat id")
    workspace: str = Field(
        "",
        description="Slack: the team id (default: the bot's own workspace); Feishu: the "
        "tenant key (required)",
    )

    @model_validator(mode="after")
    def _feishu_needs_tenant(self) -> Where:
        if self.platform == "feishu" and not self.workspace:
            raise ValueError("a Feishu chat needs `workspace` (the tenant key)")
        return self


class Trigger(Strict):
    """One inbound webhook, `POST /hooks/<name>`."""

    name: str = Field(pattern=NAME_PATTERN, max_length=64, description="the route's last part")
    description: str = ""
    source: Source = Field(
        description="alertmanager (bearer token), pagerduty (X-PagerDuty-Signature) or hmac "
        "(X-Chatops-Timestamp + X-Chatops-Signature)"
    )
    secret_env: str = Field(
        pattern=ENV_PATTERN,
        description="the environment variable holding the token or signing secret",
    )
    replay_window_s: int = Field(
        DEFAULT_REPLAY_WINDOW_S, gt=0, le=86_400, description="hmac: largest clock difference"
    )
    where: Where
    request: str = Field(min_length=1, description="what the run is asked (a Jinja2 template)")
    summary: str = Field(
        "", description="the thread's opening message (a template; default: by source)"
    )
    connectors: list[str] = Field(
        default_factory=list,
        description="connector names (manifests) the run may use; empty: every one",
    )
    requester: str = Field(
        TRIGGER_REQUESTER,
        description="who counts as requester for four-eyes: `trigger`, or `group:<name>` "
        "(an approver group of CHATOPS_APPROVER_GROUPS: none of its members may approve)",
    )
    on_resolved: Literal["note", "stop"] = Field(
        "note", description="a resolved alert: a note in its thread (note), and stop its run (stop)"
    )

    @field_validator("request", "summary")
    @classmethod
    def _compiles(cls, text: str) -> str:
        try:
            check_template(text)
        except TemplateProblem as exc:
            raise ValueError(str(exc)) from None
        return text

    @field_validator("requester")
    @classmethod
    def _requester(cls, value: str) -> str:
        if value != TRIGGER_REQUESTER and not GROUP_RE.match(value):
            raise ValueError("must be `trigger` or `group:<name>`")
        return value

    @property
    def requester_id(self) -> str:
        """The user id the run is requested by: `trigger:<name>`, or the group's name (four-eyes
        then refuses each of its members: `bot.approvals.authority`)."""
        match = GROUP_RE.match(self.requester)
        return match.group(1) if match else f"trigger:{self.name}"
