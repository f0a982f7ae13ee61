"""Settings: the only module that reads the environment (and `.env`).

Every variable documented in the environment table of docs/configuration.md is a field here; a
test keeps the two in step.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any, Literal, get_type_hints
from urllib.parse import unquote, urlsplit

from dotenv import dotenv_values
from pydantic import Field, SecretStr, ValidationError, create_model, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from bot.engine.agent_limits import EngineLimits
from bot.errors import ConfigError
from bot.observability.trace_config import DEFAULT_SERVICE_NAME, TraceConfig, parse_key_values
from bot.rate_limits import ToolRateLimits

# the most characters (compact JSON) one tool's argument schema may take in a model request;
# connectors.schema_fit shapes a bigger one down (CHATOPS_TOOL_SCHEMA_MAX_CHARS)
DEFAULT_SCHEMA_MAX_CHARS = 16_000
OTLP_HTTP_DEFAULT = "http://localhost:4318"  # a collector on this host (OTLP/HTTP's default)


def split_list(value: str) -> list[str]:
    """Split a comma list from the environment, dropping blanks."""
    return [item.strip() for item in value.split(",") if item.strip()]


def load_settings() -> Settings:
    """Settings from the environment and `.env`, with a one-line `ConfigError` instead of a
    traceback (a malformed variable, or a `.env` that is not UTF-8 text). Every command that
    needs settings calls this, so none of them imports the CLI for it."""
    try:
        return Settings()
    except SettingsError as exc:  # a complex field (a dict, a list) whose JSON does not parse
        field = re.search(r'field "(\w+)"', str(exc))
        name = field.group(1).upper() if field else "a setting"
        raise ConfigError(f"bad configuration: {name}: not valid JSON") from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']).upper()}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"bad configuration: {problems}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read .env: not UTF-8 text (byte {exc.start})") from None


def connector_environ(env_file: str | Path = ".env") -> dict[str, str]:
    """What connector manifests' `*_env` names are looked up in: the environment over `.env`
    (the same file the settings come from, so a connector's secret may live beside them)."""
    try:
        from_file = dotenv_values(env_file) if Path(env_file).is_file() else {}
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read .env: not UTF-8 text (byte {exc.start})") from None
    values = {name: value for name, value in from_file.items() if value is not None}
    return values | dict(os.environ)


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


# the bot scopes of slack_app_manifest.yaml: what an OAuth install asks for by default
SLACK_DEFAULT_SCOPES = (
    "app_mentions:read,assistant:write,channels:history,groups:history,im:history,im:write,"
    "chat:write,chat:write.public,commands,files:write,users:read"
)


class Settings(_EngineLimitSettings):  # type: ignore[misc,valid-type]
    """Configuration from environment variables (case-insensitive) and an optional `.env` file."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=False)

    # the log: level (DEBUG shows the libraries' per-request lines too) and text or JSON lines
    chatops_log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    chatops_log_format: Literal["text", "json"] = "text"

    # traces (OpenTelemetry's own variables; off unless an exporter or endpoint is set)
    otel_sdk_disabled: bool = False
    otel_traces_exporter: Literal["", "otlp", "none"] = ""
    otel_exporter_otlp_endpoint: str = ""
    otel_exporter_otlp_traces_endpoint: str = ""
    otel_exporter_otlp_headers: SecretStr | None = None
    otel_service_name: str = DEFAULT_SERVICE_NAME
    otel_resource_attributes: str = ""

    # server and storage
    port: int = Field(8080, ge=1, le=65535)
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
    # a connector's circuit breaker: this many failed calls in a row (timeouts, connection
    # errors, 5xx) and its calls fail fast for the cool-down (0: never)
    chatops_breaker_threshold: int = Field(5, ge=0)
    chatops_breaker_cooldown_s: float = Field(60.0, gt=0)

    # per-user connector credentials (auth type oauth2, docs/connectors.md): the Fernet key
    # the tokens are encrypted with at rest (`chatops credentials key` makes one), the bot's
    # public address (connect links and the OAuth redirect URI: <url>/oauth/<connector>/callback;
    # default: CHATOPS_CONSOLE_URL, else http://localhost:PORT), how long a connect link works,
    # and how long a run waits for a person to connect
    chatops_credentials_key: SecretStr | None = None
    chatops_public_url: str = ""
    chatops_oauth_link_ttl_s: float = Field(600.0, gt=0)
    chatops_oauth_wait_s: float = Field(300.0, gt=0)

    # triggers: inbound webhooks that open conversations (docs/triggers.md)
    chatops_triggers_dir: Path = Path("./triggers")

    # web console (loopback clients only, no proxy; public only with its token)
    chatops_console_public: bool = False
    chatops_console_token: SecretStr | None = None
    # who a public console's user is (the "you are" box is for a local console only): signed
    # in with OpenID Connect, or named by an auth proxy's header (trusted from its addresses)
    chatops_console_url: str = ""  # the console's public address, e.g. https://chatops.example.com
    chatops_console_oidc_issuer: str = ""
    chatops_console_oidc_client_id: str = ""
    chatops_console_oidc_client_secret: SecretStr | None = None
    chatops_console_user_claim: str = "email"  # the ID token claim that names the user
    chatops_console_session_secret: SecretStr | None = None  # signs the sign-in cookies
    chatops_console_session_hours: float = Field(12.0, gt=0)
    chatops_console_proxy_user_header: str = ""  # e.g. X-Forwarded-User
    chatops_console_trusted_proxies: str = ""  # comma list of addresses and networks (CIDR)

    # GET /metrics (loopback clients only, no proxy; any client presenting the token when set)
    chatops_metrics_token: SecretStr | None = None
    # the workspaces named in the per-workspace series (the first N seen; the rest `other`;
    # 0: those series carry no workspace, every one counted as `all`)
    chatops_metrics_workspaces: int = Field(50, ge=0)

    # tool-call guards (hooks/guards.py)
    chatops_read_only: bool = False
    chatops_tool_calls_per_minute: int = 60  # one tool, one conversation
    chatops_tool_calls_per_user_per_minute: int = 120  # one tool, one user, all their threads
    chatops_tool_calls_per_minute_total: int = 1200  # one tool, the whole process
    chatops_tool_result_max_chars: int = 8000
    # connections the connectors' HTTP APIs may hold open at once (this process); the chat
    # platforms have a pool of their own, so connector APIs that stall never hold up a status
    # message, an approval card or an answer
    chatops_connector_max_connections: int = Field(100, ge=1)
    # runs at once in this process; a request past it is told to try again, not started
    chatops_max_active_runs: int = Field(500, ge=1)
    # of those, runs working at once; the rest queue in order, their status message saying
    # so ("Queued: N ahead of you"); a run waiting for an approval gives its seat up
    chatops_max_working_runs: int = Field(64, ge=1)
    # one person's share (counted in the database, across processes): unfinished runs they
    # started (a mention past it is refused in its thread), and approvals pending for their
    # runs (a call past it is refused to the model and said in the thread)
    chatops_max_active_runs_per_user: int = Field(10, ge=1)
    chatops_max_pending_approvals_per_user: int = Field(10, ge=1)
    # the status message: the platform's own plan of tasks, or the classic checklist
    chatops_status_style: Literal["plan", "classic"] = "plan"
    # pacing under the platforms' rate limits: least seconds between two edits of a run's
    # status message, and between two updates of an answer streamed into the thread
    chatops_status_edit_interval_s: float = Field(1.0, ge=0.0)
    chatops_answer_stream_interval_s: float = Field(1.0, ge=0.0)
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
    # OAuth installs (several workspaces, Enterprise Grid orgs): on when the client id and
    # secret are set; the bot token then comes from each workspace's installation
    slack_client_id: str | None = None
    slack_client_secret: SecretStr | None = None
    slack_scopes: str = SLACK_DEFAULT_SCOPES
    slack_redirect_uri: str | None = None
    # tokens with rotation on (refresh tokens) are refreshed this many minutes before expiry
    slack_token_rotation_minutes: int = Field(120, ge=1, le=720)

    # Feishu / Lark
    feishu_app_id: str | None = None
    feishu_app_secret: SecretStr | None = None
    feishu_verification_token: SecretStr | None = None
    feishu_encrypt_key: SecretStr | None = None
    feishu_domain: str = "https://open.feishu.cn"
    feishu_mode: str = "webhook"
    # per-workspace settings: connectors, per-person limits, approvers, approver groups and
    # audit viewers (bot/workspaces.py)
    chatops_workspaces_file: Path | None = None
    # more Feishu/Lark apps, each with its own credentials (bot/surfaces/feishu/apps.py)
    chatops_feishu_apps_file: Path | None = None

    # approvals
    chatops_approval_timeout_s: float = 3600.0
    # how long a tool's question (an MCP server's elicitation form) waits for an answer before
    # it is cancelled; the tool's call waits as long (`bot.elicitation`)
    chatops_elicitation_timeout_s: float = Field(300.0, gt=0)
    chatops_approval_escalate_after_s: float = 900.0
    # the share of an approval's timeout after which each approver who has not answered gets
    # one reminder by direct message (Slack, Feishu), with the card's actions; 0 = never
    chatops_approval_remind_at: float = Field(0.75, ge=0.0, lt=1.0)
    chatops_approver_groups: dict[str, list[str]] = {}
    # the zone approval rules read `time.hour`, `time.weekday` and `time.date` in
    chatops_timezone: str = "UTC"

    # audit
    chatops_audit_viewers: str = ""
    chatops_audit_all_channels_viewers: str = ""
    chatops_audit_schedule: str = ""
    chatops_audit_channels: str = ""
    # audit sinks: every call-log and approval event, as it happens (bot.audit.sinks)
    chatops_audit_sink_url: str = ""
    chatops_audit_sink_secret: SecretStr | None = None
    chatops_audit_sink_file: str = ""
    chatops_audit_sink_batch: int = Field(100, ge=1, le=10_000)
    chatops_audit_sink_interval_s: float = Field(1.0, gt=0)
    chatops_audit_sink_retry_max_s: float = Field(60.0, gt=0)
    chatops_audit_sink_timeout_s: float = Field(10.0, gt=0)

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

    @field_validator(
        "chatops_console_token", "chatops_metrics_token", "chatops_console_oidc_client_secret",
        "chatops_console_session_secret", mode="before",
    )  # fmt: skip
    @classmethod
    def _blank_token_is_unset(cls, value: object) -> object:
        """`CHATOPS_CONSOLE_TOKEN=` or `CHATOPS_METRICS_TOKEN=` (blank) must not open the
        console or the scrape to an empty bearer: a blank token is no token."""
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("slack_api_url")
    @classmethod
    def _slack_api_url_ends_with_slash(cls, value: str) -> str:
        """slack_sdk joins method names onto the base URL: without the slash `/api` is lost."""
        return value if value.endswith("/") else value + "/"

    @field_validator("otel_traces_exporter", mode="before")
    @classmethod
    def _exporter_in_any_case(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("chatops_log_level", mode="before")
    @classmethod
    def _log_level_in_any_case(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("database_url")
    @classmethod
    def _postgres_urls_use_psycopg(cls, value: str) -> str:
        """`postgres://` and `postgresql://` (what hosting platforms hand out) name PostgreSQL
        through the one driver the bot installs, psycopg 3."""
        scheme, sep, rest = value.partition("://")
        if sep and scheme.lower() in ("postgres", "postgresql"):
            return f"postgresql+psycopg://{rest}"
        return value

    def secret_values(self) -> list[str]:
        """Every secret the settings hold (platform tokens and signing secrets, keys, the
        database password): masked wherever text the bot shows could contain them."""
        secrets = (getattr(self, name) for name in type(self).model_fields)
        found = [s.get_secret_value() for s in secrets if isinstance(s, SecretStr)]
        try:
            password = urlsplit(self.database_url).password
        except ValueError:  # an unparsable URL: the database refuses it at start-up
            password = None
        return [*found, unquote(password)] if password else found

    @property
    def trace_config(self) -> TraceConfig:
        """Traces on when `OTEL_TRACES_EXPORTER=otlp` or an OTLP endpoint is set (unless
        `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`); spans go to the traces
        endpoint, else `<OTEL_EXPORTER_OTLP_ENDPOINT>/v1/traces`, else the local collector."""
        exporter = self.otel_traces_exporter
        endpoint = self.otel_exporter_otlp_endpoint.strip()
        traces_endpoint = self.otel_exporter_otlp_traces_endpoint.strip()
        wanted = exporter == "otlp" or (exporter == "" and bool(endpoint or traces_endpoint))
        if not traces_endpoint:
            traces_endpoint = f"{(endpoint or OTLP_HTTP_DEFAULT).rstrip('/')}/v1/traces"
        headers = self.otel_exporter_otlp_headers
        resource = parse_key_values(self.otel_resource_attributes)
        named = "otel_service_name" in self.model_fields_set or "service.name" not in resource
        return TraceConfig(
            enabled=wanted and not self.otel_sdk_disabled,
            endpoint=traces_endpoint,
            headers=parse_key_values(headers.get_secret_value()) if headers else {},
            service_name=self.otel_service_name if named else resource["service.name"],
            resource_attributes=resource,
        )

    @property
    def public_url(self) -> str:
        """Where people's browsers reach this bot (connect links, OAuth callbacks)."""
        url = self.chatops_public_url or self.chatops_console_url or f"http://localhost:{self.port}"
        return url.rstrip("/")

    @property
    def llm_abilities(self) -> dict[str, bool]:
        """Abilities the configured model advertises (`tool_call`, `json_mode`, `vision`: it
        reads image parts, so an image a tool returns is shown to it)."""
        named = set(split_list(self.chatops_llm_abilities))
        return {name: name in named for name in ("tool_call", "json_mode", "vision")}

    @property
    def llm_configured(self) -> bool:
        """True when an OpenAI-compatible endpoint can be reached (a key or a base URL is set)."""
        return self.openai_api_key is not None or bool(self.openai_base_url)

    @property
    def slack_oauth(self) -> bool:
        """OAuth installs: a token per workspace from the installation store (not one token)."""
        return bool(self.slack_client_id) or self.slack_client_secret is not None

    def serves_several_workspaces(self, platform: str) -> bool:
        """Whether one deployment serves several workspaces of `platform` (Slack OAuth
        installs, or a Feishu apps file): then each workspace's audit reports are its own."""
        if platform == "slack":
            return self.slack_oauth
        return platform == "feishu" and self.chatops_feishu_apps_file is not None

    @property
    def slack_enabled(self) -> bool:
        inbound = self.slack_signing_secret is not None or self.slack_app_token is not None
        return (self.slack_bot_token is not None or self.slack_oauth) and inbound

    def slack_mode_problem(self) -> str | None:
        """Why the Slack settings cannot start (half an OAuth configuration), or None."""
        if not self.slack_oauth:
            return None
        missing = [
            name
            for name, value in (
                ("SLACK_CLIENT_ID", self.slack_client_id),
                ("SLACK_CLIENT_SECRET", self.slack_client_secret),
                ("SLACK_SIGNING_SECRET", self.slack_signing_secret),
                ("SLACK_SCOPES", self.slack_scopes.strip()),
            )
            if not value
        ]
        if missing:
            return f"Slack OAuth installs need {', '.join(missing)} too (or unset SLACK_CLIENT_*)"
        if self.slack_bot_token is not None:
            return "set either SLACK_BOT_TOKEN (one workspace) or SLACK_CLIENT_ID/SECRET, not both"
        if self.slack_app_token is not None:
            return "Slack OAuth installs are served over HTTP: unset SLACK_APP_TOKEN"
        if self.chatops_credentials_key is None:
            return (
                "Slack OAuth installs keep their tokens encrypted: set CHATOPS_CREDENTIALS_KEY "
                "(make one with `chatops credentials key`)"
            )
        return None

    @property
    def feishu_enabled(self) -> bool:
        """Any Feishu app is configured: the FEISHU_* one, or an apps file."""
        return self.feishu_default_app or self.chatops_feishu_apps_file is not None

    @property
    def feishu_default_app(self) -> bool:
        """The FEISHU_* app is configured (FEISHU_APP_ID and FEISHU_APP_SECRET)."""
        return bool(self.feishu_app_id) and self.feishu_app_secret is not None

    @property
    def audit_viewers(self) -> list[str]:
        return split_list(self.chatops_audit_viewers)

    @property
    def audit_all_channels_viewers(self) -> list[str]:
        return split_list(self.chatops_audit_all_channels_viewers)

    @property
    def console_trusted_proxies(self) -> list[str]:
        return split_list(self.chatops_console_trusted_proxies)

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
