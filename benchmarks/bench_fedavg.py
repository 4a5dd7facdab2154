"""DP-FedAvg on Adult clients: test accuracy against epsilon, next to non-private FedAvg.

Run with either environment (only torch and dpcurator are needed):

    .venv-bench/bin/python benchmarks/bench_fedavg.py [--seeds 2] [--rounds 60]

Clients are people grouped by a natural key, (occupation, age): 843 non-IID clients of 1 to
166 people (a client's data is all its members' rows; user-level DP protects a whole group).
20% of the people are held out for testing. The model is a small MLP (hidden 32) on public,
declared feature scalings. Each setting runs ``--rounds`` rounds with about ``m = 100`` clients
per round, one local epoch of SGD (batch 16, lr 0.1) and server momentum 0.9:

* non-private FedAvg (the same fraction of clients per round, weighted average);
* DP-FedAvg, central (user-level) DP: Poisson sampling ``q = m / K``, updates clipped to
  ``S = 0.5``, exact discrete Gaussian noise calibrated by the PLD accountant for epsilon in
  (0.5, 1, 2, 4, 8) at delta = 1e-5 (McMahan et al. 2018);
* DP-FedAvg, local DP (each client noises its own update) at the same epsilons.

Prints mean and spread of the test accuracy over ``--seeds`` and the epsilon reported, and writes
JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from dpcurator.learn._federated import DPFedAvg, FedAvg  # noqa: E402
from dpcurator.noise import InsecureSeededSource  # noqa: E402

EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
DELTA = 1e-5
PER_ROUND = 100


def adult_clients() -> tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor, torch.Tensor]:
    import pandas as pd

    from dpcurator.datasets import load_adult

    df = load_adult()
    y = (df["income"].str.strip().str.startswith(">50K")).to_numpy().astype(np.int64)
    numeric = pd.DataFrame(
        {
            "age": df["age"].clip(17, 90) / 90.0,
            "education_num": df["education_num"].clip(1, 16) / 16.0,
            "hours": df["hours_per_week"].clip(1, 99) / 99.0,
            "gain": np.log1p(df["capital_gain"].clip(0, 99999)) / np.log1p(99999),
            "loss": np.log1p(df["capital_loss"].clip(0, 4356)) / np.log1p(4356),
        }
    )
    categorical = pd.get_dummies(
        df[["workclass", "marital_status", "occupation", "relationship", "race", "sex"]]
    ).astype(np.float64)
    X = pd.concat([numeric, categorical], axis=1).to_numpy(dtype=np.float32)
    test = np.random.default_rng(0).random(len(y)) < 0.2  # a fixed split, not privacy noise
    keys = df["occupation"].astype(str) + "|" + df["age"].astype(str)
    clients = []
    for _, index in pd.Series(np.arange(len(y)))[~test].groupby(keys[~test].to_numpy()):
        rows = index.to_numpy()
        clients.append((torch.from_numpy(X[rows]), torch.from_numpy(y[rows])))
    return clients, torch.from_numpy(X[test]), torch.from_numpy(y[test])


def mlp(d_in: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(d_in, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))


def accuracy(model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float((model(X).argmax(1) == y).float().mean())


COMMON: dict[str, Any] = {
    "loss_fn": torch.nn.functional.cross_entropy,
    "local_epochs": 1,
    "local_batch_size": 16,
    "local_lr": 0.1,
    "server_momentum": 0.9,
    "progress": False,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/fedavg.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    clients, X_test, y_test = adult_clients()
    count = len(clients)
    sizes = sorted(int(x.shape[0]) for x, _ in clients)
    print(
        f"Adult by (occupation, age): {count} clients, sizes {sizes[0]}..{sizes[-1]} "
        f"(median {sizes[len(sizes) // 2]}); {len(y_test)} test rows; {args.rounds} rounds, "
        f"about {PER_ROUND} clients per round"
    )
    results: dict[str, Any] = {"clients": count, "rounds": args.rounds, "per_round": PER_ROUND}

    def run(make: Any) -> dict[str, Any]:
        accs, eps, seconds = [], [], []
        for seed in range(args.seeds):
            torch.manual_seed(seed)
            model = mlp(int(X_test.shape[1]))
            start = time.perf_counter()
            trainer = make(model, InsecureSeededSource(seed)).fit(clients)
            seconds.append(time.perf_counter() - start)
            accs.append(accuracy(model, X_test, y_test))
            eps.append(getattr(trainer, "epsilon_", 0.0))
        return {
            "mean": statistics.fmean(accs),
            "std": statistics.pstdev(accs) if len(accs) > 1 else 0.0,
            "epsilon": max(eps),
            "seconds": min(seconds),
        }

    baseline = run(
        lambda model, source: FedAvg(
            model, rounds=args.rounds, fraction=PER_ROUND / count, source=source, **COMMON
        )
    )
    results["nonprivate"] = baseline
    print(f"  non-private FedAvg: {baseline['mean']:.3f} ± {baseline['std']:.3f}")
    for mode in ("central", "local"):
        results[mode] = {}
        for eps in EPSILONS:
            row = run(
                lambda model, source, eps=eps, mode=mode: DPFedAvg(
                    model,
                    rounds=args.rounds,
                    clients_per_round=PER_ROUND,
                    clip_norm=0.5,
                    target_epsilon=eps,
                    delta=DELTA,
                    mode=mode,
                    source=source,
                    **COMMON,
                )
            )
            results[mode][str(eps)] = row
            print(
                f"  DP-FedAvg {mode:7s} eps {eps:g}: {row['mean']:.3f} ± {row['std']:.3f} "
                f"(reported eps {row['epsilon']:.3f}, {row['seconds']:.1f} s)",
                flush=True,
            )
    majority = float(max(y_test.float().mean(), 1 - y_test.float().mean()))
    results["majority_class"] = majority
    print(f"  majority class: {majority:.3f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
