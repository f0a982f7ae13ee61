"""Which Feishu/Lark apps this process serves: the FEISHU_* app, and those of an apps file.

One deployment may serve several custom apps (one per tenant, or several business units'), each
with its own credentials, Verification Token and Encrypt Key. `CHATOPS_FEISHU_APPS_FILE` names
a YAML file listing them; their secrets are named by environment variable (`*_env`), never
written in the file:

```yaml
apps:
  - name: sales                    # its webhook: POST /feishu/events/sales
    app_id: cli_a1b2
    app_secret_env: SALES_FEISHU_APP_SECRET
    verification_token_env: SALES_FEISHU_VERIFICATION_TOKEN
    encrypt_key_env: SALES_FEISHU_ENCRYPT_KEY
    tenant_keys: [2ed263bf32cf1651]  # the tenants whose threads this app answers
    domain: https://open.larksuite.com   # optional; default FEISHU_DOMAIN
```

Which app answers a thread is decided by the thread's workspace (the tenant key): each tenant
is claimed by at most one app (checked here), and the FEISHU_* app, when set, answers every
tenant no file app claims. So a conversation needs no extra column to know its app.

lark-oapi keeps two things per process: the websocket client's event loop
(`lark_oapi.ws.client.loop`, a module global) and the token cache (`TokenManager.cache`, a
class attribute, keyed by app id). Tokens are therefore kept per app id and dropped per app id
(`send.py`); the long connection is allowed for one app only, the FEISHU_* one (`FEISHU_MODE`),
and the apps of the file are webhook apps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.config import Settings, connector_environ
from bot.errors import StartupError
from connectors.loading import YAML_LOADER, yaml_line, yaml_problems

DEFAULT_NAME = "default"  # the FEISHU_* app; its webhook stays POST /feishu/events
NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,39}$"


@dataclass(frozen=True)
class FeishuApp:
    """One app's configuration: who it is, how its pushes are checked, which tenants it answers
    (empty for the FEISHU_* app: every tenant no other app claims)."""

    name: str
    app_id: str
    app_secret: str = field(repr=False)
    verification_token: str | None = field(repr=False)
    encrypt_key: str | None = field(repr=False)
    domain: str
    mode: str = "webhook"
    tenant_keys: frozenset[str] = frozenset()
    variables: str = "FEISHU_APP_ID and FEISHU_APP_SECRET"  # what to check when refused

    @property
    def is_default(self) -> bool:
        return self.name == DEFAULT_NAME

    @property
    def route(self) -> str:
        """Its webhook path."""
        return "/feishu/events" if self.is_default else f"/feishu/events/{self.name}"

    @property
    def health_name(self) -> str:
        """Its name in `/readyz` and the sign-in messages."""
        return "feishu" if self.is_default else f"feishu/{self.name}"

    def secrets(self) -> list[str]:
        return [s for s in (self.app_secret, self.verification_token, self.encrypt_key) if s]


class _AppEntry(BaseModel):
    """One entry of the apps file, as written."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    app_id: str = Field(min_length=1)
    app_secret_env: str = Field(min_length=1)
    verification_token_env: str = Field(min_length=1)
    encrypt_key_env: str = Field(min_length=1)
    tenant_keys: list[str] = Field(min_length=1)
    domain: str | None = None


class _AppsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    apps: list[_AppEntry] = Field(min_length=1)


def default_app(settings: Settings) -> FeishuApp | None:
    """The FEISHU_* app, when FEISHU_APP_ID and FEISHU_APP_SECRET are set."""
    if not settings.feishu_default_app:
        return None
    token, key = settings.feishu_verification_token, settings.feishu_encrypt_key
    secret = settings.feishu_app_secret
    return FeishuApp(
        name=DEFAULT_NAME,
        app_id=settings.feishu_app_id or "",
        app_secret=secret.get_secret_value() if secret is not None else "",
        verification_token=token.get_secret_value() if token is not None else None,
        encrypt_key=key.get_secret_value() if key is not None else None,
        domain=settings.feishu_domain,
        mode=settings.feishu_mode,
    )


def load_feishu_apps(
    settings: Settings, environ: Mapping[str, str] | None = None
) -> tuple[FeishuApp, ...]:
    """Every app this process serves, the FEISHU_* one first; StartupError naming the file and
    the field for anything wrong (unknown keys, an unset variable, a tenant claimed twice, a
    second long connection)."""
    apps: list[FeishuApp] = []
    first = default_app(settings)
    if first is not None:
        apps.append(first)
    path = settings.chatops_feishu_apps_file
    if path is not None:
        env = environ if environ is not None else connector_environ()
        apps.extend(_read_file(Path(path), settings.feishu_domain, env))
    _check_together(apps, path)
    return tuple(apps)


def _read_file(path: Path, domain: str, env: Mapping[str, str]) -> list[FeishuApp]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise StartupError(f"CHATOPS_FEISHU_APPS_FILE {path}: cannot read it ({exc})") from None
    try:
        raw = yaml.load(text, Loader=YAML_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise StartupError(f"{where}: not valid YAML") from None
    try:
        parsed = _AppsFile.model_validate(raw)
    except ValidationError as exc:
        raise StartupError(yaml_problems(path, text, exc)) from None
    apps = []
    for i, entry in enumerate(parsed.apps):
        secrets = {}
        for kind in ("app_secret_env", "verification_token_env", "encrypt_key_env"):
            variable = getattr(entry, kind)
            value = env.get(variable, "")
            if not value:
                line = yaml_line(text, ("apps", i, kind))
                raise StartupError(
                    f"{path}{line}: app {entry.name!r}: {kind} names {variable}, which is not set"
                )
            secrets[kind] = value
        apps.append(
            FeishuApp(
                name=entry.name,
                app_id=entry.app_id,
                app_secret=secrets["app_secret_env"],
                verification_token=secrets["verification_token_env"],
                encrypt_key=secrets["encrypt_key_env"],
                domain=entry.domain or domain,
                tenant_keys=frozenset(entry.tenant_keys),
                variables=f"{entry.app_secret_env} (app {entry.name} in {path.name})",
            )
        )
    return apps


def _check_together(apps: list[FeishuApp], path: Path | str | None) -> None:
    where = f"CHATOPS_FEISHU_APPS_FILE {path}" if path is not None else "Feishu"
    names: set[str] = set()
    ids: set[str] = set()
    tenants: dict[str, str] = {}
    for app in apps:
        if app.name in names:
            raise StartupError(f"{where}: two apps are named {app.name!r}")
        if app.app_id in ids:
            raise StartupError(f"{where}: app id {app.app_id} is listed twice")
        names.add(app.name)
        ids.add(app.app_id)
        for tenant in app.tenant_keys:
            if tenant in tenants:
                raise StartupError(
                    f"{where}: tenant {tenant} is claimed by apps {tenants[tenant]!r} and "
                    f"{app.name!r}: each tenant's threads are answered by one app"
                )
            tenants[tenant] = app.name
    if len(apps) > 1 and any(app.mode == "longconn" for app in apps):
        raise StartupError(
            "FEISHU_MODE=longconn cannot be combined with CHATOPS_FEISHU_APPS_FILE: lark-oapi "
            "runs its long connection on one process-wide event loop, so one process holds one "
            "long connection; serve several apps by webhook (POST /feishu/events/<name>)"
        )


def app_for_tenant(apps: tuple[FeishuApp, ...], tenant: str) -> FeishuApp | None:
    """The app that answers this tenant's threads: the one that claims it, else the FEISHU_*
    app; None when neither (an app of the file asked about a tenant it does not serve)."""
    for app in apps:
        if tenant in app.tenant_keys:
            return app
    return next((app for app in apps if app.is_default), None)
