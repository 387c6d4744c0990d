"""`tempo eval synthetic`: a model on unseen synthetic long videos, ATA against the paper's ablations.

Every video gets one question per family (needle, grounding, counting, global, and since issue 47 interval and
order, drawn from a stream of their own so the first four stay as they were; `--families` picks). Each is
compressed once through the real pipeline (the video is written to mp4 and read back), then the same compression
is allocated by every strategy at the same budget (ablation B) and, for ATA, truncated at the head or the tail
(ablation C). An oracle row runs ATA on the ground-truth relevance instead of the model's: the gap between it and
ATA is what the compressor's relevance costs, and what is left below it is the decoder's. ATA's margins over
uniform allocation and head over tail truncation come with 95% paired-bootstrap intervals, and a budget sweep
runs ATA and uniform from 1/32 of all memory tokens to all of them. Answers naming a time outside the video
(grounding and interval) are counted. Seeds are below the range used for training, so no video was seen in
training.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from ..command_line import run_alone
from ..config import AllocationConfig, Zoom
from ..errors import InputError
from ..model import from_pretrained
from ..paths import cache_folder
from ..render.figures import write_sweep_figure
from ..synthetic import ALL_FAMILIES
from .eval_run import evaluate, localisation
from .eval_tables import print_report
from .eval_videos import write_jobs
from .eval_zoom import ZOOMS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=40, help="number of videos (default 40)")
    parser.add_argument("--seed", type=int, default=0, help="first video seed (default 0)")
    parser.add_argument("--budget", type=int, help="fixed token budget (default: a quarter of all memory tokens)")
    parser.add_argument("--model", default=os.environ.get("TEMPO_MODEL"), help="default: the embedded Tempo-Tiny")
    parser.add_argument("--min-duration", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("--max-duration", type=float, default=3600.0, help="seconds (default 3600)")
    parser.add_argument("--videos-dir", default=cache_folder("synthetic"),
                        help="where the rendered mp4s are kept between runs")
    parser.add_argument("--k-min", type=int, default=AllocationConfig().k_min,
                        help=f"ATA's per-segment floor (default {AllocationConfig().k_min})")
    parser.add_argument("--json", dest="json_out", help="write the full report here")
    parser.add_argument("--plot", help="draw the budget sweep to this PNG (and an offline HTML beside it)")
    parser.add_argument("--no-sweep", action="store_true", help="skip the budget sweep (about half the time)")
    parser.add_argument("--localisation-only", action="store_true",
                        help="only the compressor: how often its most relevant segment is on the evidence")
    parser.add_argument("--write-jobs", metavar="JOBS", help="instead of evaluating, write the questions as "
                                                             "`tempo batch` jobs to this file")
    parser.add_argument("--families", default=",".join(ALL_FAMILIES),
                        help="comma-separated question families (default: all six; "
                             "needle,grounding,counting,global gives v4's reports exactly)")
    parser.add_argument("--zoom", default=Zoom.AUTO.value, choices=ZOOMS,
                        help="also answer with this zoom setting, against ATA over the whole video (default auto)")
    parser.add_argument("--budgets", default="512,1024", help="with --write-jobs: one job per question and budget "
                                                              "(comma-separated; default 512,1024)")


def run_evaluation(args: argparse.Namespace) -> int:
    """`tempo eval synthetic`: the tables on stdout, the report in `--json`, the sweep in `--plot`."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    for chatty in ("kaleido", "choreographer"):  # the PNG renderer logs every browser step at INFO
        logging.getLogger(chatty).setLevel(logging.WARNING)
    if args.n < 1:
        raise InputError("--n must be at least 1")
    if args.plot and args.no_sweep:
        raise InputError("--plot draws the budget sweep; drop --no-sweep")
    families = tuple(f for f in ALL_FAMILIES if f in args.families.split(","))
    unknown = set(args.families.split(",")) - set(ALL_FAMILIES)
    if unknown or not families:
        raise InputError(f"--families takes some of {','.join(ALL_FAMILIES)}, got {args.families!r}")
    try:
        if args.write_jobs:
            budgets = [int(b) for b in args.budgets.split(",")]
            count = write_jobs(args.write_jobs, args.n, args.seed, budgets, args.min_duration, args.max_duration,
                               args.videos_dir, families)
            print(f"wrote {count} jobs to {args.write_jobs}")
            return 0
        model = from_pretrained(args.model, device="cpu")
        if args.localisation_only:
            report = localisation(model, args.n, args.seed, args.min_duration, args.max_duration, args.videos_dir,
                                  families)
            print(json.dumps(report, indent=2))
        else:
            report = evaluate(model, args.n, args.seed, args.budget, args.min_duration, args.max_duration,
                              args.videos_dir, k_min=args.k_min, sweep=not args.no_sweep, families=families,
                              zoom=args.zoom)
            print_report(report)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
    if args.plot and not args.localisation_only:
        try:
            write_sweep_figure(report, args.plot)
        except InputError as exc:
            print(exc, file=sys.stderr)
            return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m tempo.train.evaluate`, the old name of `tempo eval synthetic`."""
    return run_alone("python -m tempo.train.evaluate", __doc__.splitlines()[0], add_arguments, run_evaluation, argv)


if __name__ == "__main__":
    sys.exit(main())
