"""``dpcurator local simulate`` (src/dpcurator/cli/_local.py), through typer's CliRunner.

The command always draws its privacy noise from the secure default source. Tests that look at
the numbers replace that default with a seeded source (fixture ``seeded_noise``), so that they
are reproducible; tests that only look at the shape of the output run with secure noise.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
from scipy import stats
from typer.testing import CliRunner

import dpcurator.noise._source as source_module
from dpcurator.cli._local import (
    PROTOCOLS,
    Population,
    Run,
    app,
    draw_population,
    make_population,
    summarize,
)
from dpcurator.local._protocol import FrequencyEstimate
from dpcurator.noise import InsecureSeededSource

runner = CliRunner()

# The registration the integrator adds to cli/_app.py: app.add_typer(local_app, name="local").
root = typer.Typer()
root.add_typer(app, name="local")


@root.command()
def _other() -> None:  # a second command, as in the real app (keeps "local" a subcommand)
    """Placeholder."""


SMALL = ["--devices", "20000", "--domain-size", "50", "--top", "5"]


@pytest.fixture
def seeded_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the protocols' default source a seeded one, for reproducible numbers."""
    monkeypatch.setattr(source_module, "_DEFAULT_SOURCE", InsecureSeededSource(2024))


def _run(args: list[str]) -> Any:
    result = runner.invoke(root, ["local", "simulate", *args])
    assert result.exit_code == 0, result.output
    return result


def _json(args: list[str]) -> dict[str, Any]:
    out = json.loads(_run([*args, "--json"]).output)
    assert isinstance(out, dict)
    return out


# ---- the command as a user sees it -------------------------------------------------------------


def test_help_lists_simulate() -> None:
    result = runner.invoke(root, ["local", "--help"])
    assert result.exit_code == 0
    assert "simulate" in result.output


def test_text_table_and_plot(tmp_path: Path) -> None:
    plot = tmp_path / "out" / "sim.png"
    result = _run(["--protocol", "olh", "--epsilon", "1", *SMALL, "--plot", str(plot)])
    text = result.output
    assert "OptimizedLocalHashing(epsilon=1, domain_size=50" in text
    assert "20,000 devices" in text and "domain of 50 values" in text
    for header in ("rank", "value", "true", "estimate", "95% interval", "covers"):
        assert header in text
    for name in ("SMITH", "JOHNSON", "WILLIAMS"):  # the most frequent surnames head the table
        assert name in text
    assert "95 % intervals cover" in text
    assert f"plot written to {plot}" in text.replace("\n", "")
    data = plot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_default_plot_path_is_local_simulate_png(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _run(["--protocol", "grr", *SMALL, "--sweep", ""])
    assert (tmp_path / "local_simulate.png").read_bytes()[:4] == b"\x89PNG"


def test_missing_matplotlib_is_reported_and_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    plot = tmp_path / "never.png"
    result = _run(["--protocol", "grr", *SMALL, "--plot", str(plot)])
    assert "matplotlib is not installed" in result.output
    assert "dpcurator[plot]" in result.output
    assert not plot.exists()
    out = _json(["--protocol", "grr", *SMALL, "--plot", str(plot)])
    assert out["plot"] is None


def test_no_plot_writes_nothing(tmp_path: Path) -> None:
    plot = tmp_path / "none.png"
    out = _json(["--protocol", "hr", *SMALL, "--plot", str(plot), "--no-plot"])
    assert out["plot"] is None and out["sweep"] == []
    assert not plot.exists()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_protocol_runs(protocol: str) -> None:
    args = ["--protocol", protocol, "--epsilon", "2", "--devices", "5000", "--domain-size", "20"]
    out = _json([*args, "--top", "4", "--no-plot"])
    assert out["devices"] == 5000 and out["domain_size"] == 20
    assert 2.0 - 1e-9 < out["epsilon"] <= 2.0  # the epsilon actually spent, never above
    assert len(out["rows"]) == 4
    assert math.isfinite(out["rmse"])
    for row in out["rows"]:  # strict JSON: a value a decoder did not estimate has no interval
        assert (row["std"] is None) == (row["low"] is None) == (row["high"] is None)


def test_auto_picks_by_domain_size() -> None:
    # Wang et al. 2017: GRR iff d < 3 e^eps + 2 (10.15 at eps = 1).
    small = _json(["--protocol", "auto", "--devices", "2000", "--domain-size", "10", "--no-plot"])
    large = _json(["--protocol", "auto", "--devices", "2000", "--domain-size", "11", "--no-plot"])
    assert small["protocol"].startswith("GeneralizedRandomizedResponse")
    assert not large["protocol"].startswith("GeneralizedRandomizedResponse")


def test_pet_names() -> None:
    out = _json(["--data", "pets", "--protocol", "grr", *SMALL, "--no-plot"])
    assert [row["value"] for row in out["rows"][:3]] == ["Lucy", "Charlie", "Luna"]
    assert "Seattle" in out["data"]


# ---- the numbers -------------------------------------------------------------------------------


@pytest.mark.usefixtures("seeded_noise")
@pytest.mark.statistical
def test_json_rows_match_the_population_and_the_intervals() -> None:
    # Tolerance: every interval is a 95 % normal interval; over the 50 values the coverage is
    # binomial(50, 0.95) (mean 47.5, sd 1.5), so at least 42 must cover; each of the top rows
    # lies within 5 of its standard errors.
    out = _json(["--protocol", "oue", "--epsilon", "2", *SMALL, "--no-plot"])
    population = make_population("surnames", 50, 20000, 0)
    rows = out["rows"]
    order = np.argsort(-population.counts, kind="stable")[:5]
    assert [row["true"] for row in rows] == population.counts[order].tolist()
    assert [row["value"] for row in rows] == [population.labels[i] for i in order]
    for row in rows:
        assert row["low"] == pytest.approx(row["estimate"] - 1.959964 * row["std"])
        assert row["high"] == pytest.approx(row["estimate"] + 1.959964 * row["std"])
        assert row["covered"] == (row["low"] <= row["true"] <= row["high"])
        assert abs(row["estimate"] - row["true"]) < 5 * row["std"]
    assert out["coverage"] >= 42 / 50
    assert out["rmse"] == pytest.approx(out["predicted_rmse"], rel=0.35)


@pytest.mark.usefixtures("seeded_noise")
def test_sweep_points_fall_with_epsilon(tmp_path: Path) -> None:
    args = ["--protocol", "grr", "--epsilon", "1", *SMALL, "--plot", str(tmp_path / "s.png")]
    out = _json([*args, "--sweep", "4,0.5,1,2"])
    sweep = out["sweep"]
    assert [p["epsilon"] for p in sweep] == [0.5, 1.0, 2.0, 4.0]
    predicted = [p["predicted_rmse"] for p in sweep]
    assert predicted == sorted(predicted, reverse=True)  # closed form: decreasing in epsilon
    measured = [p["rmse"] for p in sweep]
    assert measured[0] > measured[-1] * 3  # GRR at d = 50: about 7 times smaller at eps 4
    assert sweep[1]["rmse"] == out["rmse"]  # the main run is reused at its own epsilon
    assert out["plot"] == str(tmp_path / "s.png")


def test_population_is_reproducible_from_its_seed() -> None:
    first = _json(["--protocol", "hr", *SMALL, "--no-plot", "--seed-population", "7"])
    again = _json(["--protocol", "hr", *SMALL, "--no-plot", "--seed-population", "7"])
    other = _json(["--protocol", "hr", *SMALL, "--no-plot", "--seed-population", "8"])
    truth = [row["true"] for row in first["rows"]]
    assert truth == [row["true"] for row in again["rows"]]
    assert truth != [row["true"] for row in other["rows"]]


@pytest.mark.statistical
def test_population_follows_the_frequencies() -> None:
    # Chi-square goodness of fit of 200,000 draws over 20 weights, p > 1e-4; negative control:
    # the same counts against uniform weights are rejected (p < 1e-6).
    weights = np.linspace(20.0, 1.0, 20)
    values = draw_population(weights, 200_000, InsecureSeededSource(3))
    counts = np.bincount(values, minlength=20)
    expected = 200_000 * weights / weights.sum()
    assert stats.chisquare(counts, expected).pvalue > 1e-4
    assert stats.chisquare(counts, np.full(20, 10_000.0)).pvalue < 1e-6


def test_summary_arithmetic() -> None:
    population = Population(
        labels=["a", "b", "c"],
        values=np.array([0] * 6 + [1] * 3 + [2], dtype=np.int64),
        counts=np.array([6, 3, 1]),
        source="test",
    )
    estimate = FrequencyEstimate(
        counts=np.array([6.5, 0.5, 3.0]), variances=np.array([1.0, 1.0, np.nan]), n=10
    )
    summary = summarize(population, Run("P", 1.0, estimate), top=2)
    assert [row["value"] for row in summary["rows"]] == ["a", "b"]
    assert [row["covered"] for row in summary["rows"]] == [True, False]  # |0.5 - 3| > 1.96
    assert summary["rmse"] == pytest.approx(math.sqrt((0.25 + 6.25 + 4.0) / 3))
    assert summary["predicted_rmse"] == pytest.approx(1.0)  # only estimated values count
    assert summary["coverage"] == pytest.approx(0.5)
    assert summary["top_recall"] == pytest.approx(0.5)  # estimated top 2: a and c


# ---- bad options -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--protocol", "laplace"], "protocol must be one of grr, sue"),
        (["--data", "adult"], "data must be one of surnames, pets"),
        (["--epsilon", "0"], "epsilon must be > 0"),
        (["--devices", "0"], "devices must be >= 1"),
        (["--domain-size", "1"], "domain_size must be >= 2"),
        (["--domain-size", "20000"], "domain_size must be <= 18839"),
        (["--top", "0"], "top must be in [1, domain_size"),
        (["--sweep", "1,x"], "sweep must be comma-separated numbers"),
        (["--sweep", "1,-2"], "sweep must hold epsilons > 0"),
        (["--seed-population", "-1"], "seed_population must be >= 0"),
    ],
)
def test_bad_options_exit_2_naming_the_option(args: list[str], message: str) -> None:
    result = runner.invoke(root, ["local", "simulate", "--devices", "100", *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
