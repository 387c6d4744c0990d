"""The commands that run a clone's own programs, which the library never imports: `tempo serve` (the demo,
`app.py`) and `tempo gpu-check` (`benchmarks/gpu/check`). Each runs in a child process from the clone's root."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from ..errors import InputError


def checkout() -> Path:
    """The clone this tempo runs from: the folder that holds the `tempo` package."""
    return Path(__file__).resolve().parents[2]


def program(relative: str, command: str) -> Path:
    """A program of the clone, or an error that says why a library installed without a clone has none."""
    path = checkout() / relative
    if not path.is_file():
        raise InputError(f"`tempo {command}` runs {relative} from a clone of the repository, and {checkout()} has "
                         "none: clone it, run `make` there, and run the command from that environment.")
    return path


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="address to listen on (default: $GRADIO_SERVER_NAME, else 127.0.0.1; a "
                                       "server on a loopback address answers local pages only)")
    parser.add_argument("--port", type=int, help="port (default: $GRADIO_SERVER_PORT, else 7860)")
    parser.add_argument("--model", help="checkpoint directory or hub id (default: $TEMPO_MODEL, else the embedded "
                                        "Tempo-Tiny)")
    parser.add_argument("--base", help="base Qwen3-VL directory or hub id (default: $TEMPO_BASE, else the "
                                       "checkpoint's)")


def serve(args: argparse.Namespace) -> int:
    """`python app.py` with the options as the environment variables it reads; its exit status."""
    if args.port is not None and not 0 < args.port < 65536:
        raise InputError(f"--port must be between 1 and 65535 (got {args.port}).")
    app = program("app.py", "serve")
    given = {"GRADIO_SERVER_NAME": args.host, "GRADIO_SERVER_PORT": args.port, "TEMPO_MODEL": args.model,
             "TEMPO_BASE": args.base}
    env = {**os.environ, **{name: str(value) for name, value in given.items() if value is not None}}
    return subprocess.run([sys.executable, str(app)], cwd=app.parent, env=env).returncode


def add_gpu_check_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--fetch", action="store_true", help="here, with network: the wheels the GPU machine lacks, "
                                                           "into .whl/")
    what.add_argument("--dry-run", action="store_true", help="the same sequence on this CPU at tiny sizes")
    parser.add_argument("--out", help="folder for gpu_check.json and gpu_check.log (default: $OUT, else "
                                      "outputs/gpu-check)")


def gpu_check(args: argparse.Namespace) -> int:
    """`benchmarks/gpu/check` (its own docstring says what each form does); its exit status."""
    check = program("benchmarks/gpu/check", "gpu-check")
    given = ["fetch"] if args.fetch else ["--dry-run"] if args.dry_run else []
    # the dry run's Python is this one, wherever tempo was started from
    env = {**os.environ, "PYTHON": os.environ.get("PYTHON", sys.executable)}
    if args.out:
        env["OUT"] = args.out
    return subprocess.run([str(check), *given], cwd=check.parents[2], env=env).returncode
