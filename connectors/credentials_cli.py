"""`chatops credentials list|revoke|key`: people's connector credentials (per-user OAuth).

`list` shows who has connected what (never a token); `revoke --user U` revokes each of U's tokens
at the provider (when its manifest declares `revoke_url`) and deletes the rows, so the next
call acting as U asks them to connect again; `key` prints a new CHATOPS_CREDENTIALS_KEY.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

from cryptography.fernet import Fernet

from bot.config import Settings, connector_environ, load_settings
from bot.errors import UserError
from bot.storage import credentials as queries
from bot.storage.database import Database
from bot.storage.opening import open_existing
from connectors.http import client_session
from connectors.loading import load_manifest_dir
from connectors.manifest import HttpConnector, ManifestError
from connectors.manifest_auth import OAuth2Auth
from connectors.oauth_service import OAuthService
from connectors.oauth_vault import CredentialVault


def credentials_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out if out is not None else sys.stdout
    if args.verb == "key":
        print(Fernet.generate_key().decode(), file=out)
        return 0
    settings = load_settings()
    engine = open_existing(settings.database_url, needs_table="user_credential")
    db = Database(engine)
    try:
        if args.verb == "list":
            return _list(db, args.user, out)
        return asyncio.run(_revoke(settings, db, args.user, args.connector, out))
    finally:
        db.close()
        engine.dispose()


def _list(db: Database, user: str | None, out: TextIO) -> int:
    rows = db.call(queries.credentials_of, user)
    if not rows:
        print("no connected accounts" + (f" for {user}" if user else ""), file=out)
        return 0
    for row in rows:
        expires = row.expires_at.isoformat(timespec="seconds") if row.expires_at else "-"
        print(
            f"{row.connector}\t{row.owner}\tlinked {row.linked_at.isoformat(timespec='seconds')}"
            f"\taccess token expires {expires}\tscopes {row.scopes or '-'}",
            file=out,
        )
    return 0


async def _revoke(
    settings: Settings, db: Database, user: str, connector: str | None, out: TextIO
) -> int:
    key = settings.chatops_credentials_key
    if key is None:
        raise UserError("set CHATOPS_CREDENTIALS_KEY (the tokens must be read to revoke them)")
    rows = [r for r in db.call(queries.credentials_of, user) if connector in (None, r.connector)]
    if not rows:
        print(f"no connected accounts for {user}", file=out)
        return 0
    service = OAuthService(
        db=db, vault=CredentialVault(db, key.get_secret_value()), environ=connector_environ(),
        public_url=settings.public_url, link_ttl_s=settings.chatops_oauth_link_ttl_s,
    )  # fmt: skip
    for manifest in _oauth_manifests(settings):
        service.add_connector(manifest)
    async with client_session() as http:
        service.bind(http)
        for row in rows:
            await service.disconnect(row.connector, row.owner)
            print(f"revoked {row.connector} for {row.owner}", file=out)
    return 0


def _oauth_manifests(settings: Settings) -> list[HttpConnector]:
    """The per-user OAuth manifests (their revoke URLs); none readable: rows are still deleted."""
    try:
        loaded = load_manifest_dir(settings.chatops_manifests_dir)
    except ManifestError:
        return []
    return [m for _, m in loaded if isinstance(m, HttpConnector) and isinstance(m.auth, OAuth2Auth)]
