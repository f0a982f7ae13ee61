"""The connector manifest format (DESIGN §3) as pydantic models, plus loading and validation.

A manifest is one YAML file per connector. Every model forbids unknown fields, so a typo is an
error, not a silently ignored setting. `ManifestError` names the file, the action and the field,
and `load_manifest_file` never lets a pydantic or YAML traceback reach the user.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    TypeAdapter,
    ValidationInfo,
    field_validator,
    model_validator,
)

from bot.errors import ConnectorError
from connectors.manifest_auth import (
    ENV_PATTERN,
    AnyOfAuth,
    Auth,
    EnvName,
    Fallback,
    NoAuth,
    OAuth2Auth,
    OnBehalfOf,
    QueryAuth,
    auth_env_names,
)
from connectors.manifest_rules import ApprovalFields, RuleSpec
from connectors.manifest_rules import Strict as _Strict
from connectors.param_styles import PATH_STYLES, Style
from connectors.sql.manifest import SqlConnector

CHECKED_SCHEMAS = "checked_schemas"  # validation context: schema texts already checked
TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
NAME_PATTERN = r"^[a-zA-Z0-9_-]+$"
READ_ONLY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
PATH_PARAM_RE = re.compile(r"\{([^{}]+)\}")
BASE_URL_PATTERN = r"^https?://[^/?#]+"
BASE_URL_RE = re.compile(BASE_URL_PATTERN)
DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024

Method = Literal["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"]
BodyEncoding = Literal["json", "form", "multipart"]
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})  # arguments go to the body
BODY_ARG_METHODS = BODY_METHODS | {"DELETE"}  # may carry a body held by one argument


class ManifestError(ConnectorError):
    """A manifest problem a user can fix; the message names file, action and field."""

    def __init__(self, message: str, *, path: Path | str | None = None) -> None:
        super().__init__(message)
        self.path = path


# --- HTTP connectors -----------------------------------------------------------------------------


class ResultSpec(_Strict):
    """How a response becomes an observation."""

    pick: list[str] = Field(
        default_factory=list, description="dotted paths kept from a JSON result (a.b.0.c)"
    )
    max_chars: int = Field(4000, ge=100, description="observation length cap, with a marker")
    artifact: bool = Field(
        False,
        description="the response is a document for the user (HTML or Markdown): attached to "
        "the answer (a file on Slack and Feishu, a link on the console) and kept out of the "
        "model's context, which gets its name and a short summary; text/html and "
        "text/markdown responses are documents without it",
    )


class ParamStyle(_Strict):
    """How one argument is serialised (OpenAPI 3 `style`, `explode`, `allowReserved`)."""

    style: Style = Field(
        description="path: simple, label, matrix; query or form body: form, spaceDelimited, "
        "pipeDelimited, deepObject"
    )
    explode: bool | None = Field(None, description="default: true for form, else false")
    allow_reserved: bool = Field(
        False, description="query and form values keep RFC 3986 reserved characters"
    )


MEDIA_TYPE_PATTERN = r"^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+$"


def _default_parameters() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


class HttpAction(ApprovalFields):
    """One HTTP request the model may make."""

    name: str = Field(pattern=NAME_PATTERN)
    description: str = Field(min_length=1)
    method: Method = "GET"
    path: str = Field(pattern=r"^/", description="appended to base_url; {name} fills from args")
    parameters: dict[str, Any] = Field(
        default_factory=_default_parameters,
        validate_default=True,  # the default must still cover the path's {placeholders}
        description="JSON Schema of the arguments",
    )
    query: dict[str, Any] = Field(default_factory=dict, description="static query parameters")
    query_args: list[str] = Field(
        default_factory=list,
        description="arguments sent in the query string even for POST/PUT/PATCH",
    )
    body: dict[str, Any] | None = Field(None, description="static JSON body (args merged over)")
    body_arg: str | None = Field(
        None,
        description="the argument that holds the whole request body (any JSON value); the "
        "other arguments go to the query string (POST, PUT, PATCH, DELETE)",
    )
    body_encoding: BodyEncoding = Field(
        "json", description="json, form (x-www-form-urlencoded) or multipart (form-data fields)"
    )
    content_type: str | None = Field(
        None,
        pattern=MEDIA_TYPE_PATTERN,
        description="the Content-Type of a json body, for JSON dialects such as "
        "application/merge-patch+json or application/json-patch+json (default "
        "application/json)",
    )
    styles: dict[str, ParamStyle] = Field(
        default_factory=dict,
        description="argument (or, for a form body held by body_arg, field) -> its OpenAPI "
        "serialisation; without one, lists repeat the name and objects are JSON",
    )
    wire_names: dict[str, str] = Field(
        default_factory=dict,
        description="argument -> the name sent in the query or body, for names a model API "
        "refuses (e.g. DateSent_lt: 'DateSent<')",
    )
    headers: dict[str, str] = Field(default_factory=dict, description="extra static headers")
    tags: list[Annotated[str, Field(min_length=1, max_length=60)]] = Field(
        default_factory=list,
        description="topics of the action (an imported operation's OpenAPI tags): with many "
        "tools, the selection catalogue lists a connector's actions under their first tag",
    )
    result: ResultSpec = Field(default_factory=ResultSpec)
    mutating: bool | None = Field(
        None,
        description="does the call change anything? approval: auto asks for mutating calls; "
        "default: every method but GET, HEAD and OPTIONS",
    )
    on_behalf_of: OnBehalfOf | None = Field(
        None,
        description="auth oauth2: whose credentials the call uses (requester, approver, bot); "
        "default: the auth block's",
    )
    fallback: Fallback | None = Field(
        None,
        description="auth oauth2: bot = the bot's token when that person has not connected; "
        "none = the call waits for them to connect; default: the auth block's",
    )

    @model_validator(mode="before")
    @classmethod
    def _upper_method(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("method"), str):
            data = {**data, "method": data["method"].upper()}
        return data

    @field_validator("parameters")
    @classmethod
    def _check_parameters(cls, parameters: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        """A field validator (not a model one), so the error names the field `parameters`."""
        _check_schema(parameters, (info.context or {}).get(CHECKED_SCHEMAS))
        props = parameters.get("properties") or {}
        required = set(parameters.get("required") or [])
        for name in PATH_PARAM_RE.findall(info.data.get("path") or ""):
            if name not in props:
                raise ValueError(f"path parameter {{{name}}} is not in parameters.properties")
            if name not in required:
                raise ValueError(f"path parameter {{{name}}} must be listed in parameters.required")
        return parameters

    @model_validator(mode="after")
    def _check_body_fields(self) -> HttpAction:
        props = self.parameters.get("properties") or {}
        if self.body_arg is not None:
            if self.method not in BODY_ARG_METHODS:
                raise ValueError(f"body_arg needs a method with a body, not {self.method}")
            if self.body_arg not in props:
                raise ValueError(f"body_arg {self.body_arg!r} is not in parameters.properties")
        unknown = sorted(set(self.wire_names) - set(props))
        if unknown:
            raise ValueError(f"wire_names names arguments not in parameters: {unknown}")
        if self.content_type is not None and self.body_encoding != "json":
            raise ValueError("content_type is for json bodies (body_encoding: json)")
        return self

    @model_validator(mode="after")
    def _check_styles(self) -> HttpAction:
        props = self.parameters.get("properties") or {}
        in_path = set(PATH_PARAM_RE.findall(self.path))
        form_body = self.body_arg is not None and self.body_encoding != "json"
        for name, spec in self.styles.items():
            if name not in props and not form_body:
                raise ValueError(f"styles names {name!r}, which is not in parameters.properties")
            if (name in in_path) != (spec.style in PATH_STYLES):
                where = "a path" if name in in_path else "a query or form"
                raise ValueError(f"styles.{name}: {spec.style} is not a style for {where} value")
        return self

    @model_validator(mode="after")
    def _vary_names_arguments(self) -> HttpAction:
        props = self.parameters.get("properties") or {}
        unknown = [name for name in self.grant_scope.vary if name not in props]
        if unknown:
            raise ValueError(
                f"grant_scope.vary names {', '.join(map(repr, unknown))}, which "
                f"{'is' if len(unknown) == 1 else 'are'} not in parameters.properties"
            )
        return self

    @property
    def is_mutating(self) -> bool:
        """The manifest's `mutating`, else what the method says."""
        if self.mutating is not None:
            return self.mutating
        return self.method not in READ_ONLY_METHODS


class HttpConnector(_Strict):
    """A REST API: each action is one request."""

    name: str = Field(pattern=NAME_PATTERN, description="tool names are <name>__<action>")
    description: str = ""
    type: Literal["http"] = "http"
    base_url: str = Field(pattern=BASE_URL_PATTERN, description="scheme://host[:port][/prefix]")
    base_url_env: EnvName | None = Field(
        None, description="when this variable is set, it replaces base_url"
    )
    auth: Auth = Field(default_factory=lambda: NoAuth(type="none"))
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = Field(30.0, gt=0, le=600)
    retries: int = Field(
        2, ge=0, le=10, description="extra attempts for GET/HEAD/OPTIONS/PUT/DELETE"
    )
    retry_backoff_s: float = Field(0.5, ge=0, le=60, description="first backoff, doubled per retry")
    max_response_bytes: int = Field(
        DEFAULT_MAX_RESPONSE_BYTES,
        ge=1024,
        le=256 * 1024 * 1024,
        description="most of a JSON response read (for result.pick); the rest is not read",
    )
    actions: list[HttpAction] = Field(min_length=1)
    rules: list[RuleSpec] = Field(
        default_factory=list,
        description="CEL rules for every action, checked before the action's own",
    )

    @model_validator(mode="after")
    def _acting_as_needs_oauth(self) -> HttpConnector:
        oauth = self.auth if isinstance(self.auth, OAuth2Auth) else None
        for action in self.actions:
            if oauth is None and (action.on_behalf_of or action.fallback):
                raise ValueError(
                    f"action {action.name!r}: on_behalf_of and fallback need auth type oauth2"
                )
            if oauth is None:
                continue
            if (action.fallback == "bot" or action.on_behalf_of == "bot") and not (
                oauth.bot_token_env
            ):
                raise ValueError(f"action {action.name!r}: acting as the bot needs bot_token_env")
            if (action.on_behalf_of or oauth.on_behalf_of) == "approver" and (
                action.approval == "never"
            ):
                raise ValueError(
                    f"action {action.name!r}: on_behalf_of: approver needs an approval"
                )
        return self

    def env_names(self) -> list[str]:
        return auth_env_names(self.auth)


# --- MCP connectors ------------------------------------------------------------------------------


class McpToolRule(ApprovalFields):
    """Approval rules for the server's tools whose name matches `match` (first match wins).

    A server's own annotations are hints from someone else: `destructiveHint: true` raises the
    bar (risk high, approval required) where the rule does not set them; `readOnlyHint: true`
    lowers it (not mutating, so `approval: auto` does not ask) only on a connector with
    `trust_annotations: true`. Whatever a rule sets explicitly always wins.
    """

    match: str = Field("*", min_length=1, description="glob over the server's tool names")


class McpConnector(_Strict):
    """An MCP server (stdio `command` or streamable HTTP `url`): its tools become actions."""

    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    type: Literal["mcp"]
    command: list[str] | None = Field(None, min_length=1, description="argv of a stdio server")
    url: str | None = Field(None, pattern=r"^https?://", description="streamable HTTP endpoint")
    env: dict[Annotated[str, Field(pattern=ENV_PATTERN)], EnvName] = Field(
        default_factory=dict,
        description="server variable -> our environment variable holding its (secret) value",
    )
    cwd: str | None = None
    auth: Auth = Field(default_factory=lambda: NoAuth(type="none"))
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = Field(60.0, gt=0, le=3600)
    tools: list[McpToolRule] = Field(default_factory=list)
    rules: list[RuleSpec] = Field(
        default_factory=list,
        description="CEL rules for every tool, checked before the tool rule's own",
    )
    result: ResultSpec = Field(default_factory=ResultSpec)
    trust_annotations: bool = Field(
        False,
        description="believe the server when it marks a tool read-only (readOnlyHint); "
        "otherwise every tool of it counts as changing things",
    )

    @model_validator(mode="after")
    def _one_transport(self) -> McpConnector:
        if (self.command is None) == (self.url is None):
            raise ValueError("set exactly one of command (stdio) or url (streamable HTTP)")
        if self.url is None and not isinstance(self.auth, NoAuth):
            raise ValueError("auth applies to url servers; pass stdio secrets with env")
        if isinstance(self.auth, OAuth2Auth):
            raise ValueError("auth type oauth2 (per-user credentials) is for http connectors")
        schemes = self.auth.schemes() if isinstance(self.auth, AnyOfAuth) else [self.auth]
        if any(isinstance(scheme, QueryAuth) for scheme in schemes):
            raise ValueError("auth type query is not supported for MCP servers (use a header)")
        return self

    def env_names(self) -> list[str]:
        return [*self.env.values(), *auth_env_names(self.auth)]

    def matching_rule(self, tool_name: str) -> tuple[McpToolRule, int | None]:
        """The first rule whose glob matches, and its index (None: no rule matches, defaults)."""
        import fnmatch

        for index, rule in enumerate(self.tools):
            if fnmatch.fnmatchcase(tool_name, rule.match):
                return rule, index
        return McpToolRule(), None


AnyConnector = HttpConnector | McpConnector | SqlConnector
Manifest = Annotated[AnyConnector, Field(discriminator="type")]
MANIFEST_ADAPTER: TypeAdapter[AnyConnector] = TypeAdapter(Manifest)


def manifest_json_schema() -> dict[str, Any]:
    """The JSON Schema of one manifest file (`chatops manifests schema`)."""
    schema = MANIFEST_ADAPTER.json_schema()
    schema["title"] = "chatops connector manifest"
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def _check_schema(schema: Mapping[str, Any], checked: set[str] | None = None) -> None:
    """Parameters must be a valid JSON Schema of an object.

    Each `$defs` entry is checked apart from the root (the meta-schema applies to each alike),
    so with a `checked` set (validation context `CHECKED_SCHEMAS`, one per manifest) a
    definition shared by many actions of a big imported manifest is checked once.
    """
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    if schema.get("type") != "object":
        raise ValueError("parameters must be a JSON Schema with type: object")
    defs = schema.get("$defs")
    pieces: list[Any] = [dict(schema)]
    if isinstance(defs, Mapping):
        pieces = [{k: v for k, v in schema.items() if k != "$defs"}, *defs.values()]
    for piece in pieces:
        key = json.dumps(piece, sort_keys=True, default=str) if checked is not None else ""
        if checked is not None and key in checked:
            continue
        try:
            Draft202012Validator.check_schema(piece)
        except SchemaError as exc:
            raise ValueError(f"parameters is not a valid JSON Schema: {exc.message}") from None
        if checked is not None:
            checked.add(key)
