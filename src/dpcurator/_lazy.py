"""Lazy exports for package ``__init__`` modules (PEP 562), so that importing is cheap.

A package lists which private module defines each public name; the name's module is imported
the first time the name is used (``dpcurator.accounting.PLDAccountant`` imports SciPy then, not
at ``import dpcurator``). The package keeps the real imports under ``typing.TYPE_CHECKING`` for
type checkers and readers, and ``tests/test_public_api.py`` resolves every name of ``__all__``.

Examples
--------
>>> import types
>>> package = types.ModuleType("example_package")
>>> getattr_, dir_ = lazy_exports("example_package", {"sqrt": "math"}, namespace=vars(package))
>>> getattr_("sqrt")(9.0), "sqrt" in dir_()
(3.0, True)
>>> vars(package)["sqrt"].__name__  # cached: the next use does not come back here
'sqrt'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str], *, namespace: MutableMapping[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Make a package's module-level ``__getattr__`` and ``__dir__`` for lazily imported names.

    Parameters
    ----------
    package : str
        The package's name (``__name__``), for messages and relative module names.
    exports : mapping of str to str
        Public name -> module that defines it (absolute, or relative such as ``"._budget"``).
    namespace : mutable mapping
        The package's ``globals()``: a name is stored there once imported, so Python finds it
        without calling ``__getattr__`` again.

    Returns
    -------
    tuple of callables
        ``(__getattr__, __dir__)`` to assign at module level.
    """

    def module_getattr(name: str) -> Any:
        module_name = exports.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module_name, package), name)
        namespace[name] = value
        return value

    def module_dir() -> list[str]:
        return sorted({*namespace, *exports})

    return module_getattr, module_dir
