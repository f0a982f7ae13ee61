"""Connector credentials: read from the environment at call time, never stored or logged.

The manifest names environment variables; the values are looked up on every call (so a rotated
token is picked up without a restart) and handed to the redaction helper through
`secret_values`, so they cannot leak into an observation, a log line or an exception.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass

from bot.errors import ConnectorError
from connectors.manifest import BasicAuth, BearerAuth, HeaderAuth, NoAuth, QueryAuth


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


def credentials(
    auth: NoAuth | BearerAuth | HeaderAuth | BasicAuth | QueryAuth, environ: Mapping[str, str]
) -> Credentials:
    """Headers and query parameters for an auth block, with values from the environment."""
    if isinstance(auth, BearerAuth):
        return Credentials({"Authorization": f"Bearer {_require(environ, auth.token_env)}"}, {})
    if isinstance(auth, HeaderAuth):
        return Credentials({auth.header: f"{auth.prefix}{_require(environ, auth.value_env)}"}, {})
    if isinstance(auth, BasicAuth):
        user = auth.username
        if user is None:
            user = _require(environ, auth.username_env or "")
        token = base64.b64encode(f"{user}:{_require(environ, auth.password_env)}".encode()).decode()
        return Credentials({"Authorization": f"Basic {token}"}, {})
    if isinstance(auth, QueryAuth):
        return Credentials({}, {auth.param: _require(environ, auth.value_env)})
    return Credentials({}, {})


def secret_values(
    auth: NoAuth | BearerAuth | HeaderAuth | BasicAuth | QueryAuth, environ: Mapping[str, str]
) -> list[str]:
    """Every secret string an auth block can put on the wire (for redaction).

    A basic-auth user name alone is not a secret (it may be a common word); the password and
    the encoded `user:password` pair are.
    """
    values: list[str] = []
    for attr in ("token_env", "value_env", "password_env"):
        name = getattr(auth, attr, None)
        if name and environ.get(name):
            values.append(environ[name])
    if isinstance(auth, BasicAuth) and environ.get(auth.password_env):
        user = auth.username if auth.username is not None else environ.get(auth.username_env or "")
        if user:
            pair = f"{user}:{environ[auth.password_env]}"
            values += [pair, base64.b64encode(pair.encode()).decode()]
    return values
