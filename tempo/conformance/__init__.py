"""Check this implementation against fixtures recorded from the released Tempo code.

    tempo conformance DIR [--device cuda] [--dtype bfloat16]

DIR is a fixture set laid out like the repository's tests/fixtures/conformance (README.md, tempo/, base/<name>/,
videos/, cases/, pixels/, ata_vectors.json). Every case and every ATA vector is compared with the recorded values;
one line is printed per case and quantity with its largest deviation, and the exit status is 1 if anything does
not match. In float32 (the fixtures' precision) every tensor must match within an absolute tolerance, on any
device. In bfloat16 a tensor must match within a relative one (`BF16_RTOL`), and the discrete results that follow
from those tensors (allocations, generated tokens, the answer) are counted apart: rounding may flip a near tie.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import torch

from ..command_line import run_alone
from ..errors import InputError
from ..model import from_pretrained
from ..model.modeling import DTYPES
from .checks import check_ata_vectors, check_case
from .fixtures import base_dir
from .report import Report


def check_set(directory: str, device: str = "cpu", dtype: torch.dtype = torch.float32,
              cases: list[str] | None = None) -> Report:
    """Every ATA vector and case of the fixture set in `directory`, the model on `device` in `dtype`."""
    torch.manual_seed(0)
    report = Report(reduced=dtype != torch.float32)
    check_ata_vectors(os.path.join(directory, "ata_vectors.json"), report)
    if torch.device(device).type == "cuda":  # float32 means float32: no TF32 in the vision tower's convolution
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False

    # Extracting the relevance direction writes a cache; keep it away from the fixtures and the user's home.
    with tempfile.TemporaryDirectory() as cache:
        os.environ.setdefault("TEMPO_CACHE", cache)
        model = from_pretrained(os.path.join(directory, "tempo"), base=base_dir(directory), device=device,
                                dtype=dtype)
        for name in cases or sorted(os.listdir(os.path.join(directory, "cases"))):
            try:
                check_case(directory, name, model, report)
            except Exception as exc:  # a crash in one case is a failure of that case, not of the run
                report.check(name, "run", False, f"raised {type(exc).__name__}: {exc}")
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", help="fixture directory (README.md, tempo/, base/, videos/, cases/, ...), e.g. "
                                          "a clone's tests/fixtures/conformance")
    parser.add_argument("--case", action="append", help="run only these cases (repeatable)")
    parser.add_argument("--device", default="cpu", help="where the model runs (default: cpu)")
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES),
                        help="the model's precision (default: float32, the fixtures')")


def run_check(args: argparse.Namespace) -> int:
    """`tempo conformance`: one line per case and quantity; status 1 if anything does not match."""
    if not os.path.isfile(os.path.join(args.directory, "ata_vectors.json")):
        raise InputError(f"{args.directory} is not a conformance fixture set (no ata_vectors.json)")
    report = check_set(args.directory, args.device, DTYPES[args.dtype], args.case)
    print("\n" + report.summary())
    return 1 if report.failures else 0


def main(argv: list[str] | None = None) -> int:
    """`python -m tempo.conformance`, the old name of `tempo conformance`."""
    return run_alone("python -m tempo.conformance", __doc__.splitlines()[0], add_arguments, run_check, argv)
