"""Connector credentials: read from the environment at call time, never stored or logged.

The manifest names environment variables; the values are looked up on every call (so a rotated
token is picked up without a restart) and handed to the redaction helper through
`secret_values`, so they cannot leak into an observation, a log line or an exception. With
auth alternatives (`any_of`), each call uses the first alternative whose variables are set,
and every credential of every alternative counts as a secret.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass

from bot.errors import ConnectorError
from connectors.manifest_auth import (
    AnyOfAuth,
    AuthBlock,
    BasicAuth,
    BearerAuth,
    HeaderAuth,
    OAuth2Auth,
    QueryAuth,
    SingleAuth,
    auth_missing,
    chosen_alternative,
)


class MissingSecretError(ConnectorError):
    """A secret variable is unset at call time; the message names the variable, not a value."""


@dataclass(frozen=True)
class Credentials:
    """What one request must carry: extra headers and query parameters."""

    headers: Mapping[str, str]
    query: Mapping[str, str]


def _require(environ: Mapping[str, str], name: str) -> str:
    value = environ.get(name)
    if not value:
        raise MissingSecretError(f"environment variable {name} is not set")
    return value


def _basic_pair(auth: BasicAuth, environ: Mapping[str, str]) -> tuple[str, str]:
    """(user, password); the password is empty when the scheme has none or may lack one."""
    user = (
        auth.username if auth.username is not None else _require(environ, auth.username_env or "")
    )
    if auth.password_env is None:
        return user, ""
    if auth.password_optional:
        return user, environ.get(auth.password_env, "")
    return user, _require(environ, auth.password_env)


def _one(auth: SingleAuth, environ: Mapping[str, str]) -> Credentials:
    if isinstance(auth, BearerAuth):
        return Credentials({"Authorization": f"Bearer {_require(environ, auth.token_env)}"}, {})
    if isinstance(auth, HeaderAuth):
        return Credentials({auth.header: f"{auth.prefix}{_require(environ, auth.value_env)}"}, {})
    if isinstance(auth, BasicAuth):
        user, password = _basic_pair(auth, environ)
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        return Credentials({"Authorization": f"Basic {token}"}, {})
    if isinstance(auth, QueryAuth):
        return Credentials({}, {auth.param: _require(environ, auth.value_env)})
    return Credentials({}, {})


def credentials(auth: AuthBlock, environ: Mapping[str, str]) -> Credentials:
    """Headers and query parameters for an auth block, with values from the environment (for
    `oauth2`: the bot's own token; a person's comes from `connectors.oauth_tokens`)."""
    if isinstance(auth, OAuth2Auth):
        if not auth.bot_token_env:
            raise MissingSecretError("the connector acts only as a person (no bot_token_env)")
        return Credentials({"Authorization": f"Bearer {_require(environ, auth.bot_token_env)}"}, {})
    if not isinstance(auth, AnyOfAuth):
        return _one(auth, environ)
    alternative = chosen_alternative(auth, environ)
    if alternative is None:
        missing = ", ".join(auth_missing(auth, environ))
        names = " or ".join(repr(a.name) for a in auth.alternatives)
        raise MissingSecretError(f"no auth alternative ({names}) is complete: {missing} not set")
    headers: dict[str, str] = {}
    query: dict[str, str] = {}
    for scheme in alternative.all_of:
        one = _one(scheme, environ)
        headers.update(one.headers)
        query.update(one.query)
    return Credentials(headers, query)


def query_params(auth: AuthBlock) -> list[str]:
    """The query parameters an auth block may carry a secret in (redacted by name in URLs)."""
    if isinstance(auth, OAuth2Auth):
        return []
    schemes = auth.schemes() if isinstance(auth, AnyOfAuth) else [auth]
    return [scheme.param for scheme in schemes if isinstance(scheme, QueryAuth)]


def secret_values(auth: AuthBlock, environ: Mapping[str, str]) -> list[str]:
    """Every secret string an auth block can put on the wire (for redaction).

    A basic-auth user name alone is not a secret (it may be a common word) while a password
    goes with it; without a password (Stripe's key as the user name) it is the secret. The
    password and the encoded `user:password` pair always are.
    """
    if isinstance(auth, OAuth2Auth):  # the client secret and the bot's token (people's: vault)
        names = (auth.client_secret_env, auth.bot_token_env)
        return [environ[name] for name in names if name and environ.get(name)]
    schemes = auth.schemes() if isinstance(auth, AnyOfAuth) else [auth]
    values: list[str] = []
    for scheme in schemes:
        for attr in ("token_env", "value_env", "password_env"):
            name = getattr(scheme, attr, None)
            if name and environ.get(name):
                values.append(environ[name])
        if isinstance(scheme, BasicAuth):
            values += _basic_secrets(scheme, environ)
    return list(dict.fromkeys(values))


def _basic_secrets(auth: BasicAuth, environ: Mapping[str, str]) -> list[str]:
    user = auth.username if auth.username is not None else environ.get(auth.username_env or "")
    password = environ.get(auth.password_env, "") if auth.password_env else ""
    if not user:
        return []
    pair = f"{user}:{password}"
    values = [pair, base64.b64encode(pair.encode()).decode()]
    return values if password or auth.username is not None else [user, *values]
