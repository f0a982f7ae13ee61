"""An OpenAPI `security` requirement -> the manifest's `auth`, its meaning kept.

`security` lists alternatives, each an AND of schemes (Datadog: an API key and an application
key together, or a token). Each alternative the connector can send becomes one of `any_of`'s
alternatives, in the document's order; a requirement of one scheme stays a plain auth block.
Every credential gets its own variable, named after the connector (`DATADOG_DD_API_KEY`,
`STRIPE_TOKEN`), and the notes say which alternatives there are, what each needs, and which
one the current environment completes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from connectors.manifest_auth import AnyOfAuth, chosen_alternative
from connectors.openapi_doc import RefError, deref, pointer

_PREFIX_IN_DESCRIPTION = re.compile(r"`([^`<>]*?)<[A-Za-z0-9_ -]+>`")
_BEARER_WORD = re.compile(r"\bbearer\b", re.IGNORECASE)
MAX_ALTERNATIVE_NAME = 120


def _env_stem(name: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_")


def _requirements(doc: Mapping[str, Any], schemes: Mapping[str, Any]) -> list[list[str]]:
    """The alternatives (lists of scheme names): the document's `security`; else the most
    common one among its operations'; else each scheme on its own."""
    top = doc.get("security")
    if isinstance(top, list) and top:
        return [list(req) for req in top if isinstance(req, Mapping)]
    seen: Counter[tuple[tuple[str, ...], ...]] = Counter()
    for item in (doc.get("paths") or {}).values():
        for op in (item or {}).values() if isinstance(item, Mapping) else ():
            if isinstance(op, Mapping) and isinstance(op.get("security"), list):
                seen[tuple(tuple(req) for req in op["security"] if isinstance(req, Mapping))] += 1
    if seen:
        return [list(req) for req in seen.most_common(1)[0][0]]
    return [[key] for key in schemes]


class _Names:
    """Distinct variable names: the plain one (`X_TOKEN`) when one scheme of its kind is in
    use, else one per scheme (`X_<HEADER>`, `X_<SCHEME>_TOKEN`)."""

    def __init__(self, prefix: str, kinds: Counter[str]) -> None:
        self.prefix = prefix
        self.kinds = kinds
        self.taken: set[str] = set()

    def name(self, kind: str, plain: str, specific: str) -> str:
        stem = plain if self.kinds[kind] <= 1 else specific
        stem = stem if stem.startswith(f"{self.prefix}_") else f"{self.prefix}_{stem}"
        candidate, n = stem, 2
        while candidate in self.taken:
            candidate, n = f"{stem}_{n}", n + 1
        self.taken.add(candidate)
        return candidate


def _kind(scheme: Mapping[str, Any]) -> str:
    kind = scheme.get("type")
    if kind == "http" and str(scheme.get("scheme", "")).lower() == "basic":
        return "basic"
    if kind in ("http", "oauth2", "openIdConnect"):
        return "token"
    if kind == "apiKey" and scheme.get("in") in ("header", "query"):
        return "key"
    return ""


def _scheme_block(key: str, scheme: Mapping[str, Any], names: _Names) -> dict[str, Any]:
    """One scheme as a manifest auth block (a documented key prefix kept: PagerDuty's
    `Token token=`, an `Authorization` key described as a bearer token gets `Bearer `)."""
    kind = _kind(scheme)
    if kind == "basic":
        stem = _env_stem(key)
        return {
            "type": "basic",
            "username_env": names.name("basic", "USERNAME", f"{stem}_USERNAME"),
            "password_env": names.name("basic_password", "PASSWORD", f"{stem}_PASSWORD"),
            "password_optional": True,
        }
    if kind == "token":
        return {
            "type": "bearer",
            "token_env": names.name("token", "TOKEN", f"{_env_stem(key)}_TOKEN"),
        }
    variable = names.name("key", "API_KEY", _env_stem(str(scheme["name"])) or _env_stem(key))
    if scheme.get("in") == "query":
        return {"type": "query", "param": scheme["name"], "value_env": variable}
    block: dict[str, Any] = {"type": "header", "header": scheme["name"], "value_env": variable}
    description = str(scheme.get("description") or "")
    found = _PREFIX_IN_DESCRIPTION.search(description)
    if found and found.group(1).strip():
        block["prefix"] = found.group(1)
    elif str(scheme["name"]).lower() == "authorization" and _BEARER_WORD.search(description):
        block["prefix"] = "Bearer "
    return block


def import_auth(
    doc: Mapping[str, Any], connector: str, environ: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The manifest's `auth` and notes on what was kept, left out and chosen."""
    raw = (doc.get("components") or {}).get("securitySchemes") or {}
    schemes: dict[str, Mapping[str, Any]] = {}
    notes: list[str] = []
    for key, value in raw.items() if isinstance(raw, Mapping) else ():
        try:
            scheme, _ = deref(doc, value, pointer("components", "securitySchemes", key))
        except RefError as exc:
            notes.append(f"security scheme {key!r} skipped: {exc}")
            continue
        if isinstance(scheme, Mapping):
            schemes[str(key)] = scheme
    alternatives: list[list[str]] = []
    optional = False
    for requirement in _requirements(doc, schemes):
        if not requirement:
            optional = True
            continue
        unusable = [key for key in requirement if key not in schemes or not _kind(schemes[key])]
        if unusable:
            what = ", ".join(
                f"{key!r} ({schemes[key].get('type')})"
                if key in schemes
                else f"{key!r} (undefined)"
                for key in unusable
            )
            notes.append(
                f"security requirement {' + '.join(requirement)} left out: {what} not supported"
            )
            continue
        if requirement not in alternatives:
            alternatives.append(requirement)
    if not alternatives:
        return {"type": "none"}, notes
    used = list(dict.fromkeys(key for alternative in alternatives for key in alternative))
    kinds = Counter(_kind(schemes[key]) for key in used)
    kinds["basic_password"] = kinds["basic"]
    names = _Names(_env_stem(connector), kinds)
    blocks = {key: _scheme_block(key, schemes[key], names) for key in used}
    if optional:
        notes.append(
            "the API also answers some calls without credentials; the connector always sends them"
        )
    if len(alternatives) == 1 and len(alternatives[0]) == 1:
        return blocks[alternatives[0][0]], notes
    auth = {
        "type": "any_of",
        "alternatives": [
            {"name": "+".join(a)[:MAX_ALTERNATIVE_NAME], "all_of": [blocks[key] for key in a]}
            for a in alternatives
        ],
    }
    return auth, notes + [_choice_note(auth, environ)]


def _choice_note(auth: dict[str, Any], environ: Mapping[str, str] | None) -> str:
    """Which alternatives exist, what each needs, and which the environment completes now."""
    model = AnyOfAuth.model_validate(auth)
    described = "; ".join(
        f"{a.name!r} needs {', '.join(a.required_env())}" for a in model.alternatives
    )
    chosen = chosen_alternative(model, environ or {})
    now = (
        f"the environment completes {chosen.name!r}: calls will use it"
        if chosen is not None
        else "none is complete in the environment yet"
    )
    count = len(model.alternatives)
    return f"auth: {count} alternatives, the first complete one is used ({described}); {now}"
