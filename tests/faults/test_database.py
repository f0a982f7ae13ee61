"""The database goes away under two serve processes: their own backends are terminated
(`pg_terminate_backend`) mid-run, and PostgreSQL "restarts" (the proxy drops every connection
and refuses new ones for seconds). Every approved call runs once, every acknowledged mention
gets one outcome, no run is left waiting."""

from __future__ import annotations

import random
from pathlib import Path

from tests.faults.cluster import cluster
from tests.faults.kinds import kill_backends, restart_database


async def test_backends_terminated_mid_run(
    tmp_path: Path, database_url: str, admin_url: str
) -> None:
    async with cluster(tmp_path, database_url, admin_url) as deployment:
        await kill_backends(deployment, random.Random(1))
        verdict = await deployment.verdict()
        verdict.raise_if_broken()
        assert verdict.pending == 0 and len(deployment.conversations) == 2


async def test_postgres_restarted(tmp_path: Path, database_url: str, admin_url: str) -> None:
    """The outage (3 s) is shorter than the lease (9 s): each process keeps its runs, and
    must finish them itself once the database is back."""
    async with cluster(tmp_path, database_url, admin_url, lease_s=9) as deployment:
        await restart_database(deployment, random.Random(2))
        verdict = await deployment.verdict()
        verdict.raise_if_broken()
        assert deployment.proxy.dropped > 0 and verdict.pending == 0
