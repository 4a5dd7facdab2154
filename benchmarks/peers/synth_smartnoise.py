"""SmartNoise Synthesizers (smartnoise-synth 1.0.8: AIM and MST on mbi 1.1) for bench_synth.py.

Run in its own environment (benchmarks/peers/requirements-synth-smartnoise.txt):

    .venv-peers/synth-smartnoise/bin/python benchmarks/peers/synth_smartnoise.py \
        IN.csv OUT.npy METHOD EPSILON DELTA SEED

IN holds the table already discretised (integer codes, every column categorical), so no budget
goes to preprocessing; OUT receives the synthetic codes; the fit and sampling time (seconds) is
printed as JSON on the last line.
"""

import json
import sys
import time
import warnings

import numpy as np
import pandas as pd

warnings.filterwarnings("ignore")


def main() -> None:
    source, out, method, epsilon, delta, seed = sys.argv[1:7]
    from snsynth import Synthesizer

    np.random.seed(int(seed))  # noqa: NPY002 - the peer draws its noise from the global one
    data = pd.read_csv(source)
    options = {"degree": 3, "max_cells": 10**6} if method == "aim" else {}
    start = time.perf_counter()
    synth = Synthesizer.create(method, epsilon=float(epsilon), delta=float(delta), **options)
    synth.fit(data, categorical_columns=list(data.columns), preprocessor_eps=0.0)
    rows = synth.sample(len(data))
    seconds = time.perf_counter() - start
    frame = pd.DataFrame(rows, columns=data.columns) if not isinstance(rows, pd.DataFrame) else rows
    np.save(out, frame[list(data.columns)].to_numpy(dtype=np.int64))
    print(json.dumps({"seconds": seconds}))


if __name__ == "__main__":
    main()
