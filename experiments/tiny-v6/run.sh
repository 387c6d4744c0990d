#!/bin/sh
# v6's sizing sweep, resumable (rerun this): pools once, then each candidate's report as it ends.
cd "$(dirname "$0")/../.." || exit 1
export OMP_NUM_THREADS=1 PYTHONPATH=.
mkdir -p outputs/tiny-v6/sweep
nice -n 19 .venv/bin/python experiments/tiny-v6/sizing_sweep.py --out outputs/tiny-v6/sweep \
    >> outputs/tiny-v6/sweep/sweep.log 2>&1
