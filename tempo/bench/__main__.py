"""`python -m tempo.bench`, the old name of `tempo bench`, kept for a release."""

import sys

from ..command_line import run_alone
from . import cli


def main(argv: list[str] | None = None) -> int:
    return run_alone("python -m tempo.bench", cli.__doc__.splitlines()[0], cli.add_arguments, cli.run_bench, argv)


if __name__ == "__main__":
    sys.exit(main())
