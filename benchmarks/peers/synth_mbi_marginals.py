"""mbi 2.0's fitted model, for bench_synth_stopping.py: its marginals, and its table's.

Fits mbi's MirrorDescent estimator to stored noisy marginals (``synth_mbi.fitted_and_drawn``)
and saves the model's normalised marginals over the stored evaluation cliques (``model:``
keys), so that inference engines are compared on their models, without the sampling noise of a
synthetic table; and the same marginals of the table its ``synthetic_data`` draws (``table:``
keys)::

    .venv-peers/synth-mbi/bin/python benchmarks/peers/synth_mbi_marginals.py IN.npz OUT.npz ITERS

The fit and sampling time (seconds) is printed as JSON on the last line.
"""

import json
import sys

import numpy as np
from synth_mbi import fitted_and_drawn


def main() -> None:
    source, out, iters = sys.argv[1], sys.argv[2], int(sys.argv[3])
    model, synthetic, names, seconds = fitted_and_drawn(source, iters)
    kept = {}
    for clique in np.load(source, allow_pickle=True)["eval"]:
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
