"""Published API descriptions for the import tests, and one import of each per test module.

Most documents are committed, compressed, in tests/data (Kubernetes, Stripe, Asana, Datadog,
GitHub: each taken from a package on a registry, so every run has them). The others (the
Slack Web API's Swagger 2.0, DigitalOcean's specification over files, Cloudflare) could not be
had in a form this repository may keep: they are looked for outside it, in the workplace's
shared folder beside the checkout (`../shared/openapi-docs/`) or the folder
`$CHATOPS_OPENAPI_DOCS` names. tests/data/README.md lists each one's source, version and
licence. A test whose document is in neither place is skipped and says where it looked.
"""

from __future__ import annotations

import contextlib
import io
import lzma
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.cli import main
from connectors.loading import YAML_LOADER
from connectors.openapi_load import load_spec

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
PLACEHOLDER_URL = "http://127.0.0.1:9"


def docs_folder() -> Path:
    named = os.environ.get("CHATOPS_OPENAPI_DOCS")
    return Path(named) if named else ROOT.parent / "shared" / "openapi-docs"


def published(name: str) -> Path:
    """The compressed document `name` from tests/data, else from the folder outside the
    repository; otherwise the test is skipped saying where it was looked for."""
    for folder in (DATA, docs_folder()):
        if (folder / name).is_file():
            return folder / name
    pytest.skip(
        f"{name} is neither in {DATA} nor in {docs_folder()}: it is kept outside the "
        "repository (tests/data/README.md says why; $CHATOPS_OPENAPI_DOCS names a folder)"
    )


def unpacked(name: str, directory: Path) -> Path:
    """`name` decompressed into `directory`; a `.tar.xz` folder is extracted whole and the
    path returned is the folder."""
    source = published(name)
    if name.endswith(".tar.xz"):
        with tarfile.open(source, "r:xz") as archive:
            archive.extractall(directory, filter="data")
        return directory
    target = directory / name.removesuffix(".xz")
    with lzma.open(source, "rb") as packed:
        target.write_bytes(packed.read())
    return target


@dataclass(frozen=True)
class Imported:
    """One run of `chatops manifests import-openapi` on a published document."""

    spec_path: Path
    manifest_path: Path
    manifest: dict[str, Any]
    err: str

    @property
    def actions(self) -> dict[str, dict[str, Any]]:
        return {a["name"]: a for a in self.manifest["actions"]}

    def spec(self) -> dict[str, Any]:
        """The document as chatops reads it (Swagger 2.0 converted, files bundled)."""
        return load_spec(self.spec_path)

    def only(self, directory: Path, base_url: str, *names: str) -> Path:
        """A manifest folder with just these imported actions, aimed at `base_url` (loading
        a thousand actions per call test would only repeat the whole-import checks)."""
        directory.mkdir(parents=True, exist_ok=True)
        kept = [self.actions[name] for name in names]
        data = {**self.manifest, "base_url": base_url, "actions": kept, "retry_backoff_s": 0}
        path = directory / self.manifest_path.name
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return directory


def import_published(spec_path: Path, connector: str, directory: Path) -> Imported:
    """The CLI import of `spec_path` into `directory`; its stderr is kept, and a failing
    import fails the test with it."""
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / f"{connector}.yaml"
    argv = ["manifests", "import-openapi", str(spec_path), "--name", connector, "--out", str(out)]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main([*argv, "--base-url", PLACEHOLDER_URL])
    assert code == 0, err.getvalue()[-3000:]
    assert "Traceback" not in err.getvalue()
    manifest = yaml.load(out.read_text(encoding="utf-8"), Loader=YAML_LOADER)
    return Imported(spec_path, out, manifest, err.getvalue())


def validate(directory: Path) -> str:
    """`chatops manifests validate` on a folder; its output."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["manifests", "validate", str(directory)]) == 0
    return out.getvalue()
