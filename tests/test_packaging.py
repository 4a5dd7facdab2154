"""Packaging: one version, the licence, the data's attributions and the examples in the wheel.

The wheel is built once per module from a copy of the project (so that the build leaves nothing
in the checkout), offline: ``pip wheel --no-deps --no-build-isolation --no-index``.
"""

from __future__ import annotations

import email
import filecmp
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

import dpcurator
from dpcurator.cli import app
from dpcurator.datasets import DATASETS
from dpcurator.errors import InvalidParameterError
from dpcurator.examples import EXAMPLES, copy_example, example_path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "dpcurator"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("project")
    for name in ("pyproject.toml", "README.md", "LICENSE", "DATASETS.md"):
        shutil.copy2(ROOT / name, project / name)
    shutil.copytree(
        ROOT / "src",
        project / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.ledger.*"),
    )
    out = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    command += ["--no-index", "--quiet", "--wheel-dir", str(out), str(project)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    (built,) = out.glob("dpcurator-*.whl")
    return built


def _names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def _metadata(wheel: Path) -> email.message.Message:
    dist_info = f"dpcurator-{dpcurator.__version__}.dist-info"
    with zipfile.ZipFile(wheel) as archive:
        return email.message_from_bytes(archive.read(f"{dist_info}/METADATA"))


@pytest.mark.slow
def test_wheel_ships_licence_attributions_examples_and_data(wheel: Path) -> None:
    names = _names(wheel)
    dist_info = f"dpcurator-{dpcurator.__version__}.dist-info"
    expected = {
        f"{dist_info}/licenses/LICENSE",
        f"{dist_info}/licenses/DATASETS.md",
        "dpcurator/py.typed",
        *(f"dpcurator/examples/{name}.toml" for name in EXAMPLES),
        *(f"dpcurator/datasets/data/{name}.parquet" for name in DATASETS),
    }
    assert expected <= names, sorted(expected - names)
    assert not [n for n in names if n.startswith("tests/") or "/tests/" in n]
    assert not [n for n in names if ".ledger." in n or "__pycache__" in n]
    with zipfile.ZipFile(wheel) as archive:
        attributions = archive.read(f"{dist_info}/licenses/DATASETS.md")
    assert attributions == (ROOT / "DATASETS.md").read_bytes()


@pytest.mark.slow
def test_wheel_metadata_has_the_one_version_and_the_licence(wheel: Path) -> None:
    metadata = _metadata(wheel)
    assert metadata["Name"] == "dpcurator"
    assert metadata["Version"] == dpcurator.__version__
    assert metadata["License-Expression"] == "Apache-2.0"
    assert wheel.name.startswith(f"dpcurator-{dpcurator.__version__}-")
    with zipfile.ZipFile(wheel) as archive:
        entry_points = archive.read(
            f"dpcurator-{dpcurator.__version__}.dist-info/entry_points.txt"
        ).decode()
    assert "dpcurator = dpcurator.cli:main" in entry_points


@pytest.mark.slow
def test_examples_work_from_the_unpacked_wheel(wheel: Path, tmp_path: Path) -> None:
    """Outside the checkout: the shipped examples resolve their data inside the package."""
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "import dpcurator\n"
        "from dpcurator.curator import read_declaration\n"
        "from dpcurator.examples import copy_example, example_path\n"
        "from dpcurator.hierarchy import read_spec\n"
        "site = Path(sys.argv[1]).resolve()\n"
        "assert Path(dpcurator.__file__).resolve().is_relative_to(site), dpcurator.__file__\n"
        "source = Path(read_declaration(copy_example('cps', Path('mine'))).table.source)\n"
        "assert source.resolve().is_relative_to(site) and source.is_file(), source\n"
        "for name in ('census', 'flights', 'midwest_race'):\n"
        "    read_spec(example_path(name))\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run(
        [sys.executable, "-c", script, str(site)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
    assert (tmp_path / "mine" / "cps.toml").is_file()


def test_shipped_examples_match_the_repository() -> None:
    """examples/*.toml are shipped as copies: they must not drift."""
    repository = sorted(p.stem for p in (ROOT / "examples").glob("*.toml"))
    shipped = sorted(p.stem for p in (PACKAGE / "examples").glob("*.toml"))
    assert repository == shipped == sorted(EXAMPLES)
    fix = "copy examples/*.toml to src/dpcurator/examples/"
    for name in EXAMPLES:
        repository_copy = ROOT / "examples" / f"{name}.toml"
        assert filecmp.cmp(repository_copy, example_path(name), shallow=False), fix


def test_the_version_is_written_once() -> None:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        pyproject = tomllib.load(handle)
    assert "version" not in pyproject["project"]
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "dpcurator.__version__"
    }
    major, minor, patch = dpcurator.__version__.split(".")
    assert all(part.isdigit() for part in (major, minor, patch))


def test_licence_is_the_declared_apache_2() -> None:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        assert tomllib.load(handle)["project"]["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert len(text.splitlines()) > 150  # the full text, not a notice


def test_attributions_name_every_shipped_table() -> None:
    text = (ROOT / "DATASETS.md").read_text()
    for name in DATASETS:
        assert f"## `{name}.parquet`" in text
    assert text.count("- **Licence:**") == len(DATASETS)


def test_examples_refuse_unknown_names_and_copy(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match="must be one of census, cps"):
        example_path("cencus")
    copy = copy_example("census", tmp_path / "new")
    assert copy.read_bytes() == example_path("census").read_bytes()


def test_version_option() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"dpcurator {dpcurator.__version__}"
