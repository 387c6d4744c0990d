"""`tempo train`: train Tempo-Tiny, v3-v5 one resumable stage at a time (`--stage N`, as shipped) or
v2's recipe in one run (seeded; about 90 minutes on a 2-core CPU)."""

import argparse
import logging

import torch

from ..errors import InputError
from .curriculum import train
from .recipe import Recipe
from .staged import run_stage

OUT = "assets/tempo-tiny"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", help=f"checkpoint directory (default {OUT}; with --stage, none unless given)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the videos, initialisation and sampling")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply videos and steps (e.g. 0.05 for a trial)")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, ...")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: all cores)")
    parser.add_argument("--stage", type=int, help="run one stage (v3: 1-5, v4: 6, v5: 7-11), resuming from --state")
    parser.add_argument("--state", default="experiments/tiny-v3/stage.safetensors",
                        help="with --stage: the state file read and replaced (default experiments/tiny-v3/...)")
    parser.add_argument("--from", dest="source", metavar="STATE",
                        help="with --stage: start from this state file (and the logs beside it) instead of --state, "
                             "e.g. v4's first stage from experiments/tiny-v3/stage.safetensors")
    parser.add_argument("--log-every", type=int, default=50, help="steps between progress lines")


def run_training(args: argparse.Namespace) -> int:
    """`tempo train`: one stage, or v2's recipe in one run; progress lines in the log."""
    if args.scale <= 0:
        raise InputError("--scale must be positive")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    if args.threads:
        torch.set_num_threads(args.threads)
    recipe = Recipe(seed=args.seed)
    recipe = recipe.scaled(args.scale) if args.scale != 1.0 else recipe
    if args.stage is not None:
        try:
            run_stage(args.stage, recipe, args.state, args.out, torch.device(args.device), args.log_every,
                      args.source)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        return 0
    train(args.out or OUT, recipe, torch.device(args.device), args.log_every)
    return 0
