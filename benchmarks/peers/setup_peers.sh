#!/usr/bin/env bash
# Create one virtual environment per DP-SQL peer library under .venv-peers/<peer>/ and install its
# pinned requirements (benchmarks/peers/requirements-<peer>.txt). The peers pin versions that
# conflict with each other (numpy, pandas, pyspark, polars), hence one venv each.
#
# Idempotent: a venv is (re)installed only when its requirements file is newer than its stamp.
# A peer whose install fails is reported and skipped (the benchmark then records why it did not
# run); the script still exits 0 so the other peers and dpcurator are measured.
#
# Usage: bash benchmarks/peers/setup_peers.sh [peer ...]    (default: every peer)
#        PYTHON=python3.11 PEERS_DIR=/elsewhere bash benchmarks/peers/setup_peers.sh
set -u

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
PEERS_DIR="${PEERS_DIR:-$REPO/.venv-peers}"
ALL_PEERS=(smartnoise opendp pipelinedp tumult diffprivlib)

if [ "$#" -gt 0 ]; then
    PEERS=("$@")
else
    PEERS=("${ALL_PEERS[@]}")
fi

mkdir -p "$PEERS_DIR"
status=0
for peer in "${PEERS[@]}"; do
    req="$HERE/requirements-$peer.txt"
    venv="$PEERS_DIR/$peer"
    stamp="$venv/.stamp"
    log="$PEERS_DIR/$peer.install.log"
    if [ ! -f "$req" ]; then
        echo "setup_peers: no requirements file for '$peer' ($req)" >&2
        status=1
        continue
    fi
    if [ -f "$stamp" ] && [ "$stamp" -nt "$req" ]; then
        echo "setup_peers: $peer up to date ($venv)"
        continue
    fi
    echo "setup_peers: installing $peer into $venv (log: $log)"
    rm -f "$stamp"
    if [ ! -x "$venv/bin/python" ]; then
        "$PYTHON" -m venv "$venv" || { echo "setup_peers: venv for $peer failed" >&2; status=1; continue; }
    fi
    if "$venv/bin/python" -m pip install --quiet --upgrade pip >"$log" 2>&1 \
        && "$venv/bin/python" -m pip install --quiet -r "$req" >>"$log" 2>&1; then
        touch "$stamp"
        rm -f "$venv.install-failed"
        echo "setup_peers: $peer ready"
    else
        echo "setup_peers: installing $peer FAILED; last lines of $log:" >&2
        tail -n 15 "$log" >&2
        # Keep the reason where the benchmark finds it.
        tail -n 15 "$log" >"$venv.install-failed" 2>/dev/null || true
    fi
done
exit "$status"
