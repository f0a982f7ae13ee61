"""The console's page and files are the app's own: served from `static/` with the right types,
a Content-Security-Policy that runs only the app's scripts, a favicon (no 404 on every load),
nothing else reachable through the files route, and all of it inside an installed wheel."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from bot.server import create_app
from bot.surfaces.console.static import STATIC_DIR, StaticFiles

ROOT = Path(__file__).resolve().parents[2]


async def test_the_page_and_its_files_are_served_by_the_app(aiohttp_client, make_settings) -> None:
    client = await aiohttp_client(create_app(make_settings()))
    for path in ("/", "/c/" + "b" * 32, "/approvals", "/calls?outcome=ok"):
        page = await client.get(path)
        assert page.status == 200 and page.content_type == "text/html"
        csp = page.headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp
        assert "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
        assert page.headers["Cache-Control"] == "no-store"
        assert '<script type="module" src="/console/static/app.js"></script>' in await page.text()
    types = {"app.js": "text/javascript", "store.js": "text/javascript",
             "style.css": "text/css"}  # fmt: skip
    for name, content_type in types.items():
        served = await client.get(f"/console/static/{name}")
        assert served.status == 200 and served.content_type == content_type
        assert await served.read() == (STATIC_DIR / name).read_bytes()
    icon = await client.get("/favicon.ico")
    assert icon.status == 200 and icon.content_type == "image/x-icon"
    assert (await icon.read())[:4] == b"\x00\x00\x01\x00"  # an ICO file
    for missing in ("nope.js", "index.html", "..%2Fsurface.py", "%2E%2E%2Fstatic.py", ".env"):
        assert (await client.get(f"/console/static/{missing}")).status == 404, missing
    assert (await client.get("/console/static/../surface.py")).status == 404


def test_every_module_the_page_imports_is_a_served_file() -> None:
    served = set(StaticFiles().names)
    assert {"index.html", "app.js", "api.js", "store.js", "render.js", "views.js", "style.css",
            "favicon.ico"} <= served  # fmt: skip
    for name in served:
        if name.endswith(".js"):
            for line in (STATIC_DIR / name).read_text().splitlines():
                if line.startswith("import "):
                    imported = line.rsplit('"./', 1)[1].split('"')[0]
                    assert imported in served, (name, imported)


def test_an_installed_wheel_has_the_static_files(tmp_path: Path) -> None:
    """Built from a copy of the tree (nothing written into the checkout), without build
    isolation: nothing is downloaded."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("bot", "connectors", "hooks"):
        shutil.copytree(ROOT / package, source / package,
                        ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
         "--wheel-dir", str(tmp_path / "dist"), str(source)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "dist").glob("chatops-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in STATIC_DIR.iterdir():
        assert f"bot/surfaces/console/static/{path.name}" in names
