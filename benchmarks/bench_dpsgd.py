"""DP-SGD: dpcurator's ``DPSGD`` against Opacus on the same MLP (digits, Adult).

Run in the benchmark environment (Opacus 1.6.0 and torch 2.13.0 installed there):

    .venv-bench/bin/python benchmarks/bench_dpsgd.py [--seeds 3] [--quick] [--only digits]

For each data set and epsilon in (1, 3, 8) at delta = 1e-5:

* **Tuning, the same for both libraries.** One grid of hyper-parameters (activation ReLU or
  tanh, Papernot et al. 2021; DP-SGD or DP-Adam with its learning rate and clipping norm; lot
  size; epochs), searched separately for each library on the validation split (mean
  validation accuracy over 2 seeds on digits, 1 on Adult; the test split is never looked at;
  ties go to the first grid point), each
  library calibrating its noise multiplier for the target epsilon with its own default
  accountant (dpcurator: PLD; Opacus 1.6: PRV). Lot sizes are ``ceil(n / k)`` for ``k`` steps
  per epoch, so that Opacus (whose Poisson rate is ``1 / ceil(n / lot)``) and dpcurator
  (``lot / n``, ``round(n / lot)`` steps) take the same steps at almost the same rate. Splits
  train/validation/test: digits 70/10/20, Adult 60/20/20.
* **Accuracy.** The chosen settings are trained ``--seeds`` times and scored on the test split
  (mean and spread). dpcurator runs its default secure noise (the exact discrete Gaussian on
  the grid), from a seeded source for reproducibility.
* **Throughput**, side by side: at each library's chosen settings, dpcurator (secure noise from
  the seeded source, secure noise from the OS CSPRNG, which is the default, and the float
  path) and Opacus are timed in turns, ``--repeats`` rounds, best of each (examples per second
  of training: per-example gradients, clipping, noise, optimizer, sampling; no accounting).
* **Accounting**, for dpcurator's own run (its q, z and number of steps): the epsilon that each
  accountant reports: dpcurator PLD, dpcurator RDP, Opacus RDP, Opacus PRV (Opacus' default).

Both libraries use Poisson sampling and one torch thread (the machine is shared; threads only
add contention for a model this small). Hyper-parameter tuning on the private training data is
not accounted for (as in the figures it is compared with). Non-private SGD on the same MLP gives
the ceiling. Writes JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
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
from dpcurator.noise import InsecureSeededSource, RandomSource  # noqa: E402

EPSILONS = (1.0, 3.0, 8.0)
DELTA = 1e-5


@dataclass(frozen=True)
class Settings:
    """One point of the hyper-parameter grid."""

    activation: str  # "relu" or "tanh"
    optimizer: str  # "sgd" or "adam"
    lr: float
    clip: float
    lot: int
    epochs: int

    def label(self) -> str:
        return (
            f"{self.activation}, {self.optimizer} lr {self.lr:g}, C {self.clip:g}, lot "
            f"{self.lot}, {self.epochs} ep"
        )


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
    grid: list[Settings]
    tune_seeds: int


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


def grid(
    n: int,
    optimizers: tuple[tuple[str, float, float], ...],
    schedules: tuple[tuple[int, int], ...],
    activations: tuple[str, ...] = ("relu", "tanh"),
) -> list[Settings]:
    """All combinations of activation, (optimizer, learning rate, clipping norm), schedule.

    A schedule is (steps per epoch ``k``, epochs), with lot ``ceil(n / k)``.
    """
    return [
        Settings(activation, optimizer, lr, clip, math.ceil(n / k), epochs)
        for activation in activations
        for optimizer, lr, clip in optimizers
        for k, epochs in schedules
    ]


def digits(quick: bool) -> Split:
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    data = split(X / 16.0, y, train=0.7)  # 1,257 / 180 / 360
    n = int(data[0].shape[0])
    if quick:
        settings = grid(n, (("sgd", 2.0, 1.0), ("adam", 0.02, 0.2)), ((5, 20),), ("tanh",))
    else:
        optimizers = (
            ("sgd", 0.5, 1.0),
            ("sgd", 2.0, 1.0),
            ("adam", 0.01, 0.2),
            ("adam", 0.02, 0.2),
        )
        settings = grid(n, optimizers, ((5, 40), (2, 100)))
    return Split("digits", *data, hidden=64, grid=settings, tune_seeds=2)


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
    data = split(X, y)
    n = int(data[0].shape[0])
    schedules = ((38, 5),) if quick else ((38, 5), (19, 10))
    settings = grid(n, (("sgd", 0.5, 1.0),), schedules)
    return Split("adult", *data, hidden=32, grid=settings[:1] if quick else settings, tune_seeds=1)


def mlp(data: Split, activation: str) -> torch.nn.Module:
    d_in, classes = int(data.X.shape[1]), int(data.y.max()) + 1
    act = torch.nn.Tanh() if activation == "tanh" else torch.nn.ReLU()
    return torch.nn.Sequential(
        torch.nn.Linear(d_in, data.hidden), act, torch.nn.Linear(data.hidden, classes)
    )


def optimizer_for(model: torch.nn.Module, settings: Settings) -> torch.optim.Optimizer:
    if settings.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=settings.lr)
    return torch.optim.SGD(model.parameters(), lr=settings.lr)


def accuracy(model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float((model(X).argmax(1) == y).float().mean())


def run_dpcurator(
    data: Split,
    settings: Settings,
    eps: float,
    seed: int,
    *,
    noise: str = "secure",
    source: RandomSource | None = None,
) -> dict[str, Any]:
    n = int(data.X.shape[0])
    steps = settings.epochs * max(1, round(n / settings.lot))
    z = dpsgd_noise_multiplier(eps, DELTA, sampling_rate=settings.lot / n, steps=steps)
    torch.manual_seed(seed)
    model = mlp(data, settings.activation)
    trainer = DPSGD(
        model,
        optimizer_for(model, settings),
        loss_fn=torch.nn.functional.cross_entropy,
        max_grad_norm=settings.clip,
        batch_size=settings.lot,
        epochs=settings.epochs,
        noise_multiplier=z,
        delta=DELTA,
        noise=noise,
        source=InsecureSeededSource(1000 + seed) if source is None else source,
        progress=False,
    )
    start = time.perf_counter()
    trainer.fit(data.X, data.y)
    seconds = time.perf_counter() - start
    return {
        "val": accuracy(model, data.X_val, data.y_val),
        "test": accuracy(model, data.X_test, data.y_test),
        "examples_per_s": n * settings.epochs / seconds,
        "q": settings.lot / n,
        "z": z,
        "steps": trainer.steps_,
        "epsilon": trainer.epsilon_,
    }


def run_opacus(data: Split, settings: Settings, eps: float, seed: int) -> dict[str, Any]:
    from opacus import PrivacyEngine

    n = int(data.X.shape[0])
    torch.manual_seed(seed)
    model = mlp(data, settings.activation)
    optimizer = optimizer_for(model, settings)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(data.X, data.y), batch_size=settings.lot
    )
    engine = PrivacyEngine()  # accountant="prv", Opacus 1.6's default
    model, optimizer, loader = engine.make_private_with_epsilon(
        module=model,
        optimizer=optimizer,
        data_loader=loader,
        target_epsilon=eps,
        target_delta=DELTA,
        epochs=settings.epochs,
        max_grad_norm=settings.clip,
    )
    loss_fn = torch.nn.CrossEntropyLoss()
    start = time.perf_counter()
    for _ in range(settings.epochs):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss_fn(model(xb), yb).backward()
            optimizer.step()
    seconds = time.perf_counter() - start
    return {
        "val": accuracy(model, data.X_val, data.y_val),
        "test": accuracy(model, data.X_test, data.y_test),
        "examples_per_s": n * settings.epochs / seconds,
        "z": optimizer.noise_multiplier,
        "epsilon": engine.get_epsilon(DELTA),
    }


def run_nonprivate(data: Split, seed: int) -> float:
    torch.manual_seed(seed)
    model = mlp(data, "relu")
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


Runner = Callable[[Split, Settings, float, int], dict[str, Any]]


def tune(runner: Runner, data: Split, eps: float, seeds: int) -> tuple[Settings, float]:
    """The grid point with the best mean validation accuracy (ties: the first)."""
    scored = [
        (statistics.fmean(runner(data, s, eps, 100 + seed)["val"] for seed in range(seeds)), i)
        for i, s in enumerate(data.grid)
    ]
    best_val, index = max(scored, key=lambda pair: (pair[0], -pair[1]))
    return data.grid[index], best_val


def throughput(data: Split, settings: Settings, eps: float, repeats: int) -> dict[str, float]:
    """Examples per second at the same settings, libraries timed in turns, best of each."""
    from dpcurator.noise import SecureRandomSource

    runs: dict[str, Callable[[], dict[str, Any]]] = {
        "dpcurator_secure": lambda: run_dpcurator(data, settings, eps, 0),
        "dpcurator_secure_os": lambda: run_dpcurator(
            data, settings, eps, 0, source=SecureRandomSource()
        ),
        "dpcurator_float": lambda: run_dpcurator(data, settings, eps, 0, noise="float"),
        "opacus": lambda: run_opacus(data, settings, eps, 0),
    }
    best = dict.fromkeys(runs, 0.0)
    for _ in range(repeats):
        for name, run in runs.items():
            best[name] = max(best[name], run()["examples_per_s"])
    return best


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


def bench(data: Split, seeds: int, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "n_train": int(data.X.shape[0]),
        "grid": [asdict(s) for s in data.grid],
        "tune_seeds": data.tune_seeds,
        "epsilons": {},
    }
    out["nonprivate"] = summary([run_nonprivate(data, s) for s in range(seeds)])
    print(
        f"\n{data.name}: n = {out['n_train']}, {len(data.grid)} settings tried per library and "
        f"epsilon, non-private test accuracy {out['nonprivate']['mean']:.3f}",
        flush=True,
    )
    for eps in EPSILONS:
        row: dict[str, Any] = {}
        for lib, runner in (("dpcurator", run_dpcurator), ("opacus", run_opacus)):
            best, val = tune(runner, data, eps, data.tune_seeds)
            runs = [runner(data, best, eps, s) for s in range(seeds)]
            row[lib] = {
                "settings": asdict(best),
                "validation": val,
                "test": summary([r["test"] for r in runs]),
                "z": runs[0]["z"],
                "epsilon_reported": runs[0]["epsilon"],
            }
            if lib == "dpcurator":
                first = runs[0]
                row["same_run"] = {
                    "q": first["q"],
                    "z": first["z"],
                    "steps": first["steps"],
                    **same_run_epsilons(first["q"], first["z"], first["steps"]),
                }
        chosen = {Settings(**row[lib]["settings"]) for lib in ("dpcurator", "opacus")}
        row["throughput"] = [
            {"settings": asdict(s), **throughput(data, s, eps, repeats)}
            for s in sorted(chosen, key=Settings.label)
        ]
        out["epsilons"][str(eps)] = row
        report(eps, row)
    return out


def report(eps: float, row: dict[str, Any]) -> None:
    d, o, s = row["dpcurator"], row["opacus"], row["same_run"]
    print(
        f"  eps {eps:g}: test acc dpcurator {d['test']['mean']:.3f} ± {d['test']['std']:.3f} "
        f"({Settings(**d['settings']).label()}; val {d['validation']:.3f}), Opacus "
        f"{o['test']['mean']:.3f} ± {o['test']['std']:.3f} "
        f"({Settings(**o['settings']).label()}; val {o['validation']:.3f})\n"
        f"    same run (q={s['q']:.4f}, z={s['z']:.3f}, {s['steps']} steps): eps "
        f"dpcurator PLD {s['dpcurator_pld']:.3f}, RDP {s['dpcurator_rdp']:.3f}; "
        f"Opacus PRV {s['opacus_prv']:.3f}, RDP {s['opacus_rdp']:.3f}",
        flush=True,
    )
    for t in row["throughput"]:
        ratio = t["dpcurator_secure_os"] / t["opacus"]
        print(
            f"    examples/s at {Settings(**t['settings']).label()}: dpcurator secure "
            f"{t['dpcurator_secure']:.0f} (OS CSPRNG {t['dpcurator_secure_os']:.0f}), float "
            f"{t['dpcurator_float']:.0f}, Opacus {t['opacus']:.0f}; default/Opacus "
            f"{ratio:.2f}x, seeded secure/Opacus {t['dpcurator_secure'] / t['opacus']:.2f}x",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3, help="throughput rounds (best of)")
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
        "seeds": args.seeds,
        "data": {},
    }
    for loader in (digits, adult):
        if args.only and loader.__name__ != args.only:
            continue
        data = loader(args.quick)
        results["data"][data.name] = bench(data, args.seeds, args.repeats)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=float))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
