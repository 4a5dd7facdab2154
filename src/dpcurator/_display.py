r"""Small displays shared by results: short text for ``__repr__``, HTML tables for notebooks.

Results (query releases, hierarchical releases, frequency estimates) render themselves in
Jupyter through ``_repr_html_``, built here as a plain escaped ``<table>`` (no CSS, no
JavaScript), so that notebooks, documentation builds and e-mail all show them alike.

Examples
--------
>>> print(html_table(["value", "count"], [["a", "1 ± 2"]], title="T <1>", notes=["note"]))
<div class="dpcurator-result">
<p><strong>T &lt;1&gt;</strong></p>
<table>
<thead><tr><th>value</th><th>count</th></tr></thead>
<tbody>
<tr><td>a</td><td>1 ± 2</td></tr>
</tbody>
</table>
<p><small>note</small></p>
</div>
>>> shorten("SELECT   a,\n b FROM t", 12)
'SELECT a, b…'
"""

from __future__ import annotations

import html
from collections.abc import Sequence

__all__ = ["MAX_ROWS", "html_table", "shorten"]

MAX_ROWS = 50
"""Rows a notebook display shows before it says how many it left out."""


def shorten(text: str, width: int = 60) -> str:
    """Collapse whitespace and cut ``text`` to ``width`` characters (an ellipsis marks a cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def html_table(
    header: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    title: str | None = None,
    notes: Sequence[str] = (),
    total_rows: int | None = None,
) -> str:
    """Render an escaped HTML table with an optional title above and notes below.

    Parameters
    ----------
    header : sequence of str
        Column names.
    rows : sequence of sequences
        The cells, row by row (converted with ``str``).
    title : str, optional
        A bold line above the table.
    notes : sequence of str
        Lines below the table, in small print.
    total_rows : int, optional
        How many rows the whole result has, when ``rows`` shows only the first ones: a note
        says how many were left out.

    Returns
    -------
    str
        The HTML fragment.
    """

    def cells(tag: str, values: Sequence[object]) -> str:
        return "".join(f"<{tag}>{html.escape(str(v))}</{tag}>" for v in values)

    lines = ['<div class="dpcurator-result">']
    if title:
        lines.append(f"<p><strong>{html.escape(title)}</strong></p>")
    lines += ["<table>", f"<thead><tr>{cells('th', header)}</tr></thead>", "<tbody>"]
    lines += [f"<tr>{cells('td', row)}</tr>" for row in rows]
    lines += ["</tbody>", "</table>"]
    all_notes = list(notes)
    if total_rows is not None and total_rows > len(rows):
        all_notes.append(f"showing the first {len(rows)} of {total_rows:,} rows")
    lines += [f"<p><small>{html.escape(note)}</small></p>" for note in all_notes]
    lines.append("</div>")
    return "\n".join(lines)
