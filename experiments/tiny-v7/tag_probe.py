"""How the decoder writes the digits of an interval answer when the time tags are moved: teacher-forced, digit by
digit, on the memories of real compressions.

One interval question per video is compressed once; then the same memories are given tags shifted by a constant,
so that the answer "From A to B seconds." (A and B read off the tags as training writes them, `compose.tag_answer`)
keeps its segments but changes its digits. Four kinds of shift: A and B three digits with the same leading ones,
A and B either side of a hundred (596.5 -> 601.7), either side of a thousand (996.5 -> 1001.7), and four digits.
At every digit of A and B the top choice given the right digits before it is compared with the right digit, and
for B's digits with A's digit at the same place (a copy of the first time).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

import numpy as np
import torch

from tempo.allocation import allocate
from tempo.config import AllocationConfig, RunConfig
from tempo.engine import compress
from tempo.model import TempoModel, from_pretrained
from tempo.synthetic import named_seconds, segment_relevance
from tempo.train.compose import tag_answer
from tempo.train.eval_videos import questions_of, video_file

log = logging.getLogger("tag_probe")
CASES = (750001, 750081)  # v6's acceptance videos whose interval answers named a time outside the video
KINDS = ("same hundred", "across a hundred", "across a thousand", "four digits")
SHIFTS_PER_KIND = 8


def shifts(first: float, last: float, lowest: float, kind: str, rng: np.random.Generator) -> list[float]:
    """Constants added to every tag so that the answer's times `first` and `last` fall as `kind` says (and the
    `lowest` tag stays above 0)."""
    out: list[float] = []
    while len(out) < SHIFTS_PER_KIND:
        if kind == "same hundred":
            target = float(rng.uniform(100, 999 - (last - first)))
            ok = int(target) // 100 == int(target + last - first) // 100
        elif kind == "across a hundred":
            boundary = 100 * int(rng.integers(2, 10))
            target = boundary - float(rng.uniform(0.1, last - first - 0.1))
            ok = True
        elif kind == "across a thousand":
            target, ok = 1000 - float(rng.uniform(0.1, last - first - 0.1)), True
        else:
            target = float(rng.uniform(1000, 3000))
            ok = int(target) // 100 == int(target + last - first) // 100
        if ok and target - first + lowest > 0:
            out.append(target - first)
    return out


def digit_reads(model: TempoModel, memories: list[torch.Tensor], tokens: list[int], question: str,
                tags: list[float], answer: str) -> list[dict]:
    """Each digit of `answer`: which number (0 = A, 1 = B), its place, the right digit and the top choice."""
    tok = model.tokenizer
    ids = tok.text(answer)
    with torch.inference_mode():
        embeds, _ = model.decoder_inputs(memories, tokens, "head", question, tags, answer_ids=ids)
        logits = model.decoder.lm(inputs_embeds=embeds[None], logits_to_keep=len(ids) + 1).logits[0]
    top = logits[:len(ids)].argmax(-1).tolist()
    pieces = [tok.decode([i]) for i in ids]
    reads, number, place = [], -1, 0
    for j, piece in enumerate(pieces):
        if piece == " " and j + 1 < len(pieces) and pieces[j + 1].isdigit():
            number, place = number + 1, 0
            continue
        if piece.isdigit() or piece == ".":
            reads.append({"number": number, "place": place, "right": piece, "top": tok.decode([top[j]])})
            place += 1
    return reads


def read_video(model: TempoModel, seed: int, folder: str, rng: np.random.Generator) -> list[dict]:
    """The interval question of one video under every kind of shift."""
    path, video = video_file(seed, 60.0, 3600.0, folder)
    question, = questions_of(video, seed, ("interval",))
    compression = compress(model, path, question.text, RunConfig())
    budget = len(compression.relevance) * model.spec.num_memory_tokens // 4
    tokens = allocate(compression.relevance, budget, AllocationConfig().k_min, model.spec.num_memory_tokens)
    plan = compression.plan
    shown = [i for i in range(len(plan.segments)) if segment_relevance(question, *plan.span(i))]
    tags = plan.tag_times()
    step, span = tags[1] - tags[0], (shown[0], shown[-1])
    first, last = named_seconds(tag_answer("interval", "", tags, step, shown[0], span))
    records = []
    for kind in KINDS:
        for shift in shifts(first, last, tags[0], kind, rng):
            moved = [round(t + shift, 1) for t in tags]
            answer = tag_answer("interval", "", moved, step, shown[0], span)
            records.append({"seed": seed, "kind": kind, "answer": answer,
                            "digits": digit_reads(model, compression.memories, tokens, question.text, moved, answer)})
    return records


def tally(records: list[dict]) -> dict:
    """Per kind: top-1 right at A's digits, at B's, and how often B's wrong choice is A's digit at that place."""
    out = {}
    for kind in KINDS:
        a = [d for r in records if r["kind"] == kind for d in r["digits"] if d["number"] == 0]
        b = [d for r in records if r["kind"] == kind for d in r["digits"] if d["number"] == 1]
        a_at = {d["place"]: d["right"] for r in records if r["kind"] == kind for d in r["digits"] if d["number"] == 0}
        copies = [d for r in records if r["kind"] == kind for d in r["digits"] if d["number"] == 1 and
                  d["top"] != d["right"] and d["top"] == next((e["right"] for e in r["digits"] if e["number"] == 0
                                                                 and e["place"] == d["place"]), None)]
        wrong_b = [d for d in b if d["top"] != d["right"]]
        out[kind] = {"a_right": round(float(np.mean([d["top"] == d["right"] for d in a])), 3),
                     "b_right": round(float(np.mean([d["top"] == d["right"] for d in b])), 3),
                     "b_wrong_that_copy_a": f"{len(copies)} of {len(wrong_b)}",
                     "digits_of_a_per_answer": len(a_at)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--videos", default="outputs/tiny-v7/videos", help="where the mp4s are written once")
    parser.add_argument("--json", required=True, help="where the readings go")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    model = from_pretrained(None, device="cpu")
    rng = np.random.default_rng(0)
    records = [r for seed in CASES for r in read_video(model, seed, args.videos, rng)]
    report = {"per_kind": tally(records), "records": records}
    log.info("%s", json.dumps(report["per_kind"], indent=1))
    with open(args.json, "w") as file:
        json.dump(report, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
