from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpcurator.accounting import (
    GaussianEvent,
    PLDAccountant,
    PoissonSampledEvent,
    RDPAccountant,
)
from dpcurator.cli import app

runner = CliRunner()


def _json(args: list[str]) -> object:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_epsilon_matches_the_accountant() -> None:
    out = _json(
        ["epsilon", "--noise-multiplier", "1.0", "--sampling-rate", "0.01", "--steps", "1000"]
    )
    assert isinstance(out, dict)
    expected = (
        PLDAccountant()
        .compose(PoissonSampledEvent(0.01, GaussianEvent(1.0)), count=1000)
        .get_epsilon(1e-5)
    )
    assert out["accountant"] == "pld"
    assert out["epsilon"] == pytest.approx(expected, rel=1e-12)


def test_epsilon_text_names_the_accountant() -> None:
    result = runner.invoke(
        app, ["epsilon", "--noise-multiplier", "1.1", "--steps", "10", "--accountant", "rdp"]
    )
    assert result.exit_code == 0, result.output
    assert "rdp" in result.output and "epsilon =" in result.output


def test_noise_is_the_inverse_of_epsilon() -> None:
    out = _json(["noise", "--epsilon", "2", "--sampling-rate", "0.01", "--steps", "500"])
    assert isinstance(out, dict)
    z = out["noise_multiplier"]
    event = PoissonSampledEvent(0.01, GaussianEvent(z))
    assert PLDAccountant().compose(event, count=500).get_epsilon(1e-5) <= 2.0
    looser = PoissonSampledEvent(0.01, GaussianEvent(z * 0.98))
    assert PLDAccountant().compose(looser, count=500).get_epsilon(1e-5) > 2.0


def test_noise_for_laplace_lecture_example() -> None:
    out = _json(["noise", "--epsilon", "0.1", "--mechanism", "laplace"])
    assert isinstance(out, dict)
    assert out["scale"] == pytest.approx(10.0)


def test_compose_lists_every_accountant() -> None:
    out = _json(["compose", "gaussian:sigma=2,count=10", "--delta", "1e-6"])
    assert isinstance(out, list)
    by_name = {row["accountant"]: row["epsilon"] for row in out}
    rdp = RDPAccountant().compose(GaussianEvent(2.0), count=10).get_epsilon(1e-6)
    assert by_name["rdp"] == pytest.approx(rdp)
    assert by_name["pld"] <= by_name["rdp"] + 1e-9
    assert by_name["basic"] is None  # Gaussian has no pure guarantee without a per-event delta


def test_compose_from_file(tmp_path: Path) -> None:
    spec = tmp_path / "mechanisms.toml"
    spec.write_text(
        'delta = 1e-6\n[[mechanism]]\ntype = "laplace"\nepsilon = 0.1\ncount = 5\n'
        '[[mechanism]]\ntype = "pure"\nepsilon = 0.5\n'
    )
    out = _json(["compose", "--file", str(spec), "--accountant", "basic"])
    assert isinstance(out, dict)
    assert out["epsilon"] == pytest.approx(1.0)
    assert out["delta"] == 1e-6


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["epsilon", "--noise-multiplier", "-1"], "sigma"),
        (["epsilon", "--noise-multiplier", "1", "--delta", "2"], "delta"),
        (["compose", "nonsense:x=1"], "mechanism"),
        (["compose", "laplace:scale=1,bogus=2"], "bogus"),
        (["noise", "--epsilon", "0", "--mechanism", "laplace"], "epsilon"),
    ],
)
def test_bad_input_is_a_clear_error(args: list[str], needle: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "error" in result.output and needle in result.output


def test_tour_runs() -> None:
    result = runner.invoke(app, ["tour"])
    assert result.exit_code == 0, result.output
    assert "epsilon" in result.output


def test_query_and_ledger_help_say_whose_ledger_it_is() -> None:
    """The budget and ledger belong to the declaration: no command lets the analyst pick one."""
    query = runner.invoke(app, ["query", "--help"], env={"COLUMNS": "200"})
    assert query.exit_code == 0
    text = " ".join(query.output.split())
    assert "--ledger" not in text and "--table" in text
    assert "[ledger] section" in text and "key file" in text
    books = runner.invoke(app, ["ledger", "--help"], env={"COLUMNS": "200"})
    assert books.exit_code == 0
    text = " ".join(books.output.split())
    assert "--key" in text and "edited, cut short, replaced or deleted" in text
