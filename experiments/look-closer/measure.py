"""Does looking closer turn a wrong "when" into a right one? Each shipped "when" example is asked over the whole
video with the page's defaults, then again over the window "Look closer" takes by default: 512 s (1,024 frames at
2 fps) around the middle of the segment the compressor found most relevant. Both answers are graded as the page
grades them (within one segment of each run's own sampling).

    PYTHONPATH=. python experiments/look-closer/measure.py [--json experiments/look-closer/results.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import tempo
from demo.server import load_examples
from tempo.analysis import most_relevant


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    model = tempo.from_pretrained(device="cpu")
    rows = []
    for example in (e for e in load_examples() if e.family == "grounding"):
        config = tempo.RunConfig()
        whole = tempo.answer(model, example.video, example.question, config)
        looked = most_relevant(whole.segments, 1)[0]
        moment = (looked.start + looked.end) / 2
        window = config.sampling.closer_window(moment, whole.video.duration)
        row = {"video": Path(example.video).name, "question": example.question, "expected": example.expected,
               "evidence": example.evidence, "whole": {"answer": whole.answer,
                                                        "right": example.graded(whole, config.sampling)},
               "looked_at": [looked.start, looked.end], "window": window}
        if window is not None:
            sampling = replace(config.sampling, start=window[0], end=window[1])
            closer = tempo.answer(model, example.video, example.question, replace(config, sampling=sampling))
            evidence_inside = any(window[0] <= start and end <= window[1] for start, end in example.evidence)
            row["closer"] = {"answer": closer.answer, "right": example.graded(closer, sampling),
                             "evidence_in_window": evidence_inside}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"model": model.spec.name, "examples": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
