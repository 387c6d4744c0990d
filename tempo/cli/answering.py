"""The commands that answer questions: `tempo ask` (one question about a video, from the terminal, showing where
tokens go), `tempo batch` (many jobs from a JSON Lines file) and `tempo figures` (allocation figures of a batch's
results)."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from typing import TextIO

from .. import batch as batch_module
from .. import model as tempo_model
from ..config import Limits, RunConfig
from ..engine import check_question, run
from ..errors import InputError
from ..events import AllocationDone, AnswerToken, Finished, SegmentCompressed, VideoProbed, Zoomed
from ..model import CheckpointSpec
from ..moments import shown
from ..render import figures as figures_module
from ..render.progress import RunProgress
from ..render.report import Asked, write_report
from ..render.terminal import ProgressLine
from ..render.text import timings_text
from ..settings import CLI, limits_from_env, settings, with_settings
from ..times import clock, span

BAR = " ▁▂▃▄▅▆▇█"

Work = Callable[[argparse.Namespace, TextIO, TextIO], int]  # a command that writes to the streams it is given


def sparkline(values: Sequence[float]) -> str:
    """One character per value, scaled to the largest."""
    top = max(values, default=0) or 1
    return "".join(BAR[min(len(BAR) - 1, round(v / top * (len(BAR) - 1)))] for v in values)


def segment_done(progress: ProgressLine, event: SegmentCompressed) -> None:
    """The command line's progress after a segment: how far, where in the video, its relevance and the time to go."""
    segment = event.segment
    done = segment.index + 1
    progress.show(done, f"compressing {done}/{event.num_segments} segments  [{clock(segment.start, 1)}-"
                        f"{clock(segment.end, 1)}] relevance {segment.relevance:.3f}  ETA {progress.eta(done):4.0f}s")


def add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=os.environ.get("TEMPO_MODEL"),
                        help="checkpoint directory or hub id (default: $TEMPO_MODEL, else the embedded Tempo-Tiny)")
    parser.add_argument("--base", default=os.environ.get("TEMPO_BASE"),
                        help="base Qwen3-VL directory or hub id (default: $TEMPO_BASE, else the checkpoint's)")
    parser.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: cuda if available)")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"],
                        help="default: bf16 on CUDA, fp32 on CPU")
    parser.add_argument("--verbose", action="store_true", help="log loading details")


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """A flag for every setting the table offers on the command line; values are checked by the table when the run
    is configured, with the message the page and the API give."""
    for setting in settings(CLI):
        flag = "--" + setting.name.replace("_", "-")
        if setting.kind is bool:
            parser.add_argument(flag, action="store_true", default=None, help=setting.describe())
        else:
            parser.add_argument(flag, type=str if setting.choices else number, default=None,
                                metavar="{" + ",".join(setting.choices) + "}" if setting.choices else None,
                                help=setting.describe())


def number(text: str) -> object:
    """A number as typed (int or float); anything else is passed on as text, for the settings check to explain."""
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    return text


def add_ask_arguments(ask: argparse.ArgumentParser) -> None:
    ask.add_argument("--video", required=True, help="video file (mp4, mkv, webm, ...)")
    ask.add_argument("--question", "--query", dest="question", required=True,
                     help="the question (--query is its old name, kept for a release)")
    add_model_options(ask)
    add_run_options(ask)
    ask.add_argument("--json", dest="json_out", help="write the answer, per-segment data and timings here")
    ask.add_argument("--report", help="write a self-contained HTML report of the run here (opens offline)")


def add_batch_arguments(batch: argparse.ArgumentParser) -> None:
    batch.add_argument("--input", required=True, help="jobs: one JSON object per line with id, video, question "
                                                      "and optional settings (budget, strategy, k_min, ...)")
    batch.add_argument("--output", required=True, help="results, one JSON line per job (appended; resumable)")
    batch.add_argument("--reports", help="also write one HTML report per answered job into this folder")
    batch.add_argument("--engine", choices=["local", "ray"], default="local",
                       help="local: this process (default); ray: a Ray cluster, one model per actor (extra tempo[ray])")
    batch.add_argument("--address", help="--engine ray: the cluster to join (default: start Ray on this machine)")
    batch.add_argument("--actors", type=int, help="--engine ray: models answering at once (default: one per GPU, "
                                                  "else 1)")
    add_model_options(batch)
    add_run_options(batch)


def add_figures_arguments(figures: argparse.ArgumentParser) -> None:
    figures.add_argument("results", help="a batch's results (JSON Lines)")
    figures.add_argument("--out", required=True, help="folder for the PNG and HTML figures and figures.json")
    figures.add_argument("--split", choices=["auto", "family", "budget", "none"], default="auto",
                         help="split the tokens-per-segment histogram (default: by family when the jobs carry one, "
                              "else by budget when budgets differ)")
    figures.add_argument("--verbose", action="store_true", help="log details")


def run_config(args: argparse.Namespace, limits: Limits, spec: CheckpointSpec | None) -> RunConfig:
    """The settings given on the command line over the library's defaults, checked for this checkpoint (without
    one, the ranges that do not depend on it)."""
    given = {s.name: getattr(args, s.name) for s in settings(CLI) if getattr(args, s.name) is not None}
    return with_settings(RunConfig(limits=limits), given, spec)


def ask(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    limits = limits_from_env()
    check_question(args.question, limits.max_question_chars)  # before the (slow) model load
    model = tempo_model.from_pretrained(args.model, base=args.base, device=args.device, dtype=args.dtype,
                                         int8=bool(args.int8) or limits.int8)
    config = run_config(args, limits, model.spec)
    progress, run_progress = None, RunProgress(args.question)
    for event in run(model, args.video, args.question, config):
        run_progress.update(event)
        if isinstance(event, VideoProbed):
            err.write(f"{os.path.basename(event.path)}: {clock(event.duration, 1)} at {event.native_fps:.2f} fps, "
                      f"{event.width}x{event.height} -> {event.sampled_frames} frames, "
                      f"{event.num_segments} segments\n")
            progress = ProgressLine(err, event.num_segments, every=0.1)
        elif isinstance(event, SegmentCompressed):
            assert progress is not None  # made on the VideoProbed that comes first
            segment_done(progress, event)
        elif isinstance(event, Zoomed):
            err.write(f"looking closer at {span(*event.window)} of {clock(event.video.duration, 1)}: "
                      f"{event.reason}\n")
        elif isinstance(event, AllocationDone):
            err.write(f"tokens per segment {sparkline(event.tokens)}  {event.tokens_used}/{event.budget} used "
                      f"({event.strategy}, k_min {event.k_min}, k_max {event.k_max})\n")
            if event.context_truncated:
                err.write(f"warning: {event.context_truncated} visual positions were cut to fit the context\n")
        elif isinstance(event, AnswerToken):
            out.write(event.text)
            out.flush()
        elif isinstance(event, Finished):
            out.write("\n")
            err.write(f"done in {event.timings['total']:.1f} s: {timings_text(event.timings, event.alongside)}\n")
            if event.moments:
                err.write("moments: " + "  ".join(f"{m.rank}. {m.words}" for m in shown(event.moments)) + "\n")
            if args.json_out:
                with open(args.json_out, "w", encoding="utf-8") as f:
                    json.dump(event.to_dict(), f, indent=2, ensure_ascii=False)
                err.write(f"wrote {args.json_out}\n")
            if args.report:
                write_report(Asked(run_progress), args.report, model=model.spec.name)
                err.write(f"wrote {args.report}\n")
    return 0


def batch(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Exit status 0 when every job is answered, 1 when some failed (their lines say why)."""
    limits = limits_from_env()
    check_engine_options(args)
    jobs = batch_module.read_jobs(args.input)  # before the (slow) model load: a missing file is refused at once
    if args.engine == "ray":
        from ..integrations import ray_batch  # an extra: imported only when asked for

        # no model here: each job checks the settings against the checkpoint on the actor that runs it
        summary = ray_batch.run_batch(jobs, args.output, run_config(args, limits, None), err,
                                      ray_batch.Loading(args.model, args.base, args.device, args.dtype,
                                                        bool(args.int8) or limits.int8),
                                      ray_batch.Cluster(args.address, args.actors), args.reports)
    else:
        model = tempo_model.from_pretrained(args.model, base=args.base, device=args.device, dtype=args.dtype,
                                         int8=bool(args.int8) or limits.int8)
        summary = batch_module.run_batch(model, jobs, args.output, run_config(args, limits, model.spec), err,
                                         args.reports)
    err.write(f"{summary}; results in {args.output}\n")
    return 1 if summary.failed else 0


def check_engine_options(args: argparse.Namespace) -> None:
    """--address and --actors only mean something to the Ray engine."""
    if args.engine != "ray" and (args.address is not None or args.actors is not None):
        raise InputError("--address and --actors are options of --engine ray.")
    if args.actors is not None and args.actors < 1:
        raise InputError(f"--actors must be at least 1 (got {args.actors}).")


def figures(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    results = figures_module.read_results(args.results)
    drawn = figures_module.write_figures(results, args.out, args.split)
    err.write(f"{drawn['jobs']} jobs -> {', '.join(name + '.png/.html' for name in figures_module.NAMES)} and "
              f"figures.json in {args.out}\n")
    return 0

