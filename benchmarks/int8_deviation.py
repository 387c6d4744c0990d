"""Weight-only int8 (`tempo.model.int8`) against full precision on the conformance set (tests/fixtures/conformance):
for each case, the decoder's logits at every step of the recorded greedy answer (teacher-forced: the first step's
from the prefill, then one per answer token), with int8 weights in the decoder alone and in the decoder and the
compressor, against the same model unrounded. Deviation is max and mean |difference| over every logit, the largest
relative (norm) difference of a step, and the steps whose top token flipped.

    python -m benchmarks.int8_deviation [--dtype float32|bfloat16] [--json benchmarks/results/int8-cpu.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

from tempo.conformance.checks import MARKUP
from tempo.conformance.fixtures import Case, base_dir
from tempo.engine.steps import compress_batch, encode_batch, micro_batches
from tempo.model import TempoModel, from_pretrained
from tempo.model.int8 import quantize
from tempo.timing import Timer
from tempo.video import open_video, uniform_plan
from tempo.video.segments import prepare_segments

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "conformance"
ROUNDED = {"decoder": ("decoder.lm.model",), "decoder_and_compressor": ("decoder.lm.model", "compressor.vlm")}


def load(dtype: torch.dtype, parts: tuple[str, ...] = ()) -> TempoModel:
    model = from_pretrained(FIXTURES / "tempo", base=base_dir(str(FIXTURES)), device="cpu", dtype=dtype)
    for part in parts:
        quantize(model.get_submodule(part))
    return model


@torch.inference_mode()
def case_logits(model: TempoModel, case: Case) -> torch.Tensor:
    """[T, V] float32: the first step's logits, then one per recorded answer token but the last (teacher-forced)."""
    reader = open_video(case.video)
    try:
        plan = uniform_plan(reader.info, case.sampling)
        segments = list(prepare_segments(case.video, reader, plan, case.sampling, model.geometry, Timer()))
    finally:
        reader.close()
    memories = []
    for batch in micro_batches(segments, 4):
        encoded = encode_batch(model, batch, Timer())
        memories += list(compress_batch(model, encoded, case.query, plan, Timer())[0])
    tokens = case.expected_tokens(model.spec.num_memory_tokens, len(segments))
    embeds, _ = model.decoder_inputs(memories, tokens, "head", case.query, plan.tag_times(),
                                     case.recorded["tokenizer_model_max_length"])
    decoder = model.decoder
    first, cache = decoder.prefill(embeds)
    steps = [first.float()]
    for token in case.recorded["generated_token_ids"][:-1]:
        out = decoder.lm(input_ids=torch.tensor([[token]]), use_cache=True, **{decoder.cache_argument: cache})
        steps.append(out.logits[0, -1].float())
    return torch.stack(steps)


def usable(case: Case) -> bool:
    """The cases whose prompt is built as recorded (conformance.checks.check_case leaves the others out too); each is
    decoded on its recorded allocation."""
    return bool(case.query.strip()) and not any(token in case.query for token in MARKUP)


def compare(full: torch.Tensor, rounded: torch.Tensor) -> dict:
    difference = (rounded - full).abs()
    relative = ((rounded - full).norm(dim=-1) / full.norm(dim=-1).clamp(min=1e-12)).max().item()
    return {"steps": full.shape[0], "max_abs": difference.max().item(), "mean_abs": difference.mean().item(),
            "max_relative": relative, "logit_spread": (full.max(-1).values - full.min(-1).values).mean().item(),
            "flipped": int((full.argmax(-1) != rounded.argmax(-1)).sum())}


def deviation(dtype: torch.dtype, names: list[str] | None = None) -> dict:
    """Per case and in all: each way of rounding against the same model in `dtype`."""
    cases = [Case.read(str(FIXTURES), name) for name in names or sorted(os.listdir(FIXTURES / "cases"))]
    cases = [case for case in cases if usable(case)]
    full_model = load(dtype)
    reference = {case.name: case_logits(full_model, case) for case in cases}
    figures: dict = {"dtype": str(dtype), "cases": len(cases), "rounded": {}}
    for label, parts in ROUNDED.items():
        model = load(dtype, parts)
        weights = sum(b.numel() * b.element_size() for b in [*model.parameters(), *model.buffers()])
        per_case = {case.name: compare(reference[case.name], case_logits(model, case)) for case in cases}
        figures["rounded"][label] = {
            "parts": parts, "model_bytes": weights, "per_case": per_case,
            "max_abs": max(c["max_abs"] for c in per_case.values()),
            "mean_abs": sum(c["mean_abs"] * c["steps"] for c in per_case.values()) / sum(
                c["steps"] for c in per_case.values()),
            "max_relative": max(c["max_relative"] for c in per_case.values()),
            "flipped": sum(c["flipped"] for c in per_case.values()),
            "steps": sum(c["steps"] for c in per_case.values())}
    figures["full_model_bytes"] = sum(b.numel() * b.element_size() for b in [*full_model.parameters(),
                                                                           *full_model.buffers()])
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--cases", help="comma-separated case names (default: every case)")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as cache:  # the relevance direction's cache, away from the user's
        os.environ.setdefault("TEMPO_CACHE", cache)
        figures = deviation(getattr(torch, args.dtype), args.cases.split(",") if args.cases else None)
    figures["seconds"] = round(time.perf_counter() - started, 1)
    for label, rounded in figures["rounded"].items():
        print(f"int8 {label}: max |diff| {rounded['max_abs']:.3g}, mean |diff| {rounded['mean_abs']:.3g}, "
              f"max relative {rounded['max_relative']:.3g}, top token flipped at {rounded['flipped']} of "
              f"{rounded['steps']} steps, {figures['cases']} cases")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
