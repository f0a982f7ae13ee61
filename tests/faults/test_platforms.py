"""Faults outside the database, on one serve process: Slack answering bursts of 5xx and 429
(with Retry-After), the model timing out and resetting connections (also mid-stream), and the
MCP server killed while an approved call is in flight on it. Each conversation gets one
outcome and no call runs twice."""

from __future__ import annotations

import random
from pathlib import Path

from tests.faults.cluster import cluster
from tests.faults.kinds import mcp_dies, model_faults, slack_errors


async def test_slack_model_and_mcp_faults(
    tmp_path: Path, database_url: str, admin_url: str
) -> None:
    async with cluster(tmp_path, database_url, admin_url, processes=1) as deployment:
        rng = random.Random(4)
        for fault in (slack_errors, model_faults, mcp_dies):
            await fault(deployment, rng)
            verdict = await deployment.verdict()
            verdict.raise_if_broken()
            assert verdict.pending == 0, fault.__name__
        assert sum(deployment.injected.values()) == 6
        assert max(deployment.executed().values()) == 1
