"""The compressor's relevance for questions naming two objects, against each object asked alone, and whether a new
relevance direction on the frozen compressor could separate them (a linear probe on its last prompt state).

For each video's order question ("Which appears first, the A or the B?") the same segments are read under five
wordings: the order question, "either" and "both" forms, and each object alone. A segment is positive for a
two-object wording when it shows either object. The probe fits a direction (no bias, as the compressor reads
relevance) on the first half of the videos' states, every wording at once, and is read on the other half.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys

import numpy as np
import torch

from tempo.model import TempoModel, from_pretrained
from tempo.model.prompts import segment_prompt_ids
from tempo.synthetic import generate_video, temporal_questions
from tempo.train import data

log = logging.getLogger("two_objects")
SEEDS = range(640_000, 640_012)  # written down in README.md before running; no other use
DURATIONS = (60.0, 240.0)
EXAMPLE = (900_006, 300.0)  # the shipped order example
NAMED = re.compile(r"the ([a-z]+) ([a-z]+) or the ([a-z]+) ([a-z]+)\?$")


def wordings(order: str) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """The order question, its either / both forms and each object alone, with the (colour, kind) pairs named."""
    match = NAMED.search(order)
    assert match is not None, order
    first, second = (match[1], match[2]), (match[3], match[4])
    a, b = f"the {first[0]} {first[1]}", f"the {second[0]} {second[1]}"
    return {"order": (order, [first, second]),
            "either": (f"Does {a} or {b} appear?", [first, second]),
            "both": (f"When do {a} and {b} appear?", [first, second]),
            "first alone": (f"When does {a} appear?", [first]),
            "second alone": (f"When does {b} appear?", [second])}


def last_states(model: TempoModel, video: data.EncodedVideo, question: str) -> torch.Tensor:
    """The compressor's state at the end of the routing prompt [N, d_s], where relevance is read."""
    tok = model.compressor_tokenizer
    vision = video.vision(model.device, model.dtype)
    states = []
    for start in range(0, len(vision), 16):
        chunk = vision[start:start + 16]
        prompts = [segment_prompt_ids(tok, question, video.plan, start + i, f.grid, model.geometry)
                   for i, f in enumerate(chunk)]
        with torch.inference_mode():
            hidden, lengths = model.compressor.hidden_states(prompts, chunk)
        states.append(torch.stack([hidden[b, n - 1] for b, n in enumerate(lengths)]).float())
    return torch.cat(states)


def read_video(model: TempoModel, seed: int, duration: float | None) -> dict | None:
    """Every wording's states and labels for one video's order question, or None when it has none."""
    video = generate_video(seed, duration) if duration else generate_video(seed, min_duration=DURATIONS[0],
                                                                           max_duration=DURATIONS[1])
    order = [q for q in temporal_questions(video) if q.family == "order"]
    if not order:
        return None
    encoded, = data.encode_videos(model.compressor, [video], 1024, model.geometry, np.random.default_rng(seed))
    shown = [{(e.colour, e.kind) for e in data.visible_events(video, encoded.plan.segment_frame_times(i))}
             for i in range(len(encoded.plan.segments))]
    read = {}
    for name, (text, pairs) in wordings(order[0].text).items():
        states = last_states(model, encoded, text)
        labels = [bool(s & set(pairs)) for s in shown]
        read[name] = {"text": text, "states": states, "labels": labels,
                      "each": [[pair in s for s in shown] for pair in pairs],
                      "relevance": torch.sigmoid(states @ model.compressor.relevance_direction.float()).tolist()}
    return {"seed": seed, "duration": video.duration, "segments": len(shown), "read": read}


def summary(relevance: list[float], labels: list[bool], each: list[list[bool]]) -> dict:
    """Highest relevance on a segment showing a named object and elsewhere, whether the top one shows one, and
    the lowest over the named objects of the highest relevance on that object's segments (both found: high)."""
    on = [r for r, label in zip(relevance, labels) if label]
    off = [r for r, label in zip(relevance, labels) if not label]
    found = [max(r for r, shows in zip(relevance, pair) if shows) for pair in each if any(pair)]
    return {"max_on": round(max(on), 3) if on else None, "max_off": round(max(off), 3) if off else None,
            "top_shows_one": bool(labels[int(np.argmax(relevance))]),
            "each_found": round(min(found), 3) if found else None}


def probe(train: list[dict], test: list[dict], steps: int = 600) -> dict:
    """A direction fitted by logistic regression (no bias) on `train`'s states, read on `test`'s, per wording."""
    x = torch.cat([r["states"] for v in train for r in v["read"].values()])
    y = torch.tensor([label for v in train for r in v["read"].values() for label in r["labels"]], dtype=torch.float)
    scale = x.std()
    direction = torch.zeros(x.shape[1], requires_grad=True)
    optimiser = torch.optim.Adam([direction], lr=0.05)
    for _ in range(steps):
        optimiser.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(x / scale @ direction, y)
        loss.backward()
        optimiser.step()
    readings: dict[str, list[dict]] = {}
    for video in test:
        for name, read in video["read"].items():
            relevance = torch.sigmoid(read["states"] / scale @ direction.detach()).tolist()
            readings.setdefault(name, []).append(summary(relevance, read["labels"], read["each"]))
    return {"train_loss": round(float(loss.detach()), 4),
            "per_wording": {name: aggregate(r) for name, r in readings.items()}}


def aggregate(summaries: list[dict]) -> dict:
    """Mean of the highest relevance on and off the named objects, and how often the top segment shows one."""
    return {"mean_max_on": round(float(np.mean([s["max_on"] for s in summaries if s["max_on"] is not None])), 3),
            "mean_max_off": round(float(np.mean([s["max_off"] for s in summaries if s["max_off"] is not None])), 3),
            "top_shows_one": round(float(np.mean([s["top_shows_one"] for s in summaries])), 3),
            "each_found": round(float(np.mean([s["each_found"] for s in summaries if s["each_found"] is not None])), 3),
            "videos": len(summaries)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=None, help="a checkpoint folder (default: the embedded Tempo-Tiny)")
    parser.add_argument("--json", required=True, help="where the readings go")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    model = from_pretrained(args.model, device="cpu")
    videos = [v for v in [read_video(model, *EXAMPLE)] + [read_video(model, s, None) for s in SEEDS] if v]
    shipped = {name: aggregate([summary(**{key: v["read"][name][key] for key in ("relevance", "labels", "each")})
                                for v in videos]) for name in videos[0]["read"]}
    half = len(videos) // 2
    report = {"videos": [{"seed": v["seed"], "duration": v["duration"], "segments": v["segments"],
                          **{name: {"text": r["text"], **summary(r["relevance"], r["labels"], r["each"])}
                             for name, r in v["read"].items()}} for v in videos],
              "shipped": shipped,
              "probe_on_frozen_states": {"trained_on": [v["seed"] for v in videos[:half]],
                                         **probe(videos[:half], videos[half:])}}
    for name, reading in shipped.items():
        log.info("shipped, %s: %s", name, reading)
    log.info("probe: %s", report["probe_on_frozen_states"])
    with open(args.json, "w") as file:
        json.dump(report, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
