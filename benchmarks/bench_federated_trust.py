"""Federated learning's trust models and the lecture's FedSGD/FedAvg table, in one run.

Run (about fifteen minutes on two shared cores; ``--quick`` for a smoke run):

    .venv/bin/python benchmarks/bench_federated_trust.py [--rounds 10] [--seeds 1]

Part 1, central vs local vs distributed DP (accuracy against epsilon). Adult's people grouped
by a natural key, (occupation, age): 843 non-IID clients (the partition of
``bench_fedavg.py``), 20% of the people held out. Softmax regression, every client in every
round (``q = 1``: no amplification by sampling for anyone, so the three trust models and
Flower's peer are accounted on the same footing), one local epoch (B = 16, lr 0.5), updates
clipped to ``S = 2`` and weighted by ``w_k = min(n_k / 20, 1)`` (McMahan et al. 2018's cap, so
that clients of one or two people do not dominate), user-level DP at delta = 1e-5 after
``--rounds`` rounds:

* ``central``: ``DPFedAvg(mode="central")``, exact discrete Gaussian noise added by the
  server, calibrated by the PLD accountant;
* ``distributed``: ``DPFedAvg(mode="distributed")``, each client adds a discrete Gaussian
  share and the server sees only the modular sum (Kairouz, Liu and Steinke 2021), calibrated
  with the DDG zCDP bound (the masks cancel exactly, see the tests, so this simulation sums
  the residues without them: ``masking=False``);
* ``local``: ``DPFedAvg(mode="local")``, each client noises its own update (replace-one);
* ``flower``: Flower's own ``DifferentialPrivacyServerSideFixedClipping`` around Flower's
  ``FedAvg`` (float Gaussian noise), run through ``InProcessGrid`` on the same clients, with
  its noise multiplier set by bisection so that Flower's own ``RdpAccountant`` reports the
  same epsilon (it needs ``pip install 'flwr[dp]'``, i.e. ``dp-accounting``; the row is
  skipped without it).

Part 2, rounds of communication to reach a target accuracy (lecture 004's table, after McMahan
et al. 2017, Table 2): scikit-learn's digits (1,500 training images) over K = 100 clients of
15, IID (shuffled) or non-IID (sorted by label, two shards per client); softmax regression
(lr 0.3);
C = 0.1 (10 clients per round); FedSGD (E = 1, B = inf) against FedAvg with E in {1, 5, 20}
and B in {inf, 10}; without DP (target 90% test accuracy) and with user-level central DP
(``DPFedAvg``, z = 0.7, S = 1, target 80%; the epsilon at that round is reported).

Prints both tables and writes JSON (``--out``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_fedavg import adult_clients  # noqa: E402
from dpcurator.learn._federated import DPFedAvg, FedAvg  # noqa: E402
from dpcurator.noise import InsecureSeededSource  # noqa: E402

DELTA = 1e-5
EPSILONS = (1.0, 2.0, 8.0)
CLIP = 2.0
WEIGHT_CAP = 20.0
LR_ADULT = 0.5
LR_DIGITS = 0.3
Batch = list[tuple[torch.Tensor, torch.Tensor]]


def accuracy(model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float((model(X).argmax(1) == y).float().mean())


# -- part 1 ---------------------------------------------------------------------------------------
def flower_peer(
    clients: Batch, X_test: torch.Tensor, y_test: torch.Tensor, *, epsilon: float, rounds: int
) -> tuple[float, float, float]:
    """Flower's server-side fixed-clipping DP with its own RDP accountant at ``epsilon``."""
    from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
    from flwr.serverapp import (
        NeighboringRelation,
        PrivacyConfig,
        RdpAccountant,
        SamplingMethod,
    )
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping
    from flwr.serverapp.strategy import FedAvg as FlowerFedAvg

    from dpcurator.learn._flower import InProcessGrid, torch_client

    logging.getLogger("flwr").setLevel(logging.WARNING)
    count = len(clients)

    def accountant() -> Any:
        return RdpAccountant(
            PrivacyConfig(
                target_delta=DELTA,
                population_size=count,
                neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
                sampling_method=SamplingMethod.NO_AMPLIFICATION,
            )
        )

    def flower_epsilon(z: float) -> float:
        from flwr.serverapp import GaussianPrivacyEvent

        acc = accountant()
        acc.compose(GaussianPrivacyEvent(z, count, count), rounds)
        return float(acc.get_epsilon(DELTA))

    lo, hi = 0.05, 200.0
    for _ in range(60):  # the smallest z with Flower's epsilon <= target
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if flower_epsilon(mid) <= epsilon else (mid, hi)
    z = hi

    def uniform(handler: Any, weight: float) -> Any:
        """Flower's accounted path needs equal weights: the client scales its own update by
        ``w_k = min(n_k / cap, 1)`` (what ``DPFedAvg(weight_cap=...)`` does) and reports 1."""

        def handle(message: Message) -> Message:
            reply = handler(message)
            received = message.content.array_records["arrays"]
            trained = reply.content.array_records["arrays"]
            scaled = {}
            for key in trained:
                before, after = received[key].numpy(), trained[key].numpy()
                scaled[key] = Array(before + weight * (after - before))
            content = RecordDict(
                {"arrays": ArrayRecord(scaled), "metrics": MetricRecord({"num-examples": 1})}
            )
            return Message(content, reply_to=message)

        return handle

    torch.manual_seed(0)
    model = torch.nn.Linear(int(X_test.shape[1]), 2)
    handlers = {
        node: uniform(
            torch_client(
                model,
                x,
                y,
                loss_fn=torch.nn.functional.cross_entropy,
                batch_size=16,
                lr=LR_ADULT,
                source=InsecureSeededSource(node),
            ),
            min(int(x.shape[0]) / WEIGHT_CAP, 1.0),
        )
        for node, (x, y) in enumerate(clients, start=1)
    }
    inner = FlowerFedAvg(
        fraction_train=1.0,
        fraction_evaluate=0.0,
        min_train_nodes=count,
        min_available_nodes=count,
        min_evaluate_nodes=0,
    )
    strategy = DifferentialPrivacyServerSideFixedClipping(
        inner,
        noise_multiplier=z,
        clipping_norm=CLIP,
        num_sampled_clients=count,
        accountant=accountant(),
    )
    result = strategy.start(
        grid=InProcessGrid(handlers),
        initial_arrays=ArrayRecord(model.state_dict()),
        num_rounds=rounds,
    )
    model.load_state_dict(result.arrays.to_torch_state_dict())
    spent = strategy.privacy_spent()
    return accuracy(model, X_test, y_test), float(spent.epsilon), z


def trust_models(args: argparse.Namespace) -> dict[str, Any]:
    clients, X_test, y_test = adult_clients()
    if args.quick:
        clients = clients[:200]
    count = len(clients)
    print(
        f"\nPart 1: trust models on Adult by (occupation, age): {count} clients, all in every "
        f"round, {args.rounds} rounds, softmax regression, S = {CLIP}, weights "
        f"min(n_k / {WEIGHT_CAP:g}, 1), delta = {DELTA:g}"
    )
    out: dict[str, Any] = {"clients": count, "rounds": args.rounds, "rows": []}

    def ours(mode: str, epsilon: float | None, seed: int) -> tuple[float, float, float]:
        torch.manual_seed(seed)
        model = torch.nn.Linear(int(X_test.shape[1]), 2)
        common: dict[str, Any] = {
            "loss_fn": torch.nn.functional.cross_entropy,
            "rounds": args.rounds,
            "local_epochs": 1,
            "local_batch_size": 16,
            "local_lr": LR_ADULT,
            "source": InsecureSeededSource(seed),
            "progress": False,
        }
        if epsilon is None:
            FedAvg(model, fraction=1.0, **common).fit(clients)
            return accuracy(model, X_test, y_test), 0.0, 0.0
        fed = DPFedAvg(
            model,
            clients_per_round=count,
            clip_norm=CLIP,
            target_epsilon=epsilon,
            delta=DELTA,
            mode=mode,
            weight_cap=WEIGHT_CAP,
            masking=False,
            **common,
        ).fit(clients)
        return accuracy(model, X_test, y_test), fed.epsilon_, fed.noise_multiplier_

    header = f"  {'model':12s} {'eps':>5s} {'accuracy':>16s} {'reported eps':>12s} {'z':>8s}"
    print(header)
    base = [ours("none", None, s)[0] for s in range(args.seeds)]
    print(f"  {'non-private':12s} {'-':>5s} {statistics.fmean(base):9.4f} ± {_sd(base):.4f}")
    out["nonprivate"] = statistics.fmean(base)
    for epsilon in EPSILONS:
        for mode in ("central", "distributed", "local", "flower"):
            start = time.perf_counter()
            if mode == "flower":
                try:
                    acc, spent, z = flower_peer(
                        clients, X_test, y_test, epsilon=epsilon, rounds=args.rounds
                    )
                except ImportError as missing:  # Flower's accountant needs flwr[dp]
                    print(f"  flower: skipped ({missing}); pip install 'flwr[dp]'")
                    continue
                accs = [acc]
            else:
                runs = [ours(mode, epsilon, s) for s in range(args.seeds)]
                accs = [r[0] for r in runs]
                spent, z = max(r[1] for r in runs), runs[0][2]
            row = {
                "model": mode,
                "epsilon": epsilon,
                "accuracy": statistics.fmean(accs),
                "sd": _sd(accs),
                "reported_epsilon": spent,
                "noise_multiplier": z,
                "seconds": time.perf_counter() - start,
            }
            out["rows"].append(row)
            print(
                f"  {mode:12s} {epsilon:5g} {row['accuracy']:9.4f} ± {row['sd']:.4f} "
                f"{spent:12.4f} {z:8.3f}",
                flush=True,
            )
    majority = float(max(y_test.float().mean(), 1 - y_test.float().mean()))
    out["majority_class"] = majority
    print(f"  majority class: {majority:.4f}")
    return out


def _sd(values: list[float]) -> float:
    return statistics.pstdev(values) if len(values) > 1 else 0.0


# -- part 2 ---------------------------------------------------------------------------------------
def digits_federation(iid: bool, seed: int = 0) -> tuple[Batch, torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    rng = np.random.default_rng(seed)  # the partition, not privacy noise
    order = rng.permutation(len(y))
    train, test = order[:1500], order[1500:]
    if iid:
        rows = rng.permutation(train)
        parts = [rows[15 * k : 15 * (k + 1)] for k in range(100)]
    else:  # McMahan et al.: sort by label, 200 shards, two per client
        rows = train[np.argsort(y[train], kind="stable")]
        shards = np.array_split(rows, 200)
        picks = rng.permutation(200)
        parts = [
            np.concatenate([shards[picks[2 * k]], shards[picks[2 * k + 1]]]) for k in range(100)
        ]
    clients = [(torch.from_numpy(X[p]), torch.from_numpy(y[p]).long()) for p in parts]
    return clients, torch.from_numpy(X[test]), torch.from_numpy(y[test]).long()


SETTINGS = (  # (name, E, B); B = 0 is B = inf (the whole local dataset)
    ("FedSGD", 1, 0),
    ("FedAvg", 5, 0),
    ("FedAvg", 1, 10),
    ("FedAvg", 20, 0),
    ("FedAvg", 5, 10),
    ("FedAvg", 20, 10),
)


def rounds_table(args: argparse.Namespace) -> dict[str, Any]:
    max_rounds = 30 if args.quick else args.max_rounds
    print(
        "\nPart 2: rounds to reach the target test accuracy, digits over K = 100 clients, "
        f"C = 0.1, softmax regression, lr {LR_DIGITS} (at most {max_rounds} rounds; "
        "'-': not reached)"
    )
    out: dict[str, Any] = {"max_rounds": max_rounds, "rows": []}
    print(
        f"  {'':8s} {'E':>3s} {'B':>4s} {'u':>6s} | {'IID':>5s} {'non-IID':>8s} | "
        f"{'IID, DP':>12s} {'non-IID, DP':>12s}"
    )
    base: dict[tuple[bool, bool], int | None] = {}
    for name, epochs, batch in SETTINGS:
        cells: dict[str, Any] = {"setting": name, "E": epochs, "B": batch or "inf"}
        u = epochs * 15 / (batch or 15)  # local updates per round (n_k = 15)
        cells["u"] = u
        texts = []
        for private in (False, True):
            for iid in (True, False):
                clients, X_test, y_test = digits_federation(iid)
                found, spent = curve_rounds(
                    clients,
                    X_test,
                    y_test,
                    epochs=epochs,
                    batch=batch,
                    private=private,
                    target=0.80 if private else 0.90,
                    max_rounds=max_rounds,
                    seed=0,
                )
                key = f"{'iid' if iid else 'noniid'}{'_dp' if private else ''}"
                cells[key] = found
                if private:
                    cells[key + "_epsilon"] = spent
                if name == "FedSGD":
                    base[(private, iid)] = found
                ref = base.get((private, iid))
                speed = f"({ref / found:.1f}x)" if found and ref else ""
                text = "-" if found is None else f"{found}{speed}"
                if private and found is not None:
                    text += f" e{spent:.1f}"
                texts.append(text)
        out["rows"].append(cells)
        print(
            f"  {name:8s} {epochs:3d} {cells['B']!s:>4s} {u:6.1f} | {texts[0]:>5s} "
            f"{texts[1]:>8s} | {texts[2]:>12s} {texts[3]:>12s}",
            flush=True,
        )
    return out


def curve_rounds(
    clients: Batch,
    X_test: torch.Tensor,
    y_test: torch.Tensor,
    *,
    epochs: int,
    batch: int,
    private: bool,
    target: float,
    max_rounds: int,
    seed: int,
) -> tuple[int | None, float]:
    """Train for up to ``max_rounds`` rounds, testing after each; first round at ``target``."""
    torch.manual_seed(seed)
    model = torch.nn.Linear(64, 10)
    size = max(int(x.shape[0]) for x, _ in clients)
    common: dict[str, Any] = {
        "loss_fn": torch.nn.functional.cross_entropy,
        "local_epochs": epochs,
        "local_batch_size": batch or size,
        "local_lr": LR_DIGITS,
        "source": InsecureSeededSource(seed),
        "progress": False,
    }
    hits: list[int] = []
    trainer: FedAvg | DPFedAvg
    if private:
        trainer = DPFedAvg(
            model,
            rounds=max_rounds,
            clients_per_round=10,
            clip_norm=1.0,
            noise_multiplier=0.7,
            **common,
        )
    else:
        trainer = FedAvg(model, rounds=max_rounds, fraction=0.1, **common)
    apply = trainer._apply  # test accuracy after each server update (post-processing)

    def watched(update: torch.Tensor) -> None:
        if hits:  # the round after the target was reached (its record is written): stop
            raise _TargetReachedError
        apply(update)
        if accuracy(model, X_test, y_test) >= target:
            hits.append(len(trainer.history_) + 1)

    trainer._apply = watched  # type: ignore[method-assign]
    with contextlib.suppress(_TargetReachedError):
        trainer.fit(clients)
    if not hits:
        return None, trainer.history_[-1].epsilon
    return hits[0], trainer.history_[hits[0] - 1].epsilon


class _TargetReachedError(Exception):
    """The target accuracy was reached: stop training."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--max-rounds", type=int, default=200)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--part", choices=("both", "trust", "rounds"), default="both", help="what to run"
    )
    parser.add_argument(
        "--out", type=Path, default=REPO / "benchmarks/results/federated_trust.json"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("flwr").setLevel(logging.WARNING)
    start = time.perf_counter()
    results: dict[str, Any] = {}
    if args.part in ("both", "trust"):
        results["trust_models"] = trust_models(args)
    if args.part in ("both", "rounds"):
        results["rounds_table"] = rounds_table(args)
    results["seconds"] = time.perf_counter() - start
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {args.out} ({results['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
