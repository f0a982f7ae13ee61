"""The `auth` block of a manifest: one scheme, or alternatives that each need several.

An API's security requirement (OpenAPI `security`) is a list of alternatives, each an AND of
schemes: Datadog wants `DD-API-KEY` and `DD-APPLICATION-KEY` together, or an OAuth token;
Cloudflare an e-mail and a key together, or a token. `type: any_of` says exactly that, every
credential of it a secret (redacted everywhere), and `connectors.auth` sends the first
alternative whose variables are all set.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from connectors.manifest_rules import Strict as _Strict

ENV_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
EnvName = Annotated[str, Field(pattern=ENV_PATTERN, description="an environment variable name")]
ALTERNATIVE_NAME_PATTERN = r"^[A-Za-z0-9_.+ -]{1,120}$"


class NoAuth(_Strict):
    """No credentials."""

    type: Literal["none"]


class BearerAuth(_Strict):
    """`Authorization: Bearer <token>`."""

    type: Literal["bearer"]
    token_env: EnvName


class HeaderAuth(_Strict):
    """A custom header, e.g. `X-Api-Key: <value>` or `Authorization: Token token=<value>`."""

    type: Literal["header"]
    header: str = Field(min_length=1)
    value_env: EnvName
    prefix: str = Field("", description="text put before the secret, e.g. 'Token token='")


class BasicAuth(_Strict):
    """HTTP basic auth; the user name may be literal or from the environment."""

    type: Literal["basic"]
    username: str | None = None
    username_env: EnvName | None = None
    password_env: EnvName | None = Field(
        None,
        description="the password's variable; without it (or, with password_optional, when "
        "it is unset) the request carries `user:` and the user name is the secret (Stripe)",
    )
    password_optional: bool = Field(
        False, description="the password variable may be unset: then no password is sent"
    )

    @model_validator(mode="after")
    def _one_username(self) -> BasicAuth:
        if (self.username is None) == (self.username_env is None):
            raise ValueError("set exactly one of username or username_env")
        if self.password_env is None and self.username_env is None:
            raise ValueError("a literal username needs password_env (else nothing is secret)")
        return self


class QueryAuth(_Strict):
    """A query-string parameter, e.g. `?api_key=<value>`."""

    type: Literal["query"]
    param: str = Field(min_length=1)
    value_env: EnvName


OnBehalfOf = Literal["requester", "approver", "bot"]
Fallback = Literal["bot", "none"]


class OAuth2Auth(_Strict):
    """Per-user credentials: each person links their own account (authorization code with
    PKCE), and a call acts as the person `on_behalf_of` names, so the target system's own audit
    shows who asked (or who approved). `bot_token_env`: the bot's own token, for actions that
    act as the bot and for `fallback: bot`."""

    type: Literal["oauth2"]
    authorize_url: str = Field(pattern=r"^https?://", description="the provider's authorize page")
    token_url: str = Field(pattern=r"^https?://", description="code and refresh_token grants")
    revoke_url: str | None = Field(
        None, pattern=r"^https?://", description="RFC 7009 revocation (on disconnect)"
    )
    scopes: list[str] = Field(default_factory=list)
    client_id_env: EnvName
    client_secret_env: EnvName
    pkce: Literal[True] = Field(True, description="S256 PKCE, always on")
    bot_token_env: EnvName | None = Field(
        None, description="the bot's own token (on_behalf_of: bot, fallback: bot)"
    )
    on_behalf_of: OnBehalfOf = Field(
        "requester", description="whose credentials an action uses unless it says otherwise"
    )
    fallback: Fallback = Field(
        "none", description="bot: use the bot's token when the person has not connected"
    )

    @model_validator(mode="after")
    def _bot_token_when_used(self) -> OAuth2Auth:
        if (self.on_behalf_of == "bot" or self.fallback == "bot") and not self.bot_token_env:
            raise ValueError("on_behalf_of: bot and fallback: bot need bot_token_env")
        return self


Scheme = Annotated[BearerAuth | HeaderAuth | BasicAuth | QueryAuth, Field(discriminator="type")]
SingleAuth = NoAuth | BearerAuth | HeaderAuth | BasicAuth | QueryAuth


class AuthAlternative(_Strict):
    """One way to authenticate: every scheme in `all_of` goes on each request."""

    name: str = Field(
        pattern=ALTERNATIVE_NAME_PATTERN,
        description="said when it is chosen, e.g. 'api_key+app_key'",
    )
    all_of: list[Scheme] = Field(min_length=1)

    @model_validator(mode="after")
    def _no_clash(self) -> AuthAlternative:
        seen: set[str] = set()
        for scheme in self.all_of:
            place = _place(scheme)
            if place in seen:
                raise ValueError(f"alternative {self.name!r} sets {place} twice")
            seen.add(place)
        return self

    def required_env(self) -> list[str]:
        return [name for scheme in self.all_of for name in required_env(scheme)]


class AnyOfAuth(_Strict):
    """Alternatives in order of preference: a call uses the first whose variables are set."""

    type: Literal["any_of"]
    alternatives: list[AuthAlternative] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> AnyOfAuth:
        names = [alternative.name for alternative in self.alternatives]
        if len(set(names)) != len(names):
            raise ValueError("alternative names must be unique")
        return self

    def schemes(self) -> list[SingleAuth]:
        return [scheme for alternative in self.alternatives for scheme in alternative.all_of]


Auth = Annotated[
    NoAuth | BearerAuth | HeaderAuth | BasicAuth | QueryAuth | AnyOfAuth | OAuth2Auth,
    Field(discriminator="type"),
]
AuthBlock = SingleAuth | AnyOfAuth | OAuth2Auth


def _place(scheme: Any) -> str:
    """Where a scheme puts its credential: a header (case-insensitive) or a query parameter."""
    if isinstance(scheme, QueryAuth):
        return f"query parameter {scheme.param!r}"
    header = scheme.header if isinstance(scheme, HeaderAuth) else "Authorization"
    return f"header {header.lower()!r}"


def required_env(scheme: Any) -> list[str]:
    """The variables one scheme cannot work without (an optional password is not one)."""
    if isinstance(scheme, OAuth2Auth):
        return [scheme.client_id_env, scheme.client_secret_env]
    if isinstance(scheme, BasicAuth):
        names = [scheme.username_env] if scheme.username_env else []
        if scheme.password_env and not scheme.password_optional:
            names.append(scheme.password_env)
        return names
    return [
        getattr(scheme, attr) for attr in ("token_env", "value_env") if getattr(scheme, attr, None)
    ]


def auth_env_names(auth: Any) -> list[str]:
    """Every environment variable an auth block reads (secrets, user names, optional ones)."""
    schemes = auth.schemes() if isinstance(auth, AnyOfAuth) else [auth]
    names = [
        getattr(scheme, attr)
        for scheme in schemes
        for attr in (
            "token_env",
            "value_env",
            "username_env",
            "password_env",
            "client_id_env",
            "client_secret_env",
            "bot_token_env",
        )  # fmt: skip
        if getattr(scheme, attr, None)
    ]
    return list(dict.fromkeys(names))


def chosen_alternative(auth: AnyOfAuth, environ: Any) -> AuthAlternative | None:
    """The first alternative whose required variables are all set, if any."""
    for alternative in auth.alternatives:
        if all(environ.get(name) for name in alternative.required_env()):
            return alternative
    return None


def auth_missing(auth: Any, environ: Any) -> list[str]:
    """Unset variables that keep the auth block from working: none when it can send a request
    (for `any_of`, when any alternative is complete; else the closest alternative's)."""
    if isinstance(auth, AnyOfAuth):
        gaps = [
            [name for name in alternative.required_env() if not environ.get(name)]
            for alternative in auth.alternatives
        ]
        return min(gaps, key=len)
    return [name for name in required_env(auth) if not environ.get(name)]


def auth_choice(auth: Any, environ: Any) -> str:
    """For `any_of`: which alternative calls use now, said for `manifests validate` and the
    load log ('' for a single scheme)."""
    if not isinstance(auth, AnyOfAuth):
        return ""
    chosen = chosen_alternative(auth, environ)
    if chosen is None:
        return "no alternative is complete"
    return f"alternative {chosen.name!r} is used (its variables are set)"
