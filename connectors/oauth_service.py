"""Per-user OAuth for connectors: connect links, the authorization code flow, fresh tokens.

One object per process (`Runtime.oauth`), owning no global state. The flow:
1. `create_link(connector, person)`: a one-time link sent only to that person; the database
   keeps the hash of its token, who it is for and when it expires.
2. `start`: the person's browser opens the link; a fresh `state` and PKCE verifier are bound to
   the link, and a random browser secret goes into a cookie (its hash onto the link), so only
   the browser that started the flow can finish it.
3. `finish` (the callback): the state must be known, unexpired, unused and come back to the
   browser that started it; the link is claimed once (a conditional UPDATE), the code exchanged
   with the verifier, the tokens stored encrypted (`oauth_vault`), and a run waiting for this
   person goes on. Anything else is refused and nothing is stored.
Tokens are refreshed a minute before they expire and once after a 401; `disconnect` revokes at
the provider (when it declares `revoke_url`) and deletes the row.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import aiohttp

from bot.clock import utcnow
from bot.errors import ConnectorError
from bot.storage import credentials as queries
from bot.storage.database import Database
from bot.storage.models import OAuthLink
from connectors.manifest import HttpConnector
from connectors.manifest_auth import OAuth2Auth
from connectors.oauth_client import OAuthClient, authorize_url, pkce_pair
from connectors.oauth_vault import CredentialError, CredentialVault, Person, TokenSet

log = logging.getLogger(__name__)

REFRESH_MARGIN = timedelta(seconds=60)  # refresh an access token this long before it expires
POLL_S = 2.0  # a waiting run also checks the database this often (a callback on another process)


class LinkRefused(ConnectorError):
    """A connect link or callback that cannot be used; the message is the page's text."""


@dataclass(frozen=True)
class StartedFlow:
    """Where the browser goes next, and the secret its cookie must bring back."""

    redirect: str
    browser_secret: str


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class OAuthService:
    """Connect links, callbacks and tokens of every per-user OAuth connector."""

    def __init__(
        self,
        *,
        db: Database,
        vault: CredentialVault,
        environ: Mapping[str, str],
        public_url: str,
        link_ttl_s: float,
    ) -> None:
        self._db = db
        self.vault = vault
        self._environ = environ
        self._public_url = public_url.rstrip("/")
        self._link_ttl = timedelta(seconds=link_ttl_s)
        self._providers: dict[str, OAuth2Auth] = {}
        self._http: aiohttp.ClientSession | None = None
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._linked: dict[tuple[str, str], asyncio.Event] = {}

    def add_connector(self, manifest: HttpConnector) -> None:
        """Serve this connector's links and tokens (its auth must be `oauth2`)."""
        if not isinstance(manifest.auth, OAuth2Auth):
            raise ValueError(f"{manifest.name} does not use per-user OAuth")
        self._providers[manifest.name] = manifest.auth

    def bind(self, http: aiohttp.ClientSession) -> None:
        """The app's HTTP session, for the token and revocation requests."""
        self._http = http

    @property
    def connectors(self) -> list[str]:
        return sorted(self._providers)

    def secrets(self) -> list[str]:
        return self.vault.secrets()

    def redirect_uri(self, connector: str) -> str:
        return f"{self._public_url}/oauth/{connector}/callback"

    def _client(self, connector: str) -> OAuthClient:
        auth = self._providers.get(connector)
        if auth is None:
            raise LinkRefused(f"There is no connector {connector!r} to connect.")
        if self._http is None:
            raise ConnectorError("the OAuth service has no HTTP session yet")
        return OAuthClient(auth, self._environ, self._http)

    # --- links and the callback ------------------------------------------------------------

    async def create_link(self, connector: str, person: Person) -> str:
        """A one-time connect link for `person` (send it to them alone)."""
        if connector not in self._providers:
            raise LinkRefused(f"There is no connector {connector!r} to connect.")
        token = secrets.token_urlsafe(32)
        link = OAuthLink(
            id=_hash(token), connector=connector, owner=person.owner, platform=person.platform,
            workspace=person.workspace, user_id=person.user_id,
            expires_at=utcnow() + self._link_ttl,
        )  # fmt: skip
        await self._db.run(queries.add_link, link)
        await self._db.run(queries.drop_expired_links, utcnow() - timedelta(days=1))
        return f"{self._public_url}/oauth/{connector}/start?link={token}"

    async def start(self, connector: str, link_token: str) -> StartedFlow:
        """The browser opened a link: bind a fresh state and verifier to it."""
        client = self._client(connector)
        link = await self._db.run(queries.link_by_id, _hash(link_token))
        if link is None or link.connector != connector:
            raise LinkRefused("This connect link is not valid. Ask the bot again for a new one.")
        if link.used_at is not None or link.expires_at <= utcnow():
            raise LinkRefused("This connect link was used or has expired. Ask the bot again.")
        state, browser = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        verifier, challenge = pkce_pair()
        sealed = self.vault.encrypt(verifier)
        if not await self._db.run(
            queries.start_link, link.id, _hash(state), sealed, _hash(browser)
        ):
            raise LinkRefused("This connect link was used or has expired. Ask the bot again.")
        redirect = authorize_url(
            client.auth, client_id=client.client_id, redirect_uri=self.redirect_uri(connector),
            state=state, challenge=challenge,
        )  # fmt: skip
        return StartedFlow(redirect, browser)

    async def finish(self, connector: str, state: str, code: str, browser_secret: str) -> Person:
        """The provider sent the browser back: check the state, exchange the code, store."""
        client = self._client(connector)
        link = await self._db.run(queries.link_by_state, _hash(state)) if state else None
        if link is None or link.connector != connector or not code:
            raise LinkRefused("This sign-in is not one the bot started; nothing was stored.")
        if link.used_at is not None:
            raise LinkRefused("This sign-in was already used; nothing was stored.")
        if link.expires_at <= utcnow():
            raise LinkRefused("This sign-in has expired; ask the bot again for a new link.")
        if not browser_secret or not hmac.compare_digest(link.browser_hash, _hash(browser_secret)):
            raise LinkRefused(
                "This sign-in was started in another browser (or by another person); "
                "nothing was stored. Open your own connect link."
            )
        if not await self._db.run(queries.claim_link, link.id):
            raise LinkRefused("This sign-in was already used; nothing was stored.")
        verifier = self.vault.decrypt(link.verifier)
        try:
            tokens = await client.exchange(code, verifier, self.redirect_uri(connector))
        except CredentialError as exc:
            raise LinkRefused(f"The sign-in could not be completed: {exc}.") from None
        person = Person(link.platform, link.workspace, link.user_id)
        await self.vault.save(connector, person, tokens, " ".join(client.auth.scopes))
        log.info("%s connected %s", person.owner, connector)
        self._event(connector, person).set()
        return person

    # --- waiting for a person ----------------------------------------------------------------

    def _event(self, connector: str, person: Person) -> asyncio.Event:
        return self._linked.setdefault((connector, person.owner), asyncio.Event())

    async def linked(self, connector: str, person: Person) -> bool:
        return await self.vault.linked(connector, person)

    async def wait_linked(self, connector: str, person: Person, timeout_s: float) -> bool:
        """True once `person` has connected `connector` (here or in another process), False
        after `timeout_s`."""
        event = self._event(connector, person)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            while True:
                if await self.linked(connector, person):
                    return True
                left = deadline - loop.time()
                if left <= 0:
                    return False
                try:
                    await asyncio.wait_for(event.wait(), min(POLL_S, left))
                except TimeoutError:
                    continue
        finally:
            self._linked.pop((connector, person.owner), None)

    # --- tokens ------------------------------------------------------------------------------

    def _lock(self, connector: str, person: Person) -> asyncio.Lock:
        return self._locks.setdefault((connector, person.owner), asyncio.Lock())

    async def access_token(self, connector: str, person: Person) -> str | None:
        """The person's access token, refreshed first when it expires within a minute; None
        when they have not connected."""
        async with self._lock(connector, person):
            tokens = await self.vault.load(connector, person)
            if tokens is None:
                return None
            expiring = tokens.expires_at is not None and (
                tokens.expires_at - REFRESH_MARGIN <= utcnow()
            )
            if expiring and tokens.refresh_token:
                tokens = await self._refresh(connector, person, tokens)
            return tokens.access_token

    async def refreshed(self, connector: str, person: Person, stale: str) -> str | None:
        """After a 401: a new access token (unless another call refreshed it already)."""
        async with self._lock(connector, person):
            tokens = await self.vault.load(connector, person)
            if tokens is None:
                return None
            if tokens.access_token != stale:
                return tokens.access_token
            if not tokens.refresh_token:
                return None
            return (await self._refresh(connector, person, tokens)).access_token

    async def _refresh(self, connector: str, person: Person, tokens: TokenSet) -> TokenSet:
        fresh = await self._client(connector).refresh(tokens.refresh_token)
        await self.vault.replace(connector, person, fresh)
        log.info("refreshed the %s token of %s", connector, person.owner)
        return fresh

    async def disconnect(self, connector: str, owner: str) -> bool:
        """Revoke at the provider (when it declares `revoke_url`) and delete the row; False
        when there was nothing to delete. A failed revocation is logged, the row still goes."""
        person = Person.from_owner(owner)
        try:
            tokens = await self.vault.load(connector, person)
        except CredentialError:
            tokens = None
        if tokens is not None and connector in self._providers and self._http is not None:
            client = self._client(connector)
            try:
                if tokens.refresh_token:
                    await client.revoke(tokens.refresh_token, "refresh_token")
                await client.revoke(tokens.access_token, "access_token")
            except CredentialError as exc:
                log.warning("revoking %s's %s token failed: %s", owner, connector, exc)
        return await self.vault.forget(connector, owner)
