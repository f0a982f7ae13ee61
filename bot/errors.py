"""One exception tree for the whole bot: every error raised on purpose is a `ChatopsError`.

The root and the engine's branch live in `bot/engine/errors.py` (the engine imports nothing
above it); each feature's own errors stay next to the code that raises them and derive from a
branch here, so `except ChatopsError` catches every deliberate failure and lower layers never
import the CLI or the runtime for an error class. The tree:

    ChatopsError
      EngineError                 bot.engine.errors
        LLMError                  bot.engine.llm
        StructuredOutputError     bot.engine.structured
        RunBudgetExceeded         bot.engine.budget
      UserError                   here: a problem the user fixes, printed without a traceback
        ConfigError               here: a setting is missing or malformed
        SchemaTooNew              bot.storage.migrate: a newer version migrated the database
      StartupError                here: `chatops serve` cannot start (shown without a traceback)
      ConnectorError
        ManifestError             connectors.manifest
        MissingSecretError        connectors.auth
        RequestRefused            connectors.http_request
        McpUnavailable            connectors.mcp
        RefError                  connectors.openapi_doc
        SchemaTooLarge            connectors.schema_fit
        SkipOperation             connectors.openapi_ops
      ApprovalError
        RuleError (ValueError)    bot.approvals.rules
      AuditError
        AuditCommandError (ValueError)  bot.audit.command
      SurfaceError
        CredentialsRefused        bot.chat.signin
        PlatformUnreachable       bot.chat.signin
        FeishuAPIError            bot.surfaces.feishu.send
        MalformedPush (ValueError)  bot.surfaces.feishu.verify
        BadFilter (ValueError)    bot.surfaces.console.browse
        SignInError               bot.surfaces.console.oidc
      TerminalLogError            bot.terminal.log

`RuleError` and `AuditCommandError` keep `ValueError` as a second base: callers catch them so.
"""

from __future__ import annotations

from bot.engine.errors import ChatopsError, EngineError

__all__ = [
    "ApprovalError",
    "AuditError",
    "ChatopsError",
    "ConfigError",
    "ConnectorError",
    "EngineError",
    "StartupError",
    "SurfaceError",
    "UserError",
]


class UserError(ChatopsError):
    """A problem the user can fix (bad input, missing settings): printed without a traceback."""


class ConfigError(UserError):
    """The environment or `.env` holds a malformed setting; the message names the variable."""


class StartupError(ChatopsError):
    """The bot cannot start for a reason the operator can fix (shown without a traceback)."""


class ConnectorError(ChatopsError):
    """A connector manifest, its secrets, or a call it would make is not usable."""


class ApprovalError(ChatopsError):
    """An approval rule or policy cannot be applied."""


class AuditError(ChatopsError):
    """An audit report cannot be made as asked."""


class AuditSinkError(AuditError):
    """An audit sink did not take a batch of events (down, refusing, unwritable): retried."""


class SurfaceError(ChatopsError):
    """A chat platform refused or failed a call."""


class NotInstalled(SurfaceError):
    """A Slack workspace the app has no installation for (never installed, or uninstalled):
    nothing can be posted there, and nothing it sends is accepted."""


class TriggerError(ChatopsError):
    """A trigger file, its template, or an inbound webhook delivery is not usable."""
