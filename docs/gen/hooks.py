"""MkDocs hooks: after the build, every public name must have its entry in the API reference."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from api import ApiPage, api_pages


def missing_entries(site: Path, pages: list[ApiPage]) -> list[str]:
    """Return the public names (``package.name``) without an entry on their built page."""
    missing = []
    for page in pages:
        html_path = site / "api" / page.package / "index.html"
        html = html_path.read_text(encoding="utf-8") if html_path.exists() else ""
        missing += [
            f"{page.package}.{name}"
            for name, identifier in zip(page.names, page.identifiers, strict=True)
            if f'id="{identifier}"' not in html
        ]
    return missing


def on_post_build(config: Any) -> None:
    """Fail the build if a name of some package's ``__all__`` has no entry on its page."""
    missing = missing_entries(Path(config["site_dir"]), api_pages())
    if missing:
        raise RuntimeError(
            f"{len(missing)} public names have no entry in the API reference: "
            + ", ".join(missing[:20])
        )
