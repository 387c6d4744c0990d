"""`python -m tempo.train`, the old name of `tempo train`, kept for a release."""

import sys

from ..command_line import run_alone
from . import cli


def main(argv: list[str] | None = None) -> int:
    return run_alone("python -m tempo.train", cli.__doc__, cli.add_arguments, cli.run_training, argv)


if __name__ == "__main__":
    sys.exit(main())
