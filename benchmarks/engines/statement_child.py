"""Run SQL statements in order on a fresh DuckDB connection: ``statement_child.py TASK.json``.

One child of ``bench_engines.py --statements --memory``: its peak memory (``ru_maxrss``, read by
``launch.py``) is that of the statements alone, or of the imports alone. TASK.json holds
``settings`` (DuckDB settings set on the connection first), ``statements`` (SQL, run in order,
results fetched) and ``imports`` (modules imported first, with ``src`` put first on the path;
no statement is run when there are imports, and DuckDB is then not imported by this script).
Prints one JSON line per step with this process's peak resident memory so far (VmHWM, MiB)
and the step's CPU seconds (user + system, all threads).
"""

from __future__ import annotations

import importlib
import json
import resource
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import common  # noqa: E402


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(task: dict[str, Any]) -> None:
    if task.get("imports"):
        sys.path.insert(0, task["src"])
        for module in task["imports"]:
            importlib.import_module(module)
        common.emit("imports", modules=task["imports"], hwm_mib=common.hwm_mib())
        return
    import duckdb

    conn = duckdb.connect()
    for name, value in task.get("settings", {}).items():
        conn.execute(f"SET {name} = '{value}'")
    common.emit("connected", hwm_mib=common.hwm_mib())
    for i, sql in enumerate(task["statements"]):
        c0 = _cpu()
        conn.execute(sql).fetchall()
        common.emit("statement", i=i, hwm_mib=common.hwm_mib(), cpu_seconds=_cpu() - c0)
    conn.close()


def main() -> int:
    task = json.loads(Path(sys.argv[1]).read_text())
    return common.main_guard(lambda: run(task))


if __name__ == "__main__":
    sys.exit(main())
