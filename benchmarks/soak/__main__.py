"""`python -m benchmarks.soak`: the soak, with the options its package's docstring gives."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
