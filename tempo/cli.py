"""`python -m tempo infer`: answer a question about a video from the terminal, showing where tokens go;
`python -m tempo batch`: many jobs from a JSON Lines file; `python -m tempo figures`: allocation figures of a
batch's results."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import TextIO

from . import batch as batch_module, figures as figures_module
from .config import STRATEGIES, TRUNCATIONS, AllocationConfig, GenerationConfig, Limits, RunConfig, SamplingConfig

SAMPLING, ALLOCATION, GENERATION, RUN = SamplingConfig(), AllocationConfig(), GenerationConfig(), RunConfig()
from .errors import TempoError
from .events import AllocationDone, AnswerToken, Finished, SegmentCompressed, VideoProbed

BAR = " ▁▂▃▄▅▆▇█"


def sparkline(values: list[float]) -> str:
    """One character per value, scaled to the largest."""
    top = max(values, default=0) or 1
    return "".join(BAR[min(len(BAR) - 1, round(v / top * (len(BAR) - 1)))] for v in values)


def _clock(seconds: float) -> str:
    return f"{int(seconds) // 60:02d}:{seconds % 60:04.1f}"


class Progress:
    """Segment progress on stderr: one rewritten line on a terminal, a line per 10% otherwise."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.tty = stream.isatty()
        self.started = time.perf_counter()
        self.last_decile = -1

    def segment(self, event: SegmentCompressed) -> None:
        done = event.index + 1
        elapsed = time.perf_counter() - self.started
        eta = elapsed / done * (event.num_segments - done)
        line = (f"compressing {done}/{event.num_segments} segments  [{_clock(event.start)}-{_clock(event.end)}] "
                f"relevance {event.relevance:.3f}  ETA {eta:4.0f}s")
        if self.tty:
            self.stream.write("\r" + line + ("\n" if done == event.num_segments else ""))
        elif done * 10 // event.num_segments > self.last_decile or done == event.num_segments:
            self.last_decile = done * 10 // event.num_segments
            self.stream.write(line + "\n")
        self.stream.flush()


class UsageError(Exception):
    """A command line argparse cannot parse (reported by `main` as one `error:` line, status 2)."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print the usage and exit; main reports it like other errors
        raise UsageError(f"{message} (see `{self.prog} --help`)")


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
    """The settings of a run; their defaults are tempo.config's (the budget: the checkpoint's)."""
    parser.add_argument("--budget", type=int, default=ALLOCATION.budget,
                        help="visual token budget (default: the checkpoint's, 8192 for Tempo-6B)")
    parser.add_argument("--max-frames", type=int, default=SAMPLING.max_frames,
                        help=f"cap on sampled frames (default {SAMPLING.max_frames})")
    parser.add_argument("--fast-seek", action="store_true",
                        help="decode key frames only: an hour in seconds, but not the released sampling")
    parser.add_argument("--k-min", type=int, default=ALLOCATION.k_min,
                        help=f"tokens every segment keeps (default {ALLOCATION.k_min})")
    parser.add_argument("--strategy", choices=tuple(STRATEGIES), default=ALLOCATION.strategy,
                        help=f"allocation strategy (default {ALLOCATION.strategy})")
    parser.add_argument("--truncation", choices=tuple(TRUNCATIONS), default=ALLOCATION.truncation,
                        help=f"intra-segment reduction (default {ALLOCATION.truncation})")
    parser.add_argument("--temperature", type=float, default=GENERATION.temperature, help="0 = greedy (default)")
    parser.add_argument("--max-new-tokens", type=int, default=GENERATION.max_new_tokens,
                        help=f"default {GENERATION.max_new_tokens}")
    parser.add_argument("--micro-batch", type=int, default=RUN.micro_batch,
                        help=f"segments per compressor forward pass (default {RUN.micro_batch})")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m tempo", description="Query-aware long-video compression.")
    commands = parser.add_subparsers(dest="command", required=True)
    infer = commands.add_parser("infer", help="answer a question about a video")
    infer.add_argument("--video", required=True, help="video file (mp4, mkv, webm, ...)")
    infer.add_argument("--query", required=True, help="the question")
    add_model_options(infer)
    add_run_options(infer)
    infer.add_argument("--json", dest="json_out", help="write the answer, per-segment data and timings here")
    infer.add_argument("--report", help="write a self-contained HTML report of the run here (opens offline)")
    batch = commands.add_parser("batch", help="answer many (video, question) jobs from a JSON Lines file",
                                description=batch_module.__doc__.split("\n\n")[0])
    batch.add_argument("--input", required=True, help="jobs: one JSON object per line with id, video, question "
                                                      "and optional settings (budget, strategy, k_min, ...)")
    batch.add_argument("--output", required=True, help="results, one JSON line per job (appended; resumable)")
    batch.add_argument("--reports", help="also write one HTML report per answered job into this folder")
    add_model_options(batch)
    add_run_options(batch)
    figures = commands.add_parser("figures", help="the paper's allocation figures for a batch's results",
                                  description=figures_module.__doc__.split("\n\n")[0])
    figures.add_argument("results", help="a batch's results (JSON Lines)")
    figures.add_argument("--out", required=True, help="folder for the PNG and HTML figures and figures.json")
    figures.add_argument("--split", choices=["auto", "family", "budget", "none"], default="auto",
                         help="split the tokens-per-segment histogram (default: by family when the jobs carry one, "
                              "else by budget when budgets differ)")
    figures.add_argument("--verbose", action="store_true", help="log details")
    return parser


def run_config(args: argparse.Namespace, limits: Limits) -> RunConfig:
    """The command line's settings as a RunConfig (checked by the library when it runs)."""
    return RunConfig(
        sampling=SamplingConfig(max_frames=args.max_frames, fast_seek=args.fast_seek),
        allocation=AllocationConfig(budget=args.budget, k_min=args.k_min, strategy=args.strategy,
                                    truncation=args.truncation),
        generation=GenerationConfig(max_new_tokens=args.max_new_tokens, temperature=args.temperature),
        limits=limits,
        micro_batch=args.micro_batch,
    )


def infer(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from . import model as tempo_model, pipeline, report, share

    limits = Limits.from_env()
    pipeline.check_question(args.query, limits.max_question_chars)  # before the (slow) model load
    model = tempo_model.from_pretrained(args.model, base=args.base, device=args.device, dtype=args.dtype)
    config = run_config(args, limits)
    progress = Progress(err)
    frames = []
    for event in pipeline.run(model, args.video, args.query, config):
        if isinstance(event, VideoProbed):
            err.write(f"{os.path.basename(event.path)}: {_clock(event.duration)} at {event.native_fps:.2f} fps, "
                      f"{event.width}x{event.height} -> {event.sampled_frames} frames, "
                      f"{event.num_segments} segments\n")
        elif isinstance(event, SegmentCompressed):
            progress.segment(event)
            frames.append(event.frame)
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
            err.write(f"done in {event.timings['total']:.1f}s  " +
                      "  ".join(f"{k} {v:.2f}s" for k, v in event.timings.items() if k != "total") + "\n")
            if args.json_out:
                with open(args.json_out, "w", encoding="utf-8") as f:
                    json.dump(event.to_dict(), f, indent=2, ensure_ascii=False)
                err.write(f"wrote {args.json_out}\n")
            if args.report:
                page = share.html_report(event, args.query, report.key_frames(event.segments, frames),
                                         model=model.spec.name)
                with open(args.report, "w", encoding="utf-8") as f:
                    f.write(page)
                err.write(f"wrote {args.report}\n")
    return 0


def batch(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Exit status 0 when every job is answered, 1 when some failed (their lines say why)."""
    from . import model as tempo_model

    limits = Limits.from_env()
    jobs = batch_module.read_jobs(args.input)  # before the (slow) model load: a missing file is refused at once
    model = tempo_model.from_pretrained(args.model, base=args.base, device=args.device, dtype=args.dtype)
    summary = batch_module.run_batch(model, jobs, args.output, run_config(args, limits), err, args.reports)
    err.write(f"{summary}; results in {args.output}\n")
    return 1 if summary.failed else 0


def figures(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    results = figures_module.read_results(args.results)
    drawn = figures_module.write_figures(results, args.out, args.split)
    err.write(f"{drawn['jobs']} jobs -> {', '.join(name + '.png/.html' for name in figures_module.NAMES)} and "
              f"figures.json in {args.out}\n")
    return 0


def main(argv: list[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    try:
        args = build_parser().parse_args(argv)
    except UsageError as exc:
        err.write(f"error: {exc}\n")
        return 2
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        return {"infer": infer, "batch": batch, "figures": figures}[args.command](args, out, err)
    except TempoError as exc:
        err.write(f"error: {exc}\n")
        return 2
    except OSError as exc:
        err.write(f"error: {exc.strerror or exc} ({exc.filename})\n" if exc.filename else f"error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return 130
