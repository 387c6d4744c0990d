"""`python -m tempo.synthetic`, the old name of `tempo synthetic`, kept for a release."""

import sys

from ..command_line import run_alone
from . import cli


def main(argv: list[str] | None = None) -> int:
    return run_alone("python -m tempo.synthetic", cli.DESCRIPTION, cli.add_arguments, cli.render, argv)


if __name__ == "__main__":
    sys.exit(main())
