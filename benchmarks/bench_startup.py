"""Start-up time: ``import dpcurator`` and ``dpcurator --help``, side by side, hyperfine-style.

Each command runs in a fresh interpreter (``subprocess``), ``--warmup`` times unmeasured, then
``--runs`` times measured (wall clock). The runs of all commands are interleaved (round robin),
so that a machine shared with other work slows them alike. Prints mean +- standard deviation,
median, min and max per command, and writes JSON (``--out``).

    .venv/bin/python benchmarks/bench_startup.py [--runs 30] [--warmup 3]

``--src DIR`` (repeatable) times the package found in ``DIR`` (a ``src/`` folder, put first on
``PYTHONPATH``) instead of the installed one; give it a checkout of an older commit to compare,
e.g. ``git archive HEAD | tar -x -C /tmp/old`` then ``--src /tmp/old/src --src src``.

Commands timed, for each source:

* ``python -c pass``: the interpreter alone (the floor);
* ``import typer, typer.rich_utils``: the command-line framework and its help renderer alone
  (the floor of any typer command's ``--help``);
* ``import dpcurator``;
* ``dpcurator --help`` (as ``python -m dpcurator --help``, output discarded);
* ``dpcurator --version``.

The script also checks, in one more interpreter per source, which heavy modules ``import
dpcurator`` and ``dpcurator --help`` load (SciPy, pandas, NumPy, scikit-learn, PyTorch,
matplotlib).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("scipy", "pandas", "numpy", "sklearn", "torch", "matplotlib", "duckdb", "sqlglot")

COMMANDS: dict[str, list[str]] = {
    "python -c pass": ["-c", "pass"],
    "import typer + rich help": ["-c", "import typer, typer.rich_utils"],
    "import dpcurator": ["-c", "import dpcurator"],
    "dpcurator --help": ["-m", "dpcurator", "--help"],
    "dpcurator --version": ["-m", "dpcurator", "--version"],
}

_PROBE = """
import sys
{setup}
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print(",".join(heavy) or "-")
"""


def _env(src: str | None) -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "100", "PYTHONDONTWRITEBYTECODE": "1"}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _once(args: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Wall time and exit status (an older package may not know ``--version``: status 2)."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - start, done.returncode


def _origin(env: dict[str, str]) -> str:
    code = "import dpcurator; print(dpcurator.__file__)"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return str(Path(done.stdout.strip()).parent)


def _heavy(env: dict[str, str]) -> dict[str, str]:
    setups = {
        "import dpcurator": "import dpcurator",
        "dpcurator --help": (
            "from typer.testing import CliRunner\n"
            "from dpcurator.cli import app\n"
            "CliRunner().invoke(app, ['--help'])"
        ),
    }
    found: dict[str, str] = {}
    for name, setup in setups.items():
        code = _PROBE.format(setup=setup, heavy=HEAVY)
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        found[name] = done.stdout.strip()
    return found


def _summary(times: list[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(times),
        "sd": statistics.stdev(times) if len(times) > 1 else 0.0,
        "median": statistics.median(times),
        "min": min(times),
        "max": max(times),
        "runs": len(times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--src", action="append", default=None, help="A src/ folder to time.")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/startup.json")
    options = parser.parse_args()
    sources: list[str | None] = list(options.src) if options.src else [None]
    envs = {src: _env(src) for src in sources}
    labels = {src: _origin(envs[src]) for src in sources}
    jobs = [(src, name) for src in sources for name in COMMANDS]
    for _ in range(options.warmup):
        for src, name in jobs:
            _once(COMMANDS[name], envs[src])
    times: dict[tuple[str | None, str], list[float]] = {job: [] for job in jobs}
    status: dict[tuple[str | None, str], int] = {}
    for _ in range(options.runs):
        for job in jobs:
            seconds, status[job] = _once(COMMANDS[job[1]], envs[job[0]])
            times[job].append(seconds)
    results: list[dict[str, Any]] = []
    for src in sources:
        heavy = _heavy(envs[src])
        print(f"\n{labels[src]}")
        print(f"{'command':<26} {'mean ± sd (s)':>16} {'median':>8} {'min':>7} {'max':>7}")
        for name in COMMANDS:
            stats = _summary(times[(src, name)])
            failed = f"  (exit status {status[(src, name)]})" if status[(src, name)] else ""
            print(
                f"{name:<26} {stats['mean']:>8.3f} ± {stats['sd']:<5.3f} {stats['median']:>8.3f}"
                f" {stats['min']:>7.3f} {stats['max']:>7.3f}{failed}"
            )
            results.append(
                {"package": labels[src], "command": name, "status": status[(src, name)], **stats}
            )
        for name, modules in heavy.items():
            print(f"heavy modules after {name}: {modules}")
            results.append({"package": labels[src], "heavy_after": name, "modules": modules})
    machine = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
    }
    print(f"\n{machine}")
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps({"machine": machine, "results": results}, indent=2))


if __name__ == "__main__":
    main()
