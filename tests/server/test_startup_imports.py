"""`chatops serve` starts without the large SDKs it may not need: the MCP SDK only when a manifest
names an MCP server, lark-oapi only when Feishu is configured, the OpenTelemetry SDK and its
exporter only when traces are on (each costs start-up time on a busy host, and every serve
process of the suite pays it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_serve_path_imports_no_sdk_it_does_not_need(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    script = (
        "import asyncio, sys\n"
        "import aiohttp\n"
        "from bot.config import Settings\n"
        "from bot.server import create_app\n"
        "from connectors.connector_set import ConnectorSet\n"
        "async def main():\n"
        "    create_app(Settings(database_url='sqlite://', chatops_manifests_dir=sys.argv[1]))\n"
        "    async with aiohttp.ClientSession() as http:\n"
        "        await (await ConnectorSet.load(sys.argv[1], http=http)).close()\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in ('mcp', 'mcp_types', 'lark_oapi', 'opentelemetry.sdk',"
        " 'opentelemetry.exporter') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(manifests)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_first_request_imports_nothing(tmp_path: Path) -> None:
    """A burst right after start-up must not pay for imports in the middle of it: the openai
    SDK's chat resources and anyio's asyncio backend are imported at start-up, not by the
    first model call (issue 29)."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.server.first_request_imports"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
