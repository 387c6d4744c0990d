#!/bin/sh
# v6's sizing sweep: a 1/100 trial first (minutes of CPU), then the sweep itself; both resumable (rerun this).
cd "$(dirname "$0")/../.." || exit 1
export OMP_NUM_THREADS=1 PYTHONPATH=.
mkdir -p outputs/tiny-v6/trial outputs/tiny-v6/sweep
nice -n 19 .venv/bin/python experiments/tiny-v6/sizing_sweep.py --out outputs/tiny-v6/trial --scale 0.01 \
    >> outputs/tiny-v6/trial/sweep.log 2>&1 || exit 1
nice -n 19 .venv/bin/python experiments/tiny-v6/sizing_sweep.py --out outputs/tiny-v6/sweep \
    >> outputs/tiny-v6/sweep/sweep.log 2>&1
