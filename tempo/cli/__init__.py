"""`tempo`, the one command (`python -m tempo` is the same): this is its tree of subcommands and the one way it
reports errors. Each subcommand's options and work live in the module that does the work; the old `python -m`
entry points run the same code under their old names (docs/cli.md)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TextIO

from .. import batch as batch_module
from .. import conformance
from ..bench import cli as bench_cli
from ..command_line import AddArguments, Parser, Run, UsageError, deprecated
from ..errors import TempoError
from ..eval import export as grounding_export
from ..eval import grounding
from ..render import figures as figures_module
from ..synthetic import cli as synthetic_cli
from ..train import cli as train_cli
from ..train import evaluate
from . import answering, checkout
from .answering import run_config, sparkline

__all__ = ["build_parser", "main", "run_config", "sparkline"]


def first_line(text: str | None) -> str | None:
    return text.strip().split("\n\n")[0] if text else None


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="tempo", description="Tempo: a small VLM compresses a long video for a question, and a "
                                              "language model answers from what it kept.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def tool(name: str, add_arguments: AddArguments, run: Run, help: str, description: str | None = None,
             into: argparse._SubParsersAction = commands) -> None:
        """A command whose module prints its own output."""
        command = into.add_parser(name, help=help, description=description or help)
        add_arguments(command)
        command.set_defaults(tool=run)

    def answering_command(name: str, add_arguments: AddArguments, work: answering.Work, help: str,
                          description: str | None = None, aliases: tuple[str, ...] = ()) -> None:
        """A command that writes to the streams `main` is given."""
        command = commands.add_parser(name, help=help, description=description or help, aliases=list(aliases))
        add_arguments(command)
        command.set_defaults(work=work)

    tool("serve", checkout.add_serve_arguments, checkout.serve, "serve the demo page and its API (runs app.py)")
    answering_command("ask", answering.add_ask_arguments, answering.ask, "answer a question about a video",
                      aliases=("infer",))
    answering_command("batch", answering.add_batch_arguments, answering.batch,
                      "answer many (video, question) jobs from a JSON Lines file", first_line(batch_module.__doc__))
    answering_command("figures", answering.add_figures_arguments, answering.figures,
                      "the paper's allocation figures for a batch's results", first_line(figures_module.__doc__))
    tool("bench", bench_cli.add_arguments, bench_cli.run_bench, "how fast a video becomes an answer, ours against the "
         "released pipeline's steps", first_line(bench_cli.__doc__))
    tool("train", train_cli.add_arguments, train_cli.run_training, "train Tempo-Tiny, one resumable stage at a time",
         first_line(train_cli.__doc__))
    evaluations = commands.add_parser("eval", help="evaluate a model", description="Evaluate a model.")
    kinds = evaluations.add_subparsers(dest="evaluation", metavar="EVALUATION", required=True)
    tool("synthetic", evaluate.add_arguments, evaluate.run_evaluation, "on unseen synthetic long videos, ATA "
         "against the paper's ablations", first_line(evaluate.__doc__), into=kinds)
    tool("grounding", grounding.add_arguments, grounding.run, "moments and interval answers scored on "
         "QVHighlights' or Charades-STA's files", grounding.DESCRIPTION, into=kinds)
    tool("export", grounding_export.add_arguments, grounding_export.run, "the synthetic world as a grounding "
         "benchmark, in both formats", grounding_export.DESCRIPTION, into=kinds)
    tool("conformance", conformance.add_arguments, conformance.run_check, "check this implementation against "
         "fixtures recorded from the released code", first_line(conformance.__doc__))
    tool("gpu-check", checkout.add_gpu_check_arguments, checkout.gpu_check, "measure Tempo-6B on a CUDA GPU "
         "(runs benchmarks/gpu/check)")
    tool("synthetic", synthetic_cli.add_arguments, synthetic_cli.render, "render a synthetic video with its "
         "ground truth and questions", synthetic_cli.DESCRIPTION)
    return parser


def main(argv: list[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Run one command; bad input is one `error:` line on `err` and exit status 2, never a traceback."""
    try:
        args = build_parser().parse_args(argv)
    except UsageError as exc:
        err.write(f"error: {exc}\n")
        return 2
    if args.command == "infer":  # argparse keeps the alias as typed
        deprecated("tempo infer", err)
    if any(given.partition("=")[0] == "--query" for given in (sys.argv[1:] if argv is None else argv)):
        deprecated("--query", err)
    if "verbose" in args:  # the tools set up their own logging
        logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                            format="%(levelname)s %(message)s")
    try:
        return args.tool(args) if "tool" in args else args.work(args, out, err)
    except TempoError as exc:
        err.write(f"error: {exc}\n")
        return 2
    except OSError as exc:
        err.write(f"error: {exc.strerror or exc} ({exc.filename})\n" if exc.filename else f"error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return 130
