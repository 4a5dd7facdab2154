"""'Did you mean ...?': a suggestion for a misspelt name in an error shown on the command line.

Two kinds of errors name a set of valid values:

- an :class:`~dpcurator.errors.InvalidParameterError` whose requirement lists the allowed
  values ("accountant must be one of 'basic', ..., 'pld'; got 'pdl'");
- a refusal that quotes the unknown name and lists what is declared ("Column 'wage' is not
  declared in table 'cps'; declared columns: household_id, ..., wages. ...").

:func:`with_suggestion` appends the closest valid value (``difflib``; nothing when none is
close), so the message says what to type instead.

Examples
--------
>>> from dpcurator.errors import InvalidParameterError as Invalid
>>> with_suggestion(Invalid("accountant", "pdl", "must be one of 'rdp', 'zcdp', 'pld'"))
"accountant must be one of 'rdp', 'zcdp', 'pld'; got 'pdl'. Did you mean 'pld'?"
>>> with_suggestion(Invalid("only", "lapalce", "must list cases: laplace, gaussian, rr"))
"only must list cases: laplace, gaussian, rr; got 'lapalce'. Did you mean 'laplace'?"
>>> with_suggestion(ValueError("Column 'wage' is not declared; declared columns: age, wages."))
"Column 'wage' is not declared; declared columns: age, wages. Did you mean 'wages'?"
>>> with_suggestion(Invalid("epsilon", -1.0, "must be > 0"))
'epsilon must be > 0; got -1.0.'
>>> with_suggestion(Invalid("ledger", "pat", "must be a path"))
"ledger must be a path; got 'pat'."
"""

from __future__ import annotations

import difflib
import re

from dpcurator.errors import InvalidParameterError

__all__ = ["suggestion", "with_suggestion"]

_WORD = re.compile(r"[A-Za-z_][\w.-]*")
_CHOICES = re.compile(r"(?:\bone of\b|\bamong\b|\bmust be\b|:)(.*)", re.DOTALL)
_NOT_CHOICES = {"a", "an", "the", "or", "and", "of", "is", "are"}
_DECLARED = re.compile(r"'([^']+)' is not declared.*?declared[\w ]*:\s*([^.;]+)")


def suggestion(value: str, choices: list[str]) -> str | None:
    """Return the choice closest to ``value``, or None when none is close (or it is one)."""
    if value in choices:
        return None
    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.6)
    return close[0] if close else None


def _for_parameter(exc: InvalidParameterError) -> list[str]:
    found = _CHOICES.search(exc.requirement)
    if found is None:
        return []
    choices = [word for word in _WORD.findall(found.group(1)) if word not in _NOT_CHOICES]
    if len(choices) < 3:  # a phrase ("must be a path"), not a list of values
        return []
    values = exc.value if isinstance(exc.value, list | tuple) else [exc.value]
    return [
        best
        for value in values
        if isinstance(value, str) and (best := suggestion(value, choices)) is not None
    ]


def with_suggestion(exc: Exception) -> str:
    """Return the error's message, with "Did you mean ...?" when a valid value is close."""
    text = str(exc)
    if isinstance(exc, InvalidParameterError):
        found = _for_parameter(exc)
    else:
        declared = _DECLARED.search(text)
        found = []
        if declared is not None:
            choices = [name.strip() for name in declared.group(2).split(",")]
            best = suggestion(declared.group(1), choices)
            found = [best] if best is not None else []
    if not found:
        return text
    return f"{text} Did you mean {' or '.join(repr(name) for name in found)}?"
