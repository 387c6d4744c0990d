"""What every command shares, `tempo` and the modules it runs alike: one `error:` line for a bad argument, and the
old `python -m` entry points, each running one command under its old name."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from .errors import InputError

AddArguments = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace], int]


class UsageError(InputError):
    """A command line argparse cannot parse."""


class Parser(argparse.ArgumentParser):
    # argparse would print the usage and exit; the caller reports it like any other bad input
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def run_alone(prog: str, description: str | None, add_arguments: AddArguments, run: Run,
              argv: Sequence[str] | None = None) -> int:
    """An old entry point kept for a release (`python -m tempo.train` for `tempo train`): the same options and
    work; a bad argument or input exits with status 2 and one `error:` line, as argparse exits."""
    parser = Parser(prog=prog, description=description)
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except InputError as exc:
        sys.stderr.write(f"{prog}: error: {exc}\n")
        raise SystemExit(2) from None
