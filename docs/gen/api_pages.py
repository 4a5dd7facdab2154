"""Write the API reference pages (run by mkdocs-gen-files during the build)."""

from __future__ import annotations

import sys
from pathlib import Path

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).parent))
from api import api_pages, index, summary

pages = api_pages()
for page in pages:
    with mkdocs_gen_files.open(page.path, "w") as out:
        out.write(page.markdown())
with mkdocs_gen_files.open("api/index.md", "w") as out:
    out.write(index(pages))
with mkdocs_gen_files.open("api/SUMMARY.md", "w") as out:
    out.write(summary(pages))
