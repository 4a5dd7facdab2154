"""Auditing and attacks: audit throughput, samples to certify Laplace, reconstruction time.

Run from the repository root (dpcurator is taken from src/):

    .venv/bin/python benchmarks/bench_audit.py [--quick] [--repeats 3] [--rows 500,1000,2000]
        [--sections 1,2,3,4,5] [--out benchmarks/results/audit.json]

1. Audit throughput: runs of the mechanism audited per second by
   ``dpcurator.audit.audit_mechanism`` (4 N runs: selection and certification on both
   neighbours, event selection and Clopper-Pearson certification included), for the vectorised
   Laplace mechanism (``batched=True``) and for the public exponential mechanism called once per
   run (``batched=False``), best of ``--repeats``.
2. Samples to certify: the smallest N per side and split, on a doubling grid from 250, at which
   the audit of ``laplace_mechanism`` at epsilon = 1, 2, 4 (neighbours 0 and 1, sensitivity 1)
   certifies at least half and 90 % of epsilon, at 95 % confidence (median of ``--repeats``
   seeds). For reference, research note B: with a perfect distinguisher (no errors) certifying
   epsilon needs about 3.7 e^eps runs per side.
3. Reconstruction: wall time of ``lp_reconstruction`` (Dinur-Nissim LP, HiGHS interior point,
   L1 objective) on n rows with m = 4 n random subset queries answered with uniform error up to
   0.05 sqrt(n), and the fraction of secret bits recovered.
4. Membership inference on UCI Adult (``--population`` rows, heavy-tailed columns logged): a
   two-hidden-layer MLP (256 units each) trained non-privately (full-batch Adam, 200 steps, no
   regularisation: near-zero training loss) and with ``DPSGD`` at epsilon = 1 and 8
   (delta = 1e-5, plain SGD, lot 250, 10 epochs), ``--models`` models of each on fair-coin
   halves. Each model is attacked with the others as its shadows (Carlini et al.'s evaluation:
   ``ShadowModels.pooled_lira``, online; ``pooled_loss_attack``, Yeom's): AUC, TPR at 0.1 % and
   1 % FPR, held-out accuracy and the epsilon that the attack certifies (``tradeoff_violations``,
   95 %); a Markdown table, and a log-log ROC plot with the DP bound (``--plot``).
5. One-run canary audit of DP-SGD (``audit_dpsgd``, full batches, 10 steps, 1,000 canaries) at
   target epsilon = 1, 2, 4, and the planted fault (noise multiplier / 4, same claim).

Prints tables and writes JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from dpcurator.attacks import (  # noqa: E402
    logit_confidence,
    lp_reconstruction,
    subset_sum_oracle,
)
from dpcurator.attacks._membership import tradeoff_violations, train_shadow_models  # noqa: E402
from dpcurator.audit import audit_mechanism  # noqa: E402
from dpcurator.datasets import load_adult  # noqa: E402
from dpcurator.mechanisms import exponential_mechanism, laplace_mechanism  # noqa: E402
from dpcurator.noise import InsecureSeededSource, bernoulli  # noqa: E402


def laplace_runs(epsilon: float, seed: int) -> Callable[[float, int], Any]:
    source = InsecureSeededSource(seed)

    def run(x: float, size: int) -> Any:
        return laplace_mechanism(
            np.full(size, x),
            epsilon=epsilon,
            sensitivity=1.0,
            changed_coordinates=1,
            source=source,
        ).value

    return run


def throughput(repeats: int, quick: bool) -> list[dict[str, Any]]:
    rows = []
    n = 100_000 if quick else 1_000_000
    best = math.inf
    for r in range(repeats):
        start = time.perf_counter()
        audit_mechanism(laplace_runs(1.0, r), 0.0, 1.0, samples=n, batched=True)
        best = min(best, time.perf_counter() - start)
    rows.append(
        {
            "mechanism": "laplace (batched)",
            "runs": 4 * n,
            "seconds": best,
            "runs_per_second": 4 * n / best,
        }
    )
    source = InsecureSeededSource(99)
    candidates = ["a", "b", "c", "d"]

    def em(utilities: list[float]) -> str:
        return exponential_mechanism(
            candidates, utilities, epsilon=1.0, sensitivity=1.0, source=source
        ).value

    m = 1_000 if quick else 5_000
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        audit_mechanism(em, [0.0] * 4, [1.0, -1.0, -1.0, -1.0], samples=m)
        best = min(best, time.perf_counter() - start)
    rows.append(
        {
            "mechanism": "exponential (one call per run)",
            "runs": 4 * m,
            "seconds": best,
            "runs_per_second": 4 * m / best,
        }
    )
    return rows


def samples_to_certify(repeats: int, quick: bool) -> list[dict[str, Any]]:
    rows = []
    limit = 2**17 * 250 if not quick else 2**12 * 250
    for epsilon in (1.0, 2.0, 4.0):
        found: dict[str, int | None] = {"0.5": None, "0.9": None}
        n = 250
        while n <= limit and found["0.9"] is None:
            bounds = [
                audit_mechanism(
                    laplace_runs(epsilon, 1000 * r + n % 997), 0.0, 1.0, samples=n, batched=True
                ).epsilon_lower_bound
                for r in range(repeats)
            ]
            median = statistics.median(bounds)
            for level in ("0.5", "0.9"):
                if found[level] is None and median >= float(level) * epsilon:
                    found[level] = n
            n *= 2
        rows.append(
            {
                "epsilon": epsilon,
                "n_half": found["0.5"],
                "n_90": found["0.9"],
                "perfect_distinguisher": math.ceil(3.7 * math.exp(epsilon)),
            }
        )
    return rows


def reconstruction(rows_list: list[int], repeats: int) -> list[dict[str, Any]]:
    out = []
    for n in rows_list:
        times, fractions = [], []
        for r in range(repeats):
            secret = bernoulli("1/2", n, source=InsecureSeededSource(10 * n + r)).astype(int)
            oracle = subset_sum_oracle(
                secret,
                noise="uniform",
                scale=0.05 * math.sqrt(n),
                source=InsecureSeededSource(r),
            )
            start = time.perf_counter()
            result = lp_reconstruction(oracle, n, source=InsecureSeededSource(100 + r))
            times.append(time.perf_counter() - start)
            fractions.append(result.fraction_recovered(secret))
        out.append(
            {
                "rows": n,
                "queries": 4 * n,
                "seconds": min(times),
                "seconds_median": statistics.median(times),
                "fraction_recovered": min(fractions),
            }
        )
        print(f"  n = {n}: {min(times):.2f} s, recovered {min(fractions):.4f}", flush=True)
    return out


MEMBERSHIP_DELTA = 1e-5
MEMBERSHIP_WIDTH = 256


def adult_tensors(population: int) -> tuple[Any, Any]:
    """Adult rows as (features, labels): categories one-hot, heavy tails logged, standardised."""
    import pandas as pd
    import torch

    frame = load_adult().sample(n=population, random_state=0).reset_index(drop=True)
    categories = ["workclass", "education", "marital_status", "occupation", "relationship"]
    categories += ["race", "sex", "native_country"]
    numbers = frame[["age", "education_num", "hours_per_week"]].astype(float)
    numbers["fnlwgt"] = np.log(frame["fnlwgt"])
    numbers["capital_gain"] = np.log1p(frame["capital_gain"])
    numbers["capital_loss"] = np.log1p(frame["capital_loss"])
    onehot = pd.get_dummies(frame[categories], dtype=float).to_numpy()
    scaled = ((numbers - numbers.mean()) / numbers.std()).to_numpy()
    features = torch.tensor(np.hstack([onehot, scaled]), dtype=torch.float32)
    labels = torch.tensor((frame["income"] == ">50K").to_numpy().astype(np.int64))
    return features, labels


def membership(population: int, models: int, plot: Path | None) -> list[dict[str, Any]]:
    import torch

    from dpcurator.learn import DPSGD

    torch.set_num_threads(1)
    data = adult_tensors(population)

    def mlp() -> Any:
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Linear(data[0].shape[1], MEMBERSHIP_WIDTH),
            torch.nn.ReLU(),
            torch.nn.Linear(MEMBERSHIP_WIDTH, MEMBERSHIP_WIDTH),
            torch.nn.ReLU(),
            torch.nn.Linear(MEMBERSHIP_WIDTH, 2),
        )

    def plain(part: Any) -> Any:
        model = mlp()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        for _ in range(200):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(part[0]), part[1]).backward()
            optimizer.step()
        return model

    def private(epsilon: float) -> Callable[[Any], Any]:
        source = InsecureSeededSource(int(epsilon))

        def train(part: Any) -> Any:
            model = mlp()
            DPSGD(
                model,
                torch.optim.SGD(model.parameters(), lr=1.0),
                loss_fn=torch.nn.functional.cross_entropy,
                max_grad_norm=1.0,
                batch_size=250,
                epochs=10,
                target_epsilon=epsilon,
                delta=MEMBERSHIP_DELTA,
                source=source,
                progress=False,
            ).fit(*part)
            return model

        return train

    def phi(model: Any, part: Any) -> Any:
        with torch.no_grad():
            probabilities = torch.softmax(model(part[0]).double(), dim=1).numpy()
        return logit_confidence(probabilities, part[1].numpy())

    rows: list[dict[str, Any]] = []
    curves: dict[str, Any] = {}
    for name, train in (
        ("non-private", plain),
        ("DP-SGD eps=1", private(1.0)),
        ("DP-SGD eps=8", private(8.0)),
    ):
        start = time.perf_counter()
        trained = train_shadow_models(
            train, phi, data, shadow_models=models, source=InsecureSeededSource(2)
        )
        seconds = time.perf_counter() - start
        accuracy = float((trained.phis[~trained.inside] > 0).mean())  # the true label wins
        results = {
            "loss (Yeom)": trained.pooled_loss_attack(),
            "LiRA online": trained.pooled_lira(),
        }
        curves[name] = results["LiRA online"].roc
        for kind, result in results.items():
            certified = tradeoff_violations(result, 1.0, MEMBERSHIP_DELTA).epsilon_lower_bound
            rows.append(
                {
                    "model": name,
                    "attack": kind,
                    "heldout_accuracy": accuracy,
                    "auc": result.auc,
                    "tpr_at_0.1%": result.tpr_at_0_1_percent,
                    "tpr_at_1%": result.tpr_at_1_percent,
                    "certified_epsilon": certified,
                    "scores_per_side": [result.scores_in.size, result.scores_out.size],
                    "training_seconds": seconds,
                }
            )
            print(
                f"  {name:13s} {kind:11s} acc {accuracy:.3f}  AUC {result.auc:.3f}  "
                f"TPR@0.1% {result.tpr_at_0_1_percent:.3f}  TPR@1% {result.tpr_at_1_percent:.3f}"
                f"  certified eps >= {certified:.2f}  ({seconds:.0f} s to train {models})",
                flush=True,
            )
    print(membership_table(rows))
    if plot is not None:
        plot_roc(curves, plot)
    return rows


def membership_table(rows: list[dict[str, Any]]) -> str:
    """The membership rows as a Markdown table (BENCHMARKS.md)."""
    lines = [
        "| model | attack | held-out acc. | AUC | TPR @ 0.1% FPR | TPR @ 1% FPR "
        "| certified eps (95%) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {r['model']} | {r['attack']} | {r['heldout_accuracy']:.3f} | {r['auc']:.3f} "
        f"| {r['tpr_at_0.1%']:.3f} | {r['tpr_at_1%']:.3f} | {r['certified_epsilon']:.2f} |"
        for r in rows
    ]
    return "\n".join(lines)


def plot_roc(curves: dict[str, Any], path: Path) -> None:
    """Log-log ROC of LiRA per model, with the DP bound ``TPR = e^eps FPR + delta``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("  (matplotlib missing: no ROC plot)")
        return
    figure, axes = plt.subplots(figsize=(5.5, 5))
    for name, curve in curves.items():
        axes.step(curve.fpr, curve.tpr, where="post", label=f"LiRA, {name}")
    fpr = np.logspace(-4, 0, 200)
    for epsilon, style in ((1.0, "--"), (8.0, ":")):
        bound = np.minimum(math.exp(epsilon) * fpr + MEMBERSHIP_DELTA, 1.0)
        axes.plot(fpr, bound, "k" + style, lw=1, label=f"DP bound, eps = {epsilon:g}")
    axes.plot(fpr, fpr, color="0.6", lw=0.8, label="chance")
    axes.set(xscale="log", yscale="log", xlim=(1e-4, 1), ylim=(1e-4, 1))
    axes.set(xlabel="false-positive rate", ylabel="true-positive rate")
    axes.set_title("Membership inference on Adult (2x256 MLP)")
    axes.legend(fontsize=8, loc="lower right")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)
    print(f"  ROC plot written to {path}")


def dpsgd_canaries(quick: bool) -> list[dict[str, Any]]:
    import torch

    from dpcurator.audit._dpsgd import audit_dpsgd

    torch.set_num_threads(1)
    frame = load_adult().iloc[:500]
    features = torch.tensor(
        np.column_stack(
            [frame["age"] / 90.0, frame["education_num"] / 16.0, frame["hours_per_week"] / 99.0]
        ),
        dtype=torch.float32,
    )
    labels = torch.tensor((frame["income"] == ">50K").to_numpy().astype(np.int64))

    def mlp() -> Any:
        return torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))

    common: dict[str, Any] = {
        "loss_fn": torch.nn.functional.cross_entropy,
        "max_grad_norm": 1.0,
        "epochs": 10,
        "canaries": 1000,
    }
    rows = []
    for epsilon in (1.0,) if quick else (1.0, 2.0, 4.0):
        start = time.perf_counter()
        honest = audit_dpsgd(
            mlp,
            features,
            labels,
            target_epsilon=epsilon,
            **common,
            source=InsecureSeededSource(int(10 * epsilon)),
        )
        faulty = audit_dpsgd(
            mlp,
            features,
            labels,
            noise_multiplier=honest.noise_multiplier / 4,
            epsilon_claimed=honest.epsilon_claimed,
            **common,
            source=InsecureSeededSource(int(10 * epsilon) + 1),
        )
        rows.append(
            {
                "target_epsilon": epsilon,
                "claimed": honest.epsilon_claimed,
                "certified": honest.epsilon_lower_bound,
                "certified_fault": faulty.epsilon_lower_bound,
                "seconds": (time.perf_counter() - start) / 2,
            }
        )
        print(
            f"  eps = {epsilon:g}: claimed {honest.epsilon_claimed:.3f}, certified "
            f"{honest.epsilon_lower_bound:.3f}; noise / 4: certified "
            f"{faulty.epsilon_lower_bound:.3f} ({'caught' if not faulty.consistent else 'missed'})",
            flush=True,
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", default="500,1000,2000")
    parser.add_argument("--population", type=int, default=1000)
    parser.add_argument("--models", type=int, default=12)
    parser.add_argument("--sections", default="1,2,3,4,5", help="which sections to run")
    parser.add_argument("--plot", type=Path, default=REPO / "benchmarks/results/membership_roc.png")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/audit.json")
    args = parser.parse_args()
    sections = {int(v) for v in args.sections.split(",") if v}
    print(f"python {platform.python_version()} on {platform.machine()}")
    report: dict[str, Any] = {"python": platform.python_version()}
    if 1 in sections:
        print("\n1. audit throughput (runs of the mechanism per second, best of repeats)")
        report["throughput"] = throughput(args.repeats, args.quick)
        for row in report["throughput"]:
            print(
                f"  {row['mechanism']:32s} {row['runs']:>10,} runs  {row['seconds']:7.2f} s  "
                f"{row['runs_per_second']:>12,.0f} runs/s"
            )
    if 2 in sections:
        print("\n2. runs per side and split to certify a share of epsilon (Laplace, 95 %)")
        report["certify"] = samples_to_certify(args.repeats, args.quick)
        for row in report["certify"]:
            print(
                f"  eps = {row['epsilon']:g}: >= eps/2 at N = {row['n_half']}, "
                f">= 0.9 eps at N = {row['n_90']} (perfect distinguisher: "
                f"{row['perfect_distinguisher']})"
            )
    if 3 in sections:
        print("\n3. reconstruction (m = 4n queries, error 0.05 sqrt(n))")
        rows = [int(v) for v in args.rows.split(",") if v]
        report["reconstruction"] = reconstruction(rows, max(1, args.repeats - 2))
    if 4 in sections:
        print(
            f"\n4. membership inference on Adult ({args.population} rows, {args.models} models "
            "of each kind, each attacked with the others as shadows)"
        )
        report["membership"] = membership(args.population, args.models, args.plot)
    if 5 in sections:
        print("\n5. one-run canary audit of DP-SGD (1,000 canaries, full batches, 10 steps)")
        report["dpsgd_canaries"] = dpsgd_canaries(args.quick)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
