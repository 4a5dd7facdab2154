"""Run every benchmark side by side with the peer libraries and print the figures.

Usage: ``make bench`` (sets up ``.venv-bench`` with the peers of
``benchmarks/requirements.txt``), or ``.venv-bench/bin/python benchmarks/run_all.py``.
Each script writes its JSON into ``benchmarks/results/``; BENCHMARKS.md records the figures
of one such run. ``bench_curator.py`` runs the DP-SQL peers (SmartNoise SQL, OpenDP, PipelineDP,
Tumult Analytics) each in its own venv under ``.venv-peers/``, made by
``benchmarks/peers/setup_peers.sh`` (``make bench`` runs it first).
"""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = [
    "bench_samplers.py",
    "bench_accountants.py",
    "bench_local.py",
    "bench_curator.py",
    "bench_accuracy.py",
    "bench_engines.py",
    "bench_hierarchy.py",
    "bench_audit.py",
    "bench_learn_erm.py",
    "bench_dpsgd.py",
    "bench_fedavg.py",
    "bench_service.py",
    "bench_startup.py",
]


def main() -> int:
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    print(f"python {platform.python_version()} on {platform.machine()}, {platform.node()}")
    status = 0
    for script in SCRIPTS:
        out = results / script.replace("bench_", "").replace(".py", ".json")
        print(f"\n=== {script} ===", flush=True)
        code = subprocess.call([sys.executable, str(HERE / script), "--out", str(out)])
        status = status or code
    return status


if __name__ == "__main__":
    sys.exit(main())
