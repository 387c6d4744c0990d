#!/bin/sh
# v7's stages 15-18, resumable (rerun this): a stage whose log (outputs/tiny-v7/stage-N.json) exists is skipped,
# the others run in order, each from the state the one before left. Stage 15 starts from v6's shipped stage 12,
# whose state file is in git history (98815db). Stage 15's encoded videos and readings before training, and a
# blend stage's pools, are saved beside the state file, so a stage cut off mid-way compresses its videos once; each
# stage also saves its training loop's progress at every progress line (stage-N-progress.pt, gone when the stage
# ends), so a cut-off stage goes on from its last save. CPU time of each stage goes to its log (/usr/bin/time).
cd "$(dirname "$0")/../.." || exit 1
# One thread: stage 15's updates took 4.3 s of wall time on two threads (8.6 CPU-s) against 3.9 CPU-s on one, so a
# second thread bought almost nothing from a budget counted in CPU-hours, and leaves the other core to evaluations.
THREADS=${THREADS:-1}
export OMP_NUM_THREADS=$THREADS PYTHONPATH=.
PYTHON=${PYTHON:-.venv/bin/python}
OUT=outputs/tiny-v7
mkdir -p "$OUT/from-v6"
if [ ! -f "$OUT/from-v6/stage.safetensors" ]; then
    git show 98815db:experiments/tiny-v6/stage.safetensors > "$OUT/from-v6/stage.partial" || exit 1
    mv "$OUT/from-v6/stage.partial" "$OUT/from-v6/stage.safetensors"
    for n in 1 2 3 4 5 6 7 8 9 10 11 12; do cp "experiments/tiny-v6/stage-$n.json" "$OUT/from-v6/"; done
fi
for stage in 15 16 17 18; do
    [ -f "$OUT/stage-$stage.json" ] && continue
    from=""
    [ "$stage" = 15 ] && from="--from $OUT/from-v6/stage.safetensors"
    # shellcheck disable=SC2086  # $from is two words or none
    /usr/bin/time -f "stage $stage: %U s user, %S s system, %e s wall" nice -n 19 "$PYTHON" -m tempo train \
        --stage "$stage" --threads "$THREADS" $from --state "$OUT/stage.safetensors" --out "$OUT/stage-$stage" \
        >> "$OUT/stage-$stage.log" 2>&1 || exit 1
done
