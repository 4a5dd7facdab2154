"""mbi 2.0's fitted model, for bench_synth_stopping.py: its marginals, and its table's.

Fits mbi's MirrorDescent estimator to stored noisy marginals (as ``synth_mbi.py``) and saves the
model's normalised marginals over the stored evaluation cliques (``model:`` keys), so that
inference engines are compared on their models, without the sampling noise of a synthetic
table; and the same marginals of the table its ``synthetic_data`` draws (``table:`` keys)::

    .venv-peers/synth-mbi/bin/python benchmarks/peers/synth_mbi_marginals.py IN.npz OUT.npz ITERS
"""

import json
import sys
import time
import warnings

import numpy as np

warnings.filterwarnings("ignore")


def main() -> None:
    source, out, iters = sys.argv[1], sys.argv[2], int(sys.argv[3])
    import jax

    jax.config.update("jax_enable_x64", True)
    from mbi import Domain, LinearMeasurement
    from mbi.estimation import MirrorDescent

    stored = np.load(source, allow_pickle=True)
    sizes = [int(s) for s in stored["sizes"]]
    names = [f"c{i}" for i in range(len(sizes))]
    domain = Domain(names, sizes)
    measurements = [
        LinearMeasurement(
            np.asarray(y, dtype=np.float64), tuple(names[a] for a in clique), float(s)
        )
        for clique, y, s in zip(stored["cliques"], stored["values"], stored["sigmas"], strict=True)
    ]
    start = time.perf_counter()
    model = MirrorDescent().estimate(domain, measurements, iters=iters)
    synthetic = model.synthetic_data(rows=int(stored["rows"]))
    seconds = time.perf_counter() - start
    kept = {}
    for clique in stored["eval"]:
        attrs = tuple(names[a] for a in clique)
        for kind, counts in (
            ("model", model.project(attrs).datavector(flatten=True)),
            ("table", synthetic.project(attrs).datavector(flatten=True)),
        ):
            values = np.asarray(counts, dtype=np.float64)
            kept[f"{kind}:" + "_".join(map(str, clique))] = values / values.sum()
    np.savez(out, **kept)
    print(json.dumps({"seconds": seconds}))


if __name__ == "__main__":
    main()
