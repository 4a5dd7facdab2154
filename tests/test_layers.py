"""Architecture rules of DESIGN.md, checked on the source: layers import downward only, and no
module outside ``dpcurator.noise`` draws randomness."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "dpcurator"

LAYERS = {
    "errors": 0,
    "_validation": 0,
    "_stats": 0,
    "_display": 0,  # reprs and notebook tables of results
    "_lazy": 0,  # lazy exports of the packages' __init__ modules
    "datasets": 0,
    "examples": 0,  # shipped example declarations (data)
    "noise": 1,
    "accounting": 2,
    "mechanisms": 3,
    "curator": 4,
    "hierarchy": 4,
    "learn": 4,
    "local": 4,
    "synth": 4,  # synthetic data (issue 16)
    "networks": 4,  # constraint-based DP for power flow and transit planning (issue 18)
    "attacks": 5,
    "audit": 5,
    "server": 6,
    "service": 6,
    "client": 6,
    "cli": 6,
    "__main__": 7,
}
# Pairs that the layer order allows but the design forbids: accounting draws no randomness.
FORBIDDEN = {("accounting", "noise")}
# Pairs within one layer that the design allows: hierarchical releases read their data through
# the curator's declarations (Table) and engine (issue 4).
# The service (issue 15) speaks the client's wire format and errors; the command line runs both.
ALLOWED = {
    ("hierarchy", "curator"),
    ("synth", "curator"),  # marginals measured by the curator's plans and engine (issue 16)
    ("networks", "hierarchy"),  # CBDP reuses the projection and the integer post-processing
    ("service", "client"),
    ("cli", "service"),
    ("cli", "client"),
}

RANDOMNESS = re.compile(
    r"np\.random|numpy\.random|default_rng|^\s*import random\b|^\s*from random import|"
    r"\bsecrets\b|os\.urandom|\.words\(",  # raw source words: samplers live in noise only
    re.MULTILINE,
)


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p.name != "__init__.py" or p.parent != SRC)


def _package(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def _imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "dpcurator" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_point_downward(path: Path) -> None:
    package = _package(path)
    assert package in LAYERS, f"{package} has no layer in DESIGN.md; add it to LAYERS"
    for target in _imported_packages(path) - {package}:
        assert target in LAYERS, f"{path} imports unknown package dpcurator.{target}"
        allowed = (package, target) in ALLOWED
        assert LAYERS[target] < LAYERS[package] or LAYERS[target] == 0 or allowed, (
            f"{path} ({package}, layer {LAYERS[package]}) imports dpcurator.{target} "
            f"(layer {LAYERS[target]}): layers import downward only"
        )
        assert (package, target) not in FORBIDDEN, f"{path}: {package} must not import {target}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_randomness_only_in_noise(path: Path) -> None:
    if _package(path) == "noise":
        return
    hits = RANDOMNESS.findall(path.read_text())
    assert not hits, f"{path} draws randomness outside dpcurator.noise: {hits}"


def test_rules_catch_violations(tmp_path: Path) -> None:
    """Negative control: the checks do flag a module that breaks them."""
    bad = tmp_path / "bad.py"
    bad.write_text("import numpy as np\nfrom dpcurator.mechanisms import x\nnp.random.laplace()\n")
    assert RANDOMNESS.findall(bad.read_text())
    assert RANDOMNESS.findall("bits = source.words(8)\n")
    assert "mechanisms" in _imported_packages(bad)
