"""Reading the document `chatops manifests import-openapi` is given: OpenAPI 3.x, or Swagger 2.0
converted in process (`swagger2`); split over files or whole (`openapi_files`).

Files split over a folder are bundled first, in their own dialect (a Swagger 2.0 model file
belongs under `definitions`), then converted. Documents over `PROGRESS_MIN_BYTES` report
progress as they go.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from connectors.manifest import ManifestError
from connectors.openapi_doc import Progress, parse_spec_text
from connectors.openapi_files import bundle, has_file_refs
from connectors.swagger2 import is_swagger2, swagger_to_openapi

PROGRESS_MIN_BYTES = 2_000_000


def load_spec(
    path: Path, *, progress: Progress | None = None, notes: list[str] | None = None
) -> dict[str, Any]:
    """An OpenAPI 3.x document from a JSON or YAML file; `notes` gets what a conversion lost."""
    try:
        size = path.stat().st_size
        if progress is not None and size >= PROGRESS_MIN_BYTES:
            progress(f"reading {path.name} ({size / 1_000_000:.1f} MB)")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read: {exc.strerror}", path=path) from None
    except UnicodeDecodeError:
        raise ManifestError(f"{path}: not UTF-8 text", path=path) from None
    data = parse_spec_text(text, path)
    swagger = is_swagger2(data)
    if not isinstance(data, dict) or not (swagger or str(data.get("openapi", "")).startswith("3.")):
        raise ManifestError(
            f"{path}: not an OpenAPI 3.x or Swagger 2.0 document "
            "(no 'openapi: 3.x' or 'swagger: \"2.0\"')",
            path=path,
        )
    if has_file_refs(text):
        schemas_at = ("definitions",) if swagger else ("components", "schemas")
        data = bundle(path, data, schemas_at=schemas_at)
    if swagger:
        lost: list[str] = []
        data = swagger_to_openapi(data, lost)
        if notes is not None:
            notes.append("a Swagger 2.0 document: converted to OpenAPI 3.0 to import it")
            notes.extend(lost)
    return data
