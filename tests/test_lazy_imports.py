"""Importing dpcurator is cheap: heavy modules load when the names that need them are used.

Each check runs in a fresh interpreter (``sys.modules`` of this one already holds everything).
Start-up times are measured in ``benchmarks/bench_startup.py``, not here.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import dpcurator
from dpcurator.errors import DPError, MissingDependencyError

SRC = Path(__file__).resolve().parents[1] / "src" / "dpcurator"
HEAVY = ("scipy", "pandas", "numpy", "sklearn", "torch", "matplotlib", "duckdb", "sqlglot")
LAZY_PACKAGES = ("dpcurator", "dpcurator.accounting")


def _loaded_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(filter(None, done.stdout.strip().split(",")))


def test_import_dpcurator_loads_no_heavy_module() -> None:
    assert _loaded_after("import dpcurator") == set()


def test_help_loads_no_heavy_module() -> None:
    code = (
        "from typer.testing import CliRunner\n"
        "from dpcurator.cli import app\n"
        "result = CliRunner().invoke(app, ['--help'])\n"
        "assert result.exit_code == 0 and 'audit' in result.output, result.output"
    )
    assert _loaded_after(code) == set()


def test_names_load_their_modules_when_used() -> None:
    """Negative control: the probe does see SciPy once a name that needs it is used."""
    assert _loaded_after("from dpcurator.accounting import Budget") == set()
    assert "scipy" in _loaded_after("from dpcurator.accounting import PLDAccountant")
    assert "scipy" in _loaded_after("import dpcurator.accounting as a\na.laplace_scale(1.0, 1.0)")
    assert _loaded_after("import dpcurator\nassert dpcurator.Budget(1.0).epsilon == 1.0") == set()


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_lazy_exports_match_the_type_checking_imports(name: str) -> None:
    """The run-time map (_EXPORTS) names the same modules as the imports type checkers read."""
    package = importlib.import_module(name)
    path = SRC.joinpath(*name.split(".")[1:], "__init__.py")
    tree = ast.parse(path.read_text())
    guarded: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.module
                for alias in statement.names:
                    guarded[alias.asname or alias.name] = statement.module
    exports = {
        key: importlib.util.resolve_name(module, name) for key, module in package._EXPORTS.items()
    }
    assert exports == guarded
    for attribute in package.__all__:
        assert hasattr(package, attribute), attribute
        assert attribute in dir(package)
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        _ = package.Nope


def test_learn_without_scikit_learn_says_what_to_install() -> None:
    code = (
        "import sys\n"
        "sys.modules['sklearn'] = None  # as if scikit-learn were not installed\n"
        "from dpcurator.errors import DPError, MissingDependencyError\n"
        "try:\n"
        "    import dpcurator.learn\n"
        "except MissingDependencyError as error:\n"
        "    assert isinstance(error, DPError) and isinstance(error, ImportError)\n"
        "    print(error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "dpcurator.learn needs scikit-learn" in done.stdout
    assert "pip install 'dpcurator[learn]'" in done.stdout


def test_missing_dependency_error_is_a_dp_error_and_an_import_error() -> None:
    error = MissingDependencyError("dpcurator.learn", "scikit-learn", "learn")
    assert isinstance(error, DPError) and isinstance(error, ImportError)
    assert error.name == "scikit-learn" and dpcurator.MissingDependencyError is type(error)
