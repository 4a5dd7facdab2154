"""Example declarations shipped with dpcurator, usable from an installed package.

The same TOML files as the repository's ``examples/`` folder, installed inside the package. Each
one reads a table shipped with dpcurator (:mod:`dpcurator.datasets`), so it works wherever it
is, or wherever it is copied.

API map
-------
:data:`EXAMPLES`
    The names: ``("census", "cps", "flights", "midwest_race")``.
:func:`example_path`
    Path of an installed example, e.g. for ``dpcurator release``, which writes nothing next to
    the file.
:func:`copy_example`
    Copy an example into a folder of yours: ``dpcurator query`` records its ledger and the
    steward's key next to the declaration, so query a copy, not the installed file.

Examples
--------
>>> from dpcurator.examples import EXAMPLES, example_path
>>> EXAMPLES
('census', 'cps', 'flights', 'midwest_race')
>>> example_path("census").name
'census.toml'
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Final

from dpcurator.errors import InvalidParameterError

__all__ = ["EXAMPLES", "copy_example", "example_path"]

EXAMPLES: Final[tuple[str, ...]] = ("census", "cps", "flights", "midwest_race")
"""Names of the shipped example declarations."""

_FOLDER: Final = Path(__file__).resolve().parent


def example_path(name: str) -> Path:
    """Path of an installed example declaration.

    Parameters
    ----------
    name : str
        One of :data:`EXAMPLES` (``"census"``, ``"cps"``, ``"flights"``, ``"midwest_race"``).

    Returns
    -------
    pathlib.Path
        The TOML file inside the installed package.

    Raises
    ------
    InvalidParameterError
        For a name that is not one of :data:`EXAMPLES`.

    Examples
    --------
    >>> example_path("cps").read_text().count('dataset = "cps"')
    1
    """
    if name not in EXAMPLES:
        raise InvalidParameterError("name", name, f"must be one of {', '.join(EXAMPLES)}")
    return _FOLDER / f"{name}.toml"


def copy_example(name: str, folder: str | Path) -> Path:
    """Copy an example declaration into ``folder`` (created if missing) and return the copy.

    Query the copy: ``dpcurator query`` keeps the declaration's ledger and the steward's key
    next to the TOML file, and the installed package is no place for them.

    Parameters
    ----------
    name : str
        One of :data:`EXAMPLES`.
    folder : str or pathlib.Path
        Where to write ``<name>.toml``. An existing file of that name is replaced.

    Returns
    -------
    pathlib.Path
        The copy.

    Raises
    ------
    InvalidParameterError
        For a name that is not one of :data:`EXAMPLES`.

    Examples
    --------
    >>> import tempfile
    >>> copy = copy_example("cps", tempfile.mkdtemp())
    >>> copy.name, copy.read_text() == example_path("cps").read_text()
    ('cps.toml', True)
    """
    source = example_path(name)
    target_folder = Path(folder)
    target_folder.mkdir(parents=True, exist_ok=True)
    target = target_folder / source.name
    shutil.copyfile(source, target)
    return target
