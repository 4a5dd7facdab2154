#!/usr/bin/env python3
"""Convert PYPOWER's IEEE test cases into the small JSON files of ``dpcurator.networks``.

The cases are MATPOWER's (R. D. Zimmerman, C. E. Murillo-Sanchez, R. J. Thomas, "MATPOWER:
steady-state operations, planning and analysis tools for power systems research and education",
IEEE TPS 26(1), 2011), as ported to Python by PYPOWER (BSD 3-clause, (c) 1996-2015 PSERC). Only
what the DC optimal power flow needs is kept: bus numbers and active loads (MW), in-service
branches (reactance in p.u., tap ratio, long-term rating rateA in MVA), in-service generators
(bus, Pmax, Pmin in MW) and their polynomial costs (c2, c1, c0).

Usage::

    pip download --no-deps pypower==5.1.21 && unzip pypower-5.1.21-*.whl -d /tmp/pypower
    python scripts/build_power_cases.py /tmp/pypower
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

CASES = {
    "ieee14": "case14",
    "ieee30": "case30",
    "ieee39": "case39",
    "ieee57": "case57",
    "ieee118": "case118",
}
OUT = Path(__file__).resolve().parents[1] / "src" / "dpcurator" / "networks" / "data"


def main(root: str) -> None:
    """Write one JSON file per case from the PYPOWER unpacked under ``root``."""
    sys.path.insert(0, root)
    for name, module in CASES.items():
        case = getattr(importlib.import_module(f"pypower.{module}"), module)()
        bus, branch, gen, cost = case["bus"], case["branch"], case["gen"], case["gencost"]
        assert (cost[:, 0] == 2).all() and (cost[:, 3] == 3).all(), "quadratic costs expected"
        data = {
            "name": name,
            "source": f"MATPOWER {module} via PYPOWER 5.1.21 (BSD 3-clause)",
            "base_mva": float(case["baseMVA"]),
            "bus": [[int(b[0]), int(b[1]), float(b[2])] for b in bus],
            "branch": [
                [int(r[0]), int(r[1]), float(r[3]), float(r[8]), float(r[5])]
                for r in branch
                if r[10] > 0
            ],
            "gen": [[int(g[0]), float(g[8]), float(g[9])] for g in gen if g[7] > 0],
            "gencost": [
                [float(c[4]), float(c[5]), float(c[6])]
                for c, g in zip(cost, gen, strict=True)
                if g[7] > 0
            ],
        }
        text = json.dumps(data, separators=(",", ":"))
        (OUT / f"{name}.json").write_text(text + "\n")
        print(name, len(text), "bytes")


if __name__ == "__main__":
    main(sys.argv[1])
