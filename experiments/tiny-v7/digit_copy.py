"""Where the decoder reads each digit of a timed answer: the v6 answers that named a time outside the video, again.

For each (seed, family) the question is compressed and answered as `tempo eval synthetic` does (ATA, head, a
quarter of all memory tokens), then the answer is fed back and, at every answer token, the decoder's top choices
and the input positions its attention heads read most (summed over heads and layers) are listed: a digit of a time
tag, a memory token, the question, or the answer's own earlier tokens.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

import torch

from tempo.config import AllocationConfig, GenerationConfig, RunConfig
from tempo.engine import compress, reanswer
from tempo.model import TempoModel, from_pretrained
from tempo.model.prompts import decoder_prompt_ids, time_tag
from tempo.train.eval_videos import questions_of, video_file

log = logging.getLogger("digit_copy")
CASES = ((750001, "interval"), (750081, "grounding"), (750081, "interval"))  # v6's acceptance, outside the video


def position_labels(model: TempoModel, question: str, tags: list[float], tokens: list[int],
                    answer_ids: list[int]) -> list[str]:
    """A name for every position of the decoder's input: `tag 12 '3'`, `mem 12`, `question`, `answer 4 '1'`."""
    tok = model.tokenizer
    before, after = decoder_prompt_ids(tok, question)
    labels = ["prompt"] * len(before)
    for index, (t, k) in enumerate(zip(tags, tokens)):
        if k == 0:
            continue
        labels += [f"tag {index} {tok.decode([i])!r}" for i in tok.markup(time_tag(t))] + [f"mem {index}"] * k
    labels += ["question"] * len(after)
    return labels + [f"answer {j} {tok.decode([i])!r}" for j, i in enumerate(answer_ids)]


def read_case(model: TempoModel, seed: int, family: str, folder: str, top: int) -> dict:
    """One question answered as the evaluation does, then its answer read back token by token."""
    path, video = video_file(seed, 60.0, 3600.0, folder)
    question, = (q for q in questions_of(video, seed, (family,)))
    compression = compress(model, path, question.text, RunConfig())
    budget = len(compression.relevance) * model.spec.num_memory_tokens // 4
    finished = reanswer(model, compression, RunConfig(allocation=AllocationConfig(budget=budget, k_min=4),
                                                      generation=GenerationConfig(max_new_tokens=24)))
    tokens = [s.tokens or 0 for s in finished.segments]
    tags = compression.plan.tag_times()
    answer_ids = finished.token_ids
    with torch.inference_mode():
        embeds, _ = model.decoder_inputs(compression.memories, tokens, "head", question.text, tags,
                                         answer_ids=answer_ids[:-1])
        output = model.decoder.lm(inputs_embeds=embeds[None], output_attentions=True)
    labels = position_labels(model, question.text, tags, tokens, answer_ids[:-1])
    first = len(labels) - len(answer_ids)  # the position whose output is the answer's first token
    attention = torch.stack([a[0] for a in output.attentions])  # [layers, heads, S, S]
    steps = []
    for j, token in enumerate(answer_ids):
        logits = output.logits[0, first + j].float()
        probs = torch.softmax(logits, -1)
        choices = probs.topk(3)
        read = attention[:, :, first + j].sum((0, 1))  # what this step reads, over every head and layer
        where = read.topk(top)
        steps.append({"token": model.tokenizer.decode([token]),
                      "choices": [[model.tokenizer.decode([int(i)]), round(float(p), 3)]
                                  for p, i in zip(choices.values, choices.indices)],
                      "reads": [[labels[int(i)], round(float(w), 2)] for w, i in zip(where.values, where.indices)]})
    near = [f"{t:.1f}" for t, k in zip(tags, tokens) if k]
    return {"seed": seed, "family": family, "duration": round(video.duration, 1), "question": question.text,
            "expected": question.answer, "answer": finished.answer, "tags_kept": len(near),
            "tag_spacing": round(tags[1] - tags[0], 2), "steps": steps}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=None, help="a checkpoint folder (default: the embedded Tempo-Tiny)")
    parser.add_argument("--videos", default="outputs/tiny-v7/videos", help="where the mp4s are written once")
    parser.add_argument("--top", type=int, default=4, help="positions listed per answer token")
    parser.add_argument("--json", required=True, help="where the readings go")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    model = from_pretrained(args.model, device="cpu")
    model.decoder.lm.set_attn_implementation("eager")  # sdpa returns no attention weights
    readings = [read_case(model, seed, family, args.videos, args.top) for seed, family in CASES]
    for reading in readings:
        log.info("%d %s: %s -> %s", reading["seed"], reading["family"], reading["expected"], reading["answer"])
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as file:
        json.dump(readings, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
