"""Settings: the only module that reads the environment (and `.env`).

Every variable documented in the environment table of docs/configuration.md is a field here; a
test keeps the two in step.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal, get_type_hints

from pydantic import Field, SecretStr, ValidationError, create_model, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.engine.agent_limits import EngineLimits
from bot.errors import ConfigError
from bot.rate_limits import ToolRateLimits
from connectors.schema_fit import DEFAULT_MAX_CHARS as DEFAULT_SCHEMA_MAX_CHARS


def split_list(value: str) -> list[str]:
    """Split a comma list from the environment, dropping blanks."""
    return [item.strip() for item in value.split(",") if item.strip()]


def load_settings() -> Settings:
    """Settings from the environment and `.env`, with a one-line `ConfigError` instead of a
    traceback (a malformed variable, or a `.env` that is not UTF-8 text). Every command that
    needs settings calls this, so none of them imports the CLI for it."""
    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']).upper()}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"bad configuration: {problems}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read .env: not UTF-8 text (byte {exc.start})") from None


ENGINE_PREFIX = "react_"  # EngineLimits.max_iterations <- REACT_MAX_ITERATIONS


def _engine_limit_fields() -> dict[str, Any]:
    """One settings field per `EngineLimits` field, with its type and default: the engine's
    dataclass is the one declaration of its thresholds, the environment only overrides them."""
    hints = get_type_hints(EngineLimits)
    return {
        ENGINE_PREFIX + f.name: (hints[f.name], f.default) for f in dataclasses.fields(EngineLimits)
    }


# engine thresholds (DESIGN §2): the REACT_* variables, built from the dataclass
_EngineLimitSettings = create_model(  # type: ignore[call-overload]
    "_EngineLimitSettings", __base__=BaseSettings, **_engine_limit_fields()
)


class Settings(_EngineLimitSettings):  # type: ignore[misc,valid-type]
    """Configuration from environment variables (case-insensitive) and an optional `.env` file."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=False)

    # server and storage
    port: int = 8080
    database_url: str = "sqlite:///./chatops.db"

    # LLM (any OpenAI-compatible endpoint)
    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    chatops_model: str = "gpt-4o-mini"
    chatops_llm_abilities: str = "tool_call,json_mode"
    chatops_llm_timeout_s: float = 60.0
    chatops_llm_max_retries: int = 3
    chatops_compact_model: str = ""  # the model that compacts long runs; empty: CHATOPS_MODEL

    # connectors
    chatops_manifests_dir: Path = Path("./manifests")
    chatops_tool_schema_max_chars: int = Field(DEFAULT_SCHEMA_MAX_CHARS, ge=500)
    chatops_mcp_retry_max_s: float = Field(60.0, gt=0)

    # web console (loopback clients only, no proxy; public only with its token)
    chatops_console_public: bool = False
    chatops_console_token: SecretStr | None = None

    # tool-call guards (hooks/guards.py)
    chatops_read_only: bool = False
    chatops_tool_calls_per_minute: int = 60  # one tool, one conversation
    chatops_tool_calls_per_user_per_minute: int = 120  # one tool, one user, all their threads
    chatops_tool_calls_per_minute_total: int = 1200  # one tool, the whole process
    chatops_tool_result_max_chars: int = 8000
    # runs at once in this process; a request past it is told to try again, not started
    chatops_max_active_runs: int = Field(500, ge=1)
    # the status message: the platform's own plan of tasks, or the classic checklist
    chatops_status_style: Literal["plan", "classic"] = "plan"
    # several processes on PostgreSQL: how long a run's lease lasts without a heartbeat (a
    # process that stops renewing loses its runs to another after this), and the name this
    # process gives its host in leases (default: the hostname; a pod name in a cluster)
    chatops_lease_s: float = Field(15.0, ge=1.0)
    chatops_node_name: str = ""

    # Slack
    slack_bot_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_api_url: str = "https://slack.com/api/"

    # Feishu / Lark
    feishu_app_id: str | None = None
    feishu_app_secret: SecretStr | None = None
    feishu_verification_token: SecretStr | None = None
    feishu_encrypt_key: SecretStr | None = None
    feishu_domain: str = "https://open.feishu.cn"
    feishu_mode: str = "webhook"

    # approvals
    chatops_approval_timeout_s: float = 3600.0
    chatops_approval_escalate_after_s: float = 900.0
    chatops_approver_groups: dict[str, list[str]] = {}
    # the zone approval rules read `time.hour`, `time.weekday` and `time.date` in
    chatops_timezone: str = "UTC"

    # audit
    chatops_audit_viewers: str = ""
    chatops_audit_all_channels_viewers: str = ""
    chatops_audit_schedule: str = ""
    chatops_audit_channels: str = ""

    @field_validator("chatops_timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        """A zone name from the tz database (`Europe/Paris`), checked at start-up."""
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r} (e.g. UTC, Europe/Paris)") from None
        return value

    @field_validator("slack_api_url")
    @classmethod
    def _slack_api_url_ends_with_slash(cls, value: str) -> str:
        """slack_sdk joins method names onto the base URL: without the slash `/api` is lost."""
        return value if value.endswith("/") else value + "/"

    def secret_values(self) -> list[str]:
        """Every secret the settings hold (platform tokens, keys): masked wherever text the bot
        shows could contain them (approval cards)."""
        secrets = (getattr(self, name) for name in type(self).model_fields)
        return [s.get_secret_value() for s in secrets if isinstance(s, SecretStr)]

    @property
    def llm_abilities(self) -> dict[str, bool]:
        """Abilities the configured model advertises (`tool_call`, `json_mode`)."""
        named = set(split_list(self.chatops_llm_abilities))
        return {"tool_call": "tool_call" in named, "json_mode": "json_mode" in named}

    @property
    def llm_configured(self) -> bool:
        """True when an OpenAI-compatible endpoint can be reached (a key or a base URL is set)."""
        return self.openai_api_key is not None or bool(self.openai_base_url)

    @property
    def slack_enabled(self) -> bool:
        return self.slack_bot_token is not None and (
            self.slack_signing_secret is not None or self.slack_app_token is not None
        )

    @property
    def feishu_enabled(self) -> bool:
        return bool(self.feishu_app_id) and self.feishu_app_secret is not None

    @property
    def audit_viewers(self) -> list[str]:
        return split_list(self.chatops_audit_viewers)

    @property
    def audit_all_channels_viewers(self) -> list[str]:
        return split_list(self.chatops_audit_all_channels_viewers)

    @property
    def audit_channels(self) -> list[str]:
        return split_list(self.chatops_audit_channels)

    @property
    def tool_rate_limits(self) -> ToolRateLimits:
        return ToolRateLimits(
            per_conversation=self.chatops_tool_calls_per_minute,
            per_user=self.chatops_tool_calls_per_user_per_minute,
            total=self.chatops_tool_calls_per_minute_total,
        )

    @property
    def engine_limits(self) -> EngineLimits:
        """The engine's thresholds, overridable by `REACT_*` variables."""
        return EngineLimits(
            **{
                f.name: getattr(self, ENGINE_PREFIX + f.name)
                for f in dataclasses.fields(EngineLimits)
            }
        )
