"""Run one measurement and write its own peak memory: ``launch.py RUSAGE.json -- CMD ...``.

Linux counts a process's ``ru_maxrss`` from the memory of the process it was spawned from (the
high-water mark of the address space it replaced at ``exec``), so a child spawned straight from
the benchmark's driver would report at least the driver's peak. This launcher is small (the
standard library's ``os``, ``sys`` and ``json``, started with ``-I -S``): it spawns the command,
waits for it with ``os.wait4`` and writes that child's ``ru_maxrss`` (the largest of the child
and of the processes it reaped: a Spark child waits for its JVM) and CPU time to RUSAGE.json.
Its exit status is the command's.
"""

import json
import os
import sys


def main() -> int:
    out, sep, *cmd = sys.argv[1:]
    if sep != "--" or not cmd:
        sys.exit("usage: launch.py RUSAGE.json -- CMD ...")
    pid = os.posix_spawnp(cmd[0], cmd, os.environ)
    _, status, usage = os.wait4(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    with open(out, "w") as f:
        json.dump(
            {
                "returncode": code,
                "ru_maxrss_kib": usage.ru_maxrss,
                "cpu_seconds": usage.ru_utime + usage.ru_stime,
            },
            f,
        )
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
