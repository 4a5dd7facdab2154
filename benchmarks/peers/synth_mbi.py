"""mbi 2.0 (Private-PGM on JAX) run directly, for bench_synth.py: the inference alone.

Fits mbi's MirrorDescent estimator to the very noisy marginals dpcurator measured (cliques,
noisy counts, noise std) and draws synthetic rows with its ``synthetic_data``, so the accuracy
and time of the two inference engines compare on the same input. Run in its own environment
(benchmarks/peers/requirements-synth-mbi.txt):

    .venv-peers/synth-mbi/bin/python benchmarks/peers/synth_mbi.py IN.npz OUT.npy ITERS

The fit and sampling time (seconds) is printed as JSON on the last line.
"""

import json
import sys
import time
import warnings
from typing import Any

import numpy as np

warnings.filterwarnings("ignore")


def fitted(stored: Any, iters: int) -> tuple[Any, list[str]]:
    """mbi's MirrorDescent model of the stored marginals, and the attributes' names."""
    import jax

    jax.config.update("jax_enable_x64", True)
    from mbi import Domain, LinearMeasurement
    from mbi.estimation import MirrorDescent

    sizes = [int(s) for s in stored["sizes"]]
    names = [f"c{i}" for i in range(len(sizes))]
    measurements = [
        LinearMeasurement(
            np.asarray(y, dtype=np.float64), tuple(names[a] for a in clique), float(s)
        )
        for clique, y, s in zip(stored["cliques"], stored["values"], stored["sigmas"], strict=True)
    ]
    return MirrorDescent().estimate(Domain(names, sizes), measurements, iters=iters), names


def fitted_and_drawn(source: str, iters: int) -> tuple[Any, Any, list[str], float]:
    """The model of the stored marginals, its synthetic table, the names, and the seconds taken."""
    stored = np.load(source, allow_pickle=True)
    start = time.perf_counter()
    model, names = fitted(stored, iters)
    synthetic = model.synthetic_data(rows=int(stored["rows"]))
    return model, synthetic, names, time.perf_counter() - start


def main() -> None:
    source, out, iters = sys.argv[1], sys.argv[2], int(sys.argv[3])
    _, synthetic, names, seconds = fitted_and_drawn(source, iters)
    np.save(out, np.stack([np.asarray(synthetic.data[n]) for n in names], axis=1).astype(np.int64))
    print(json.dumps({"seconds": seconds}))


if __name__ == "__main__":
    main()
