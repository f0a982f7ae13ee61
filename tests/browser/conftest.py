"""A real browser on the real bot: `chatops serve` (a child process, as the crash tests start it)
on the fake model and the fake ops API, and Debian's chromium driven by Playwright.

Playwright comes from PyPI; its browser is never downloaded (`playwright install` is not run):
it drives `/usr/bin/chromium`, which `.ci/run` installs with apt when it is missing. Headless,
in a fresh profile, with the background networking a closed network makes misbehave switched
off. Screenshots go to tests/artifacts/ (git-ignored).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fixtures import fake_openai  # noqa: F401
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.ops_api import OpsAPI, ops_manifest
from tests.server.serve_process import ServeProcess, serving

CHROMIUM = os.environ.get("CHATOPS_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
WAIT_MS = 30_000


@pytest.fixture
async def bot(
    tmp_path: Path,
    fake_openai: FakeOpenAI,  # noqa: F811
    ops_api: OpsAPI,
) -> AsyncIterator[ServeProcess]:
    """`chatops serve` on SQLite, the fake model and the ops connector (restarts need approval)."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "ops.yaml").write_text(ops_manifest(ops_api.url))
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'chatops.db'}",
        "CHATOPS_MANIFESTS_DIR": str(manifests),
        "OPENAI_BASE_URL": fake_openai.base_url,
        "OPENAI_API_KEY": "sk-test-not-a-secret",
        "CHATOPS_MODEL": "fake-model",
        "CHATOPS_LLM_MAX_RETRIES": "0",
    }
    async with serving(tmp_path, env) as process:
        yield process
        await process.stop()


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[Any]:
    """A headless chromium context in a fresh profile (skipped only where none is installed)."""
    if shutil.which(CHROMIUM) is None:
        pytest.skip(f"no browser at {CHROMIUM}: install Debian's chromium (apt-get install -y "
                    "chromium; .ci/run does) or set CHATOPS_TEST_CHROMIUM")  # fmt: skip
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 860},
            accept_downloads=True,
        )
        context.set_default_timeout(WAIT_MS)
        try:
            yield context
        finally:
            await context.close()


@pytest.fixture
def artifacts(request: pytest.FixtureRequest) -> Path:
    """Where this test's screenshots go."""
    folder = ARTIFACTS / request.node.name.replace("/", "_")
    folder.mkdir(parents=True, exist_ok=True)
    return folder
