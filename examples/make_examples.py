"""Render the demo's example videos and write examples.json (run from the repository root).

    python examples/make_examples.py

Fixed seeds from a range no training or evaluation run uses; one needle-style question (a sharp allocation
peak) and one global question (a broad allocation) per video, taken from the synthetic world's ground truth.
"""

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tempo.synthetic import generate_video, make_questions, write_mp4  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FPS = 4.0
EXAMPLES = [  # (seed, duration in seconds, families asked)
    (900_001, 150, ("needle", "global")),
    (900_002, 600, ("grounding", "global")),
    (900_003, 1500, ("needle", "counting")),
    (900_004, 2700, ("grounding",)),
]


def main() -> int:
    entries = []
    for seed, duration, families in EXAMPLES:
        video = generate_video(seed, duration)
        name = f"synthetic-{seed}-{duration // 60}min.mp4"
        write_mp4(video, os.path.join(HERE, name), fps=FPS)
        questions = {q.family: q for q in make_questions(video, np.random.default_rng(seed))}
        for family in families:
            question = questions[family]
            entries.append({"video": name, "question": question.text,
                            "label": f"{duration // 60} min · {family}: {question.text}",
                            "family": family, "expected": question.answer,
                            "evidence": [list(span) for span in question.evidence]})
        print(f"{name}: {os.path.getsize(os.path.join(HERE, name)) / 1e6:.1f} MB")
    with open(os.path.join(HERE, "examples.json"), "w", encoding="utf-8") as f:
        json.dump(entries, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
