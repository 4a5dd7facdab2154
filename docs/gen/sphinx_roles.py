r"""A griffe extension: the Sphinx roles of dpcurator's docstrings, in the site's Markdown.

The docstrings are numpydoc, readable as plain text, and name other objects with Sphinx roles
(``:class:`Budget```, ``:func:`~dpcurator.noise.to_grid```) and formulas with ``:math:`` and
``.. math::``. For the site, a role becomes inline code of the name (its last component after
``~``), ``:math:`x``` becomes ``$x$`` and a ``.. math::`` directive a ``$$`` block, which
``pymdownx.arithmatex`` hands to MathJax.

Examples
--------
>>> convert(":class:`~dpcurator.accounting.Budget` and :math:`e^\\varepsilon`")
'`Budget` and $e^\\varepsilon$'
>>> print(convert("Text:\n\n.. math:: a = b\n    + c\n\nMore."))
Text:
<BLANKLINE>
$$
a = b
+ c
$$
<BLANKLINE>
More.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(
    r":(?:class|func|meth|mod|attr|data|exc|obj|py:\w+):`~?([^`<]*?)(?:\s*<[^`]*>)?`"
)
_MATH = re.compile(r":math:`([^`]*)`")


def _role(match: re.Match[str]) -> str:
    name = match.group(1).strip()
    return f"`{name.rsplit('.', 1)[-1] if '`~' in match.group(0) else name}`"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _math_blocks(text: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        stripped = lines[i].lstrip()
        if not stripped.startswith(".. math::"):
            out.append(lines[i])
            i += 1
            continue
        indent = lines[i][: _indent(lines[i])]
        end = i + 1
        while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > len(indent)):
            end += 1
        while end > i + 1 and not lines[end - 1].strip():
            end -= 1
        body = [stripped.removeprefix(".. math::"), *lines[i + 1 : end]]
        formula = [part.strip() for part in body if part.strip()]
        out += [f"{indent}$$", *(f"{indent}{part}" for part in formula), f"{indent}$$"]
        i = end
    return "\n".join(out)


def convert(text: str) -> str:
    """Return a docstring with its Sphinx roles and math in Markdown (see the module)."""
    text = _math_blocks(text)
    text = _MATH.sub(lambda match: f"${match.group(1).strip()}$", text)
    return _ROLE.sub(_role, text)


class SphinxRoles(griffe.Extension):
    """Rewrite every docstring griffe loads with :func:`convert`."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Convert the docstring of each object as it is loaded."""
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value)
