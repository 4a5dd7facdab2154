"""The Parquet files of ``bench_engines.py``, generated once into ``benchmarks/results/data/``.

Columns ``unit_id`` (int64), ``grp`` (int64), ``value`` (float64 in [0, 100]); every unit's rows
lie in one group; ``engines_<rows>_rpu<lo>-<hi>_g<groups>.parquet``. The conventions of
``bench_curator.py``'s data (``_sqlbench_common.generate``): a deterministic seed, unit sizes
uniform in ``[lo, hi]``, each unit in one uniform group, values normal around a per-group mean
(uniform in [20, 80]) with sd 15 clipped to [0, 100], rows shuffled so that a unit's rows are
not adjacent. One difference: row groups of 2**17 rows (not 2**20), so that a 1M-row file has
8 row groups and both engines read it with all their threads (DuckDB and Spark split a Parquet
file by row groups; a 1M-row file of one row group is read by one thread).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "peers"))

import _sqlbench_common as sqlbench

SEED = 20261203
ROW_GROUP = 1 << 17


@dataclass(frozen=True)
class Shape:
    """How many rows each unit has (uniform in ``[lo, hi]``) and the number of groups."""

    key: str
    lo: int
    hi: int
    groups: int

    def label(self, rows: int) -> str:
        per_unit = f"{self.lo}-{self.hi}" if self.lo != self.hi else f"{self.lo}"
        if self.lo == self.hi:
            return f"{rows // self.lo:,} units x {per_unit} rows, {self.groups:,} groups"
        return f"{per_unit} rows per unit, {self.groups:,} groups"

    def path(self, directory: Path, rows: int) -> Path:
        return directory / f"engines_{rows}_rpu{self.lo}-{self.hi}_g{self.groups}.parquet"


BASE = Shape("base", 1, 5, sqlbench.GROUPS)
ROWS10 = Shape("rows10", 10, 10, sqlbench.GROUPS)
ROWS100 = Shape("rows100", 100, 100, sqlbench.GROUPS)
GROUPS100K = Shape("groups100k", 1, 5, 100_000)
SHAPES = {s.key: s for s in (BASE, ROWS10, ROWS100, GROUPS100K)}


def generate_shape(shape: Shape, rows: int, path: Path, seed: int = SEED) -> None:
    """Write ``rows`` rows of ``shape`` to ``path`` (a fixture: numpy's seeded generator)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    if shape.lo == shape.hi:
        sizes = np.full(-(-rows // shape.lo), shape.lo, dtype=np.int64)
    else:
        draw = rows * 2 // (shape.lo + shape.hi) + 16
        sizes = rng.integers(shape.lo, shape.hi + 1, size=draw)
        while int(sizes.sum()) < rows:
            sizes = np.concatenate([sizes, rng.integers(shape.lo, shape.hi + 1, size=draw)])
    cut = int(np.searchsorted(np.cumsum(sizes), rows))
    sizes = sizes[: cut + 1].copy()
    sizes[-1] -= int(sizes.sum()) - rows
    n_units = sizes.size
    unit_group = rng.integers(0, shape.groups, size=n_units)
    group_mean = rng.uniform(20.0, 80.0, size=shape.groups)
    unit_id = np.repeat(np.arange(n_units, dtype=np.int64), sizes)
    grp = np.repeat(unit_group, sizes).astype(np.int64)
    value = np.clip(rng.normal(group_mean[grp], 15.0), sqlbench.LOWER, sqlbench.UPPER)
    order = rng.permutation(rows)
    table = pa.table(
        {"unit_id": unit_id[order], "grp": grp[order], "value": value[order].astype(np.float64)}
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    pq.write_table(table, tmp, row_group_size=ROW_GROUP)
    tmp.replace(path)


def ensure(shape: Shape, rows: int, directory: Path) -> Path:
    """The file of ``shape`` at ``rows`` rows, generated if missing."""
    path = shape.path(directory, rows)
    if not path.exists():
        import time

        t0 = time.perf_counter()
        generate_shape(shape, rows, path)
        print(f"generated {path} in {time.perf_counter() - t0:.1f} s", flush=True)
    return path


def prewarm(path: Path) -> None:
    """Read the file once so that every measurement finds it in the OS page cache."""
    with path.open("rb") as f:
        while f.read(1 << 24):
            pass


if __name__ == "__main__":
    # python data.py SHAPE ROWS DIRECTORY: generate in a process of its own (the driver stays small)
    ensure(SHAPES[sys.argv[1]], int(sys.argv[2]), Path(sys.argv[3]))
