"""Primary keys made in Python, not by the database: a random hex id (runs, approvals, grants)."""

from __future__ import annotations

import uuid


def new_id() -> str:
    return uuid.uuid4().hex
