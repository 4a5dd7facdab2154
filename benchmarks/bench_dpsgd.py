"""DP-SGD: dpcurator's ``DPSGD`` against Opacus on the same MLP (digits, Adult).

Run in the benchmark environment (Opacus 1.6.0 and torch 2.13.0 installed there):

    .venv-bench/bin/python benchmarks/bench_dpsgd.py [--seeds 3] [--quick]

For each data set and epsilon in (1, 3, 8) at delta = 1e-5:

* hyper-parameters (lot size, epochs, learning rate; SGD, clipping norm 1) are chosen on a
  validation split, separately for each library, each calibrating its noise multiplier for the
  target epsilon with its own default accountant (dpcurator: PLD; Opacus 1.6: PRV), one seed
  (splits train/validation/test: digits 70/10/20, Adult 60/20/20);
* the chosen settings are trained ``--seeds`` times and scored on the test split (mean and
  spread), with training throughput in examples per second (train time only: per-example
  gradients, clipping, noise, optimizer; no accounting) and seconds per epoch, best of the
  seeds; Opacus is also timed at dpcurator's settings (same lot size, same steps);
* for dpcurator's own run (its q, z and number of steps) the epsilon that each accountant
  reports: dpcurator PLD, dpcurator RDP, Opacus RDP, Opacus PRV (Opacus' default).

dpcurator runs with its secure noise (exact discrete Gaussian on a grid, the default) and,
for the throughput comparison, the float path. Both libraries use Poisson sampling and one torch
thread (the machine is shared; threads only add contention for a model this small). Hyper-
parameter tuning on the private training data is not accounted for (as in the figures it is
compared with). Non-private SGD on the same MLP gives the ceiling. Writes JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from dpcurator.accounting import (  # noqa: E402
    GaussianEvent,
    PLDAccountant,
    PoissonSampledEvent,
    RDPAccountant,
    dpsgd_noise_multiplier,
)
from dpcurator.learn._dpsgd import DPSGD  # noqa: E402
from dpcurator.noise import InsecureSeededSource  # noqa: E402

EPSILONS = (1.0, 3.0, 8.0)
DELTA = 1e-5
CLIP = 1.0


@dataclass
class Split:
    name: str
    X: torch.Tensor
    y: torch.Tensor
    X_val: torch.Tensor
    y_val: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor
    hidden: int
    grid: list[tuple[int, int, float]]  # (lot size, epochs, learning rate)


def split(
    X: np.ndarray, y: np.ndarray, train: float = 0.6, seed: int = 0
) -> tuple[torch.Tensor, ...]:
    """Train / validation / test (the last 20%), in a fixed random order."""
    order = np.random.default_rng(seed).permutation(len(y))  # a fixed split, not privacy noise
    X, y = X[order], y[order]
    a, b = int(train * len(y)), int(0.8 * len(y))
    t = [torch.tensor(v, dtype=torch.float32) for v in (X[:a], X[a:b], X[b:])]
    u = [torch.tensor(v, dtype=torch.long) for v in (y[:a], y[a:b], y[b:])]
    return t[0], u[0], t[1], u[1], t[2], u[2]


def digits(quick: bool) -> Split:
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    grid = [(b, e, lr) for b in (128, 256) for e in (20, 40) for lr in (0.5, 1.0)]
    data = split(X / 16.0, y, train=0.7)  # 1,257 / 180 / 360
    return Split("digits", *data, hidden=64, grid=grid[:2] if quick else grid)


def adult(quick: bool) -> Split:
    import pandas as pd

    from dpcurator.datasets import load_adult

    df = load_adult()
    y = (df["income"].str.strip().str.startswith(">50K")).to_numpy().astype(np.int64)
    # Public, declared scalings (no statistics of the private data).
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
    X = pd.concat([numeric, categorical], axis=1).to_numpy()
    grid = [(b, e, lr) for b in (512, 1024) for e in (5, 10) for lr in (0.5,)]
    return Split("adult", *split(X, y), hidden=32, grid=grid[:1] if quick else grid)


def mlp(data: Split) -> torch.nn.Module:
    d_in, classes = int(data.X.shape[1]), int(data.y.max()) + 1
    return torch.nn.Sequential(
        torch.nn.Linear(d_in, data.hidden), torch.nn.ReLU(), torch.nn.Linear(data.hidden, classes)
    )


def accuracy(model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float((model(X).argmax(1) == y).float().mean())


def run_dpcurator(
    data: Split, settings: tuple[int, int, float], eps: float, seed: int, noise: str = "secure"
) -> dict[str, Any]:
    lot, epochs, lr = settings
    n = int(data.X.shape[0])
    steps = epochs * max(1, round(n / lot))
    z = dpsgd_noise_multiplier(eps, DELTA, sampling_rate=lot / n, steps=steps)
    torch.manual_seed(seed)
    model = mlp(data)
    trainer = DPSGD(
        model,
        torch.optim.SGD(model.parameters(), lr=lr),
        loss_fn=torch.nn.functional.cross_entropy,
        max_grad_norm=CLIP,
        batch_size=lot,
        epochs=epochs,
        noise_multiplier=z,
        delta=DELTA,
        noise=noise,
        source=InsecureSeededSource(1000 + seed),
        progress=False,
    )
    start = time.perf_counter()
    trainer.fit(data.X, data.y)
    seconds = time.perf_counter() - start
    return {
        "val": accuracy(model, data.X_val, data.y_val),
        "test": accuracy(model, data.X_test, data.y_test),
        "seconds": seconds,
        "epochs": epochs,
        "n": n,
        "q": lot / n,
        "z": z,
        "steps": trainer.steps_,
        "epsilon": trainer.epsilon_,
    }


def run_opacus(
    data: Split, settings: tuple[int, int, float], eps: float, seed: int
) -> dict[str, Any]:
    lot, epochs, lr = settings
    from opacus import PrivacyEngine

    n = int(data.X.shape[0])
    torch.manual_seed(seed)
    model = mlp(data)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(data.X, data.y), batch_size=lot
    )
    engine = PrivacyEngine()  # accountant="prv", Opacus 1.6's default
    model, optimizer, loader = engine.make_private_with_epsilon(
        module=model,
        optimizer=optimizer,
        data_loader=loader,
        target_epsilon=eps,
        target_delta=DELTA,
        epochs=epochs,
        max_grad_norm=CLIP,
    )
    loss_fn = torch.nn.CrossEntropyLoss()
    start = time.perf_counter()
    for _ in range(epochs):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss_fn(model(xb), yb).backward()
            optimizer.step()
    seconds = time.perf_counter() - start
    return {
        "val": accuracy(model, data.X_val, data.y_val),
        "test": accuracy(model, data.X_test, data.y_test),
        "seconds": seconds,
        "epochs": epochs,
        "n": n,
        "z": optimizer.noise_multiplier,
        "epsilon": engine.get_epsilon(DELTA),
    }


def run_nonprivate(data: Split, seed: int) -> float:
    torch.manual_seed(seed)
    model = mlp(data)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    loss_fn = torch.nn.CrossEntropyLoss()
    n = int(data.X.shape[0])
    for epoch in range(40):
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100 + epoch))
        for i in range(0, n, 64):
            index = order[i : i + 64]
            optimizer.zero_grad()
            loss_fn(model(data.X[index]), data.y[index]).backward()
            optimizer.step()
    return accuracy(model, data.X_test, data.y_test)


def same_run_epsilons(q: float, z: float, steps: int) -> dict[str, float]:
    """Epsilon that each accountant reports for one and the same DP-SGD run."""
    from opacus.accountants import PRVAccountant as OpacusPRV
    from opacus.accountants import RDPAccountant as OpacusRDP

    event = PoissonSampledEvent(q, GaussianEvent(sigma=z))
    out = {
        "dpcurator_pld": PLDAccountant().compose(event, steps).get_epsilon(DELTA),
        "dpcurator_rdp": RDPAccountant().compose(event, steps).get_epsilon(DELTA),
    }
    for name, cls in (("opacus_rdp", OpacusRDP), ("opacus_prv", OpacusPRV)):
        accountant = cls()
        accountant.history = [(z, q, steps)]
        out[name] = float(accountant.get_epsilon(DELTA))
    return out


def summary(values: list[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(values),
        "std": statistics.pstdev(values) if len(values) > 1 else 0.0,
    }


def bench(data: Split, seeds: int) -> dict[str, Any]:
    out: dict[str, Any] = {"n_train": int(data.X.shape[0]), "epsilons": {}}
    out["nonprivate"] = summary([run_nonprivate(data, s) for s in range(seeds)])
    print(
        f"\n{data.name}: n = {out['n_train']}, non-private test accuracy "
        f"{out['nonprivate']['mean']:.3f}",
        flush=True,
    )
    for eps in EPSILONS:
        row: dict[str, Any] = {}
        for lib, runner in (("dpcurator", run_dpcurator), ("opacus", run_opacus)):
            tried = [(runner(data, hp, eps, 0)["val"], hp) for hp in data.grid]
            best = max(tried)[1]
            runs = [runner(data, best, eps, s) for s in range(seeds)]
            row[lib] = {
                "settings": {"lot": best[0], "epochs": best[1], "lr": best[2]},
                "test": summary([r["test"] for r in runs]),
                "examples_per_s": max(r["n"] * r["epochs"] / r["seconds"] for r in runs),
                "s_per_epoch": min(r["seconds"] / r["epochs"] for r in runs),
                "z": runs[0]["z"],
                "epsilon_reported": runs[0]["epsilon"],
            }
            if lib == "dpcurator":
                chosen = best
                first = runs[0]
                row["same_run"] = {
                    "q": first["q"],
                    "z": first["z"],
                    "steps": first["steps"],
                    **same_run_epsilons(first["q"], first["z"], first["steps"]),
                }
                floats = [run_dpcurator(data, best, eps, s, noise="float") for s in range(seeds)]
                row["dpcurator_float"] = {
                    "test": summary([r["test"] for r in floats]),
                    "examples_per_s": max(r["n"] * r["epochs"] / r["seconds"] for r in floats),
                    "s_per_epoch": min(r["seconds"] / r["epochs"] for r in floats),
                }
        # Throughput at identical settings: Opacus with dpcurator's chosen lot size and epochs.
        same = [run_opacus(data, chosen, eps, s) for s in range(seeds)]
        row["opacus_same_settings"] = {
            "examples_per_s": max(r["n"] * r["epochs"] / r["seconds"] for r in same),
            "s_per_epoch": min(r["seconds"] / r["epochs"] for r in same),
        }
        out["epsilons"][str(eps)] = row
        d, o, f, s = row["dpcurator"], row["opacus"], row["dpcurator_float"], row["same_run"]
        o_same = row["opacus_same_settings"]
        print(
            f"  eps {eps:g}: test acc dpcurator {d['test']['mean']:.3f} ± {d['test']['std']:.3f} "
            f"({d['settings']}), Opacus {o['test']['mean']:.3f} ± {o['test']['std']:.3f} "
            f"({o['settings']})\n"
            f"    examples/s: dpcurator secure {d['examples_per_s']:.0f} "
            f"({d['s_per_epoch'] * 1e3:.1f} ms/epoch), float {f['examples_per_s']:.0f}, "
            f"Opacus {o['examples_per_s']:.0f} ({o['s_per_epoch'] * 1e3:.1f} ms/epoch); at "
            f"dpcurator's settings Opacus {o_same['examples_per_s']:.0f} "
            f"({o_same['s_per_epoch'] * 1e3:.1f} ms/epoch)\n"
            f"    same run (q={s['q']:.4f}, z={s['z']:.3f}, {s['steps']} steps): eps "
            f"dpcurator PLD {s['dpcurator_pld']:.3f}, RDP {s['dpcurator_rdp']:.3f}; "
            f"Opacus PRV {s['opacus_prv']:.3f}, RDP {s['opacus_rdp']:.3f}",
            flush=True,
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny grids (smoke test)")
    parser.add_argument("--only", choices=("digits", "adult"), default=None)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/dpsgd.json")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")  # Opacus' deprecation and secure-mode notices
    torch.set_num_threads(1)
    import opacus

    results: dict[str, Any] = {
        "machine": f"{platform.machine()} {platform.node()}",
        "torch": torch.__version__,
        "opacus": opacus.__version__,
        "delta": DELTA,
        "clip": CLIP,
        "seeds": args.seeds,
        "data": {},
    }
    for loader in (digits, adult):
        data = loader(args.quick)
        if args.only and data.name != args.only:
            continue
        results["data"][data.name] = bench(data, args.seeds)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=float))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
