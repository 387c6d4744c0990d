"""What every command shares, `tempo` and the modules it runs alike: one `error:` line for a bad argument, and the
old `python -m` entry points, each running one command under its old name after a warning that names the new one."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn, TextIO

from .errors import InputError

AddArguments = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace], int]
DROPPED_IN = "0.2.0"  # the release without the old names: the minor after pyproject's version (a test holds it)
# Each old name and the `tempo` command that replaces it (docs/cli.md).
RENAMED = {"python -m tempo.train": "tempo train", "python -m tempo.train.evaluate": "tempo eval synthetic",
           "python -m tempo.bench": "tempo bench", "python -m tempo.conformance": "tempo conformance",
           "python -m tempo.synthetic": "tempo synthetic", "python -m tempo.eval.export": "tempo eval export",
           "python -m tempo.eval.grounding": "tempo eval grounding", "tempo infer": "tempo ask",
           "--query": "--question"}


class UsageError(InputError):
    """A command line argparse cannot parse."""


class Parser(argparse.ArgumentParser):
    # argparse would print the usage and exit; the caller reports it like any other bad input
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def deprecated(old: str, err: TextIO) -> None:
    """One `warning:` line on `err`: the old name `old` still runs, until DROPPED_IN, and what replaces it."""
    err.write(f"warning: `{old}` is deprecated and will be removed in tempo {DROPPED_IN}: use `{RENAMED[old]}`\n")


def run_alone(prog: str, description: str | None, add_arguments: AddArguments, run: Run,
              argv: Sequence[str] | None = None) -> int:
    """An old entry point kept for a release (`python -m tempo.train` for `tempo train`): a warning that names the
    new command, then the same options and work; a bad argument or input exits with status 2 and one `error:` line,
    as argparse does."""
    deprecated(prog, sys.stderr)
    parser = Parser(prog=prog, description=description)
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except InputError as exc:
        sys.stderr.write(f"{prog}: error: {exc}\n")
        raise SystemExit(2) from None
