"""DP logistic regression: dpcurator against diffprivlib and the non-private ceiling.

Run with the benchmark environment (dpcurator editable, scikit-learn 1.9.1):

    .venv-bench/bin/python benchmarks/bench_learn_erm.py [--seeds 20] [--tune-seeds 5]
        [--datasets breast_cancer,digits,adult] [--methods objective,output,gradient]
        [--diffprivlib-python PATH] [--out PATH]

A quick look while developing: ``--seeds 3 --tune-seeds 1 --datasets breast_cancer``.

diffprivlib 0.6.6 does not import under scikit-learn 1.9 (it imports ``sklearn.tree._tree.DOUBLE``
and passes ``multi_class`` to ``LogisticRegression``), so it runs in its own environment,
``.venv-peers/diffprivlib`` (``diffprivlib==0.6.6 scikit-learn==1.5.2 numpy<2.3``), through this
same script in ``--worker`` mode: the driver writes the prepared arrays to a temporary ``.npz``
and reads the accuracies back as JSON.

Protocol, the same for every library:

- Data: scikit-learn's breast cancer (569 rows, 30 features) and digits (1,797 rows, 64 pixels,
  10 classes), and UCI Adult (``dpcurator.datasets.load_adult``, 32,561 people; 5 numeric
  columns and 8 categorical ones one-hot encoded; label ``income == ">50K"``).
- Preprocessing with public knowledge only (no statistic of the data): features clipped to
  declared ranges and mapped to [-1, 1] (digits: pixels 0..16; Adult: age 17..90, years of
  education 1..16, hours 1..99, log1p of capital gain 0..99,999 and loss 0..4,356, as in the
  UCI documentation; breast cancer: log1p of each feature over the dataset's [min, max], which
  stands in for a data dictionary), then every row scaled to unit L2 norm (a per-row map). So
  every library gets rows of norm 1 and ``data_norm = 1`` is a declared bound, not a leak.
  Breast cancer's columns come in three documented groups (mean, standard error and "worst" of
  10 nucleus measurements): tuning may use all 30 columns, the means or the "worst" values
  (rows re-normalised after the choice), for every library alike.
- One fixed stratified split: 80% train, 20% test. Hyper-parameters are chosen per epsilon on
  a validation split of the training part (75/25), averaging ``--tune-seeds`` noise seeds: for
  every library the column group and the regularisation (``alpha`` in ``ALPHAS``; for
  diffprivlib its ``C``, the same grid ``C = 1/(alpha n)``); for dpcurator also the intercept
  column's value (``INTERCEPT_SCALINGS``) and, for ``method="gradient"``, the number of steps
  (``GRADIENT_STEPS``) and the clipping norm (``CLIP_NORMS``), with ``alpha = 1e-4`` and the
  intercept column at ``GRADIENT_INTERCEPT_SCALING``. The test
  split is never used for tuning. This tuning is not private (its cost is not counted for any
  library; :class:`dpcurator.learn.DPModelSelector` is the private alternative).
- Then ``--seeds`` fits with fresh noise on the whole training part; test accuracy mean, std,
  min and max. The non-private ceiling is scikit-learn's ``LogisticRegression`` on the same
  features, ``C`` tuned on the same validation split.
- dpcurator: ``DPLogisticRegression`` (multinomial for digits: one model, one budget) with
  ``method="objective"`` and ``"output"``, pure DP (Laplace-type noise, like diffprivlib's
  vector mechanism) and (epsilon, 1e-5)-DP (Gaussian-type noise), and ``method="gradient"``
  (noisy full-batch gradient descent, (epsilon, 1e-5)-DP by the PLD accountant), under
  replace-one neighbours like diffprivlib; and objective (pure) and gradient perturbation under
  add/remove neighbours (``neighbours="add_remove"``, the relation of DP-SGD and Opacus: half
  the sensitivity, and a noisy row count released inside the same budget). The table labels
  every row pure or delta=1e-5, and add/remove where it applies.

Prints a table and writes JSON (``--out``, default ``benchmarks/results/learn_erm.json``).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
EPSILONS = (0.1, 0.5, 1.0, 2.0, 5.0)
ALPHAS = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
INTERCEPT_SCALINGS = (1.0, 0.3)
GRADIENT_STEPS = (30, 100)
CLIP_NORMS = (0.3, 1.0)
GRADIENT_INTERCEPT_SCALING = 0.3
DELTA = 1e-5
DEFAULT_PEER = HERE.parent / ".venv-peers" / "diffprivlib" / "bin" / "python"


# ---------------------------------------------------------------------------------------------
# diffprivlib worker (runs in its own environment; imports nothing from dpcurator)


def _worker(path_in: str, path_out: str) -> None:
    import warnings

    import diffprivlib
    from diffprivlib.models import LogisticRegression

    arrays = np.load(path_in)
    spec = json.loads(str(arrays["spec"]))
    out: dict[str, Any] = {"version": diffprivlib.__version__, "epsilons": {}}

    def fit(X: np.ndarray, y: np.ndarray, eps: float, alpha: float, seed: int) -> Any:
        model = LogisticRegression(
            epsilon=eps, data_norm=1.0, C=1.0 / (alpha * len(y)), max_iter=1000, random_state=seed
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return model.fit(X, y)

    for eps in spec["epsilons"]:
        best = None
        for subset, columns in spec["feature_sets"].items():
            v = view(arrays, columns)
            for alpha in spec["alphas"]:
                scores = [
                    fit(v["X_fit"], v["y_fit"], eps, alpha, seed).score(v["X_val"], v["y_val"])
                    for seed in range(spec["tune_seeds"])
                ]
                if best is None or np.mean(scores) > best[0]:
                    best = (float(np.mean(scores)), alpha, subset)
        assert best is not None
        _, alpha, subset = best
        v = view(arrays, spec["feature_sets"][subset])
        accs, start = [], time.perf_counter()
        for seed in range(spec["seeds"]):
            model = fit(v["X_train"], v["y_train"], eps, alpha, 1000 + seed)
            accs.append(model.score(v["X_test"], v["y_test"]))
        seconds = (time.perf_counter() - start) / spec["seeds"]
        out["epsilons"][str(eps)] = _summary(accs, alpha, subset, best[0], seconds)
    Path(path_out).write_text(json.dumps(out))


def _summary(
    accs: list[float], params: Any, subset: str, validation: float, seconds: float
) -> dict[str, Any]:
    a = np.asarray(accs, dtype=float)
    return {
        "mean": float(a.mean()),
        "std": float(a.std()),
        "min": float(a.min()),
        "max": float(a.max()),
        "params": params,
        "features": subset,
        "validation": validation,
        "fit_seconds": seconds,
    }


# ---------------------------------------------------------------------------------------------
# Data (public-knowledge preprocessing)


def _unit_rows(Z: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(Z, axis=1, keepdims=True)
    return Z / np.maximum(norms, 1e-12)


def view(data: Any, columns: list[int]) -> dict[str, np.ndarray]:
    """The split arrays restricted to ``columns``, each row scaled to unit L2 norm."""
    out = {}
    for part in ("train", "test", "fit", "val"):
        out["X_" + part] = _unit_rows(np.asarray(data["X_" + part])[:, columns])
        out["y_" + part] = np.asarray(data["y_" + part])
    return out


def _to_unit_interval(x: np.ndarray, low: Any, high: Any) -> np.ndarray:
    return 2.0 * (np.clip(x, low, high) - low) / (np.asarray(high) - np.asarray(low)) - 1.0


def feature_sets(name: str, n_features: int) -> dict[str, list[int]]:
    """Public, data-independent column groups that tuning may choose from.

    Breast cancer documents 10 measurements of each nucleus, each as mean, standard error and
    "worst" (columns 0-9, 10-19, 20-29): the groups are part of the schema, not of the data.
    Each group's rows are normalised to unit norm again after selection.
    """
    if name == "breast_cancer":
        return {
            "all": list(range(30)),
            "mean": list(range(10)),
            "worst": list(range(20, 30)),
        }
    return {"all": list(range(n_features))}


def load(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name == "breast_cancer":
        from sklearn.datasets import load_breast_cancer

        X, y = load_breast_cancer(return_X_y=True)
        low, high = np.log1p(X.min(axis=0)), np.log1p(X.max(axis=0))
        return _to_unit_interval(np.log1p(X), low, high), y
    if name == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        return _to_unit_interval(X, 0.0, 16.0), y
    from dpcurator.datasets import load_adult

    frame = load_adult()
    numeric = [
        _to_unit_interval(frame["age"].to_numpy(float), 17, 90),
        _to_unit_interval(frame["education_num"].to_numpy(float), 1, 16),
        _to_unit_interval(frame["hours_per_week"].to_numpy(float), 1, 99),
        _to_unit_interval(np.log1p(frame["capital_gain"].to_numpy(float)), 0, math.log1p(99999)),
        _to_unit_interval(np.log1p(frame["capital_loss"].to_numpy(float)), 0, math.log1p(4356)),
    ]
    columns = [np.column_stack(numeric)]
    for column in (
        "workclass",
        "education",
        "marital_status",
        "occupation",
        "relationship",
        "race",
        "sex",
        "native_country",
    ):
        values = frame[column].fillna("?").astype(str).to_numpy()
        categories = sorted(set(values))  # the UCI category lists (adult.names)
        columns.append((values[:, None] == np.asarray(categories)[None, :]).astype(float))
    X = np.hstack(columns)
    y = (frame["income"].astype(str).to_numpy() == ">50K").astype(int)
    return X, y


def splits(X: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    from sklearn.model_selection import train_test_split

    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.2, random_state=0, stratify=y
    )
    X_fit, X_val, y_fit, y_val = train_test_split(
        X_train, y_train, test_size=0.25, random_state=1, stratify=y_train
    )
    return {
        "X_train": X_train,
        "y_train": y_train,
        "X_test": X_test,
        "y_test": y_test,
        "X_fit": X_fit,
        "y_fit": y_fit,
        "X_val": X_val,
        "y_val": y_val,
    }


# ---------------------------------------------------------------------------------------------
# dpcurator and the ceiling


def _grid(method: str) -> list[dict[str, Any]]:
    """Hyper-parameter candidates of one dpcurator method (tuned on the validation split)."""
    if method == "gradient":
        return [
            {
                "alpha": 1e-4,
                "gradient_steps": steps,
                "max_grad_norm": clip,
                "intercept_scaling": GRADIENT_INTERCEPT_SCALING,
            }
            for steps in GRADIENT_STEPS
            for clip in CLIP_NORMS
        ]
    return [
        {"alpha": alpha, "intercept_scaling": scaling}
        for alpha in ALPHAS
        for scaling in INTERCEPT_SCALINGS
    ]


def run_dpcurator(
    data: dict[str, np.ndarray],
    subsets: dict[str, list[int]],
    *,
    method: str,
    delta: float,
    neighbours: str,
    seeds: int,
    tune_seeds: int,
) -> dict[str, Any]:
    from dpcurator.learn import DPLogisticRegression
    from dpcurator.noise import InsecureSeededSource

    # The label sets are public (documented with each dataset): declared, not read from y.
    classes = np.unique(np.concatenate([data["y_train"], data["y_test"]]))

    def fit(X: np.ndarray, y: np.ndarray, eps: float, params: dict[str, Any], seed: int) -> Any:
        model = DPLogisticRegression(
            epsilon=eps,
            delta=delta,
            method=method,
            neighbours=neighbours,
            classes=classes,
            source=InsecureSeededSource(seed),
            **params,
        )
        return model.fit(X, y)

    views = {name: view(data, columns) for name, columns in subsets.items()}
    out: dict[str, Any] = {}
    for eps in EPSILONS:
        best = None
        for subset, v in views.items():
            for params in _grid(method):
                scores = [
                    fit(v["X_fit"], v["y_fit"], eps, params, seed).score(v["X_val"], v["y_val"])
                    for seed in range(tune_seeds)
                ]
                if best is None or np.mean(scores) > best[0]:
                    best = (float(np.mean(scores)), params, subset)
        assert best is not None
        _, params, subset = best
        v = views[subset]
        accs, start = [], time.perf_counter()
        for seed in range(seeds):
            model = fit(v["X_train"], v["y_train"], eps, params, 1000 + seed)
            accs.append(model.score(v["X_test"], v["y_test"]))
        seconds = (time.perf_counter() - start) / seeds
        out[str(eps)] = _summary(accs, params, subset, best[0], seconds)
    return out


def run_ceiling(data: dict[str, np.ndarray], subsets: dict[str, list[int]]) -> dict[str, Any]:
    from sklearn.linear_model import LogisticRegression

    best = None
    for subset, columns in subsets.items():
        v = view(data, columns)
        for c in (0.01, 0.1, 1.0, 10.0, 100.0):
            model = LogisticRegression(C=c, max_iter=5000).fit(v["X_fit"], v["y_fit"])
            score = model.score(v["X_val"], v["y_val"])
            if best is None or score > best[0]:
                best = (score, c, subset)
    assert best is not None
    v = view(data, subsets[best[2]])
    model = LogisticRegression(C=best[1], max_iter=5000).fit(v["X_train"], v["y_train"])
    return {
        "accuracy": float(model.score(v["X_test"], v["y_test"])),
        "C": best[1],
        "features": best[2],
    }


def run_diffprivlib(
    data: dict[str, np.ndarray],
    subsets: dict[str, list[int]],
    *,
    python: Path,
    seeds: int,
    tune_seeds: int,
) -> dict[str, Any] | None:
    if not python.exists():
        print(f"  diffprivlib skipped: {python} not found", flush=True)
        return None
    spec = {
        "epsilons": list(EPSILONS),
        "alphas": list(ALPHAS),
        "seeds": seeds,
        "tune_seeds": tune_seeds,
        "feature_sets": subsets,
    }
    with tempfile.TemporaryDirectory() as tmp:
        path_in, path_out = Path(tmp) / "data.npz", Path(tmp) / "out.json"
        np.savez(path_in, spec=np.asarray(json.dumps(spec)), **data)
        subprocess.run([str(python), __file__, "--worker", str(path_in), str(path_out)], check=True)
        result: dict[str, Any] = json.loads(path_out.read_text())
    return result


# ---------------------------------------------------------------------------------------------
# Driver


METHODS = (
    ("dpcurator objective, pure", "objective", 0.0, "replace_one"),
    ("dpcurator output, pure", "output", 0.0, "replace_one"),
    ("dpcurator objective, delta=1e-5", "objective", DELTA, "replace_one"),
    ("dpcurator output, delta=1e-5", "output", DELTA, "replace_one"),
    ("dpcurator gradient, delta=1e-5", "gradient", DELTA, "replace_one"),
    ("dpcurator objective, pure, add/remove", "objective", 0.0, "add_remove"),
    ("dpcurator gradient, delta=1e-5, add/remove", "gradient", DELTA, "add_remove"),
)


def _table(results: dict[str, Any]) -> None:
    for name, entry in results["datasets"].items():
        print(
            f"\n{name}: n_train={entry['n_train']}, n_test={entry['n_test']}, "
            f"d={entry['features']}, classes={entry['classes']}, "
            f"non-private ceiling {entry['ceiling']['accuracy']:.3f}"
        )
        print("| method | " + " | ".join(f"eps={e}" for e in EPSILONS) + " |")
        print("| --- |" + " ---: |" * len(EPSILONS))
        ceiling = entry["ceiling"]["accuracy"]
        print(
            "| non-private (scikit-learn) | "
            + " | ".join([f"{ceiling:.3f}"] * len(EPSILONS))
            + " |"
        )
        for label, by_eps in entry["methods"].items():
            cells = " | ".join(
                f"{by_eps[str(e)]['mean']:.3f} ± {by_eps[str(e)]['std']:.3f}" for e in EPSILONS
            )
            print(f"| {label} | {cells} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=2, metavar=("IN", "OUT"))
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--tune-seeds", type=int, default=5)
    parser.add_argument("--datasets", default="breast_cancer,digits,adult")
    parser.add_argument(
        "--methods",
        default="objective,output,gradient",
        help="comma-separated dpcurator methods to run (objective, output, gradient)",
    )
    parser.add_argument("--diffprivlib-python", type=Path, default=DEFAULT_PEER)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "learn_erm.json")
    args = parser.parse_args()
    if args.worker:
        _worker(*args.worker)
        return 0
    import sklearn

    results: dict[str, Any] = {
        "platform": {"python": platform.python_version(), "machine": platform.machine()},
        "sklearn": sklearn.__version__,
        "epsilons": list(EPSILONS),
        "alphas": list(ALPHAS),
        "delta": DELTA,
        "seeds": args.seeds,
        "tune_seeds": args.tune_seeds,
        "datasets": {},
    }
    for name in args.datasets.split(","):
        X, y = load(name)
        data = splits(X, y)
        subsets = feature_sets(name, X.shape[1])
        print(f"== {name}: {X.shape[0]} rows, {X.shape[1]} features", flush=True)
        entry: dict[str, Any] = {
            "n_train": len(data["y_train"]),
            "n_test": len(data["y_test"]),
            "features": X.shape[1],
            "classes": len(np.unique(y)),
            "ceiling": run_ceiling(data, subsets),
            "methods": {},
        }
        chosen = set(args.methods.split(","))
        for label, method, delta, neighbours in (m for m in METHODS if m[1] in chosen):
            start = time.perf_counter()
            entry["methods"][label] = run_dpcurator(
                data,
                subsets,
                method=method,
                delta=delta,
                neighbours=neighbours,
                seeds=args.seeds,
                tune_seeds=args.tune_seeds,
            )
            print(f"  {label}: {time.perf_counter() - start:.0f} s", flush=True)
        start = time.perf_counter()
        peer = run_diffprivlib(
            data,
            subsets,
            python=args.diffprivlib_python,
            seeds=args.seeds,
            tune_seeds=args.tune_seeds,
        )
        if peer is not None:
            entry["methods"]["diffprivlib " + peer["version"] + ", pure"] = peer["epsilons"]
            print(f"  diffprivlib: {time.perf_counter() - start:.0f} s", flush=True)
        results["datasets"][name] = entry
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    _table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
