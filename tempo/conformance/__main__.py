"""`python -m tempo.conformance`, the old name of `tempo conformance`, kept for a release."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
