"""Render the demo's example videos and write examples.json (run from the repository root).

    python -m examples.make_examples

Fixed seeds from a range no training or evaluation run uses; questions from the synthetic world's ground truth:
needle-style ones (a sharp allocation peak), global ones (a broad allocation), and since issue 47 an interval and
an order question on two short videos of their own. A video already here is not written again (the shipped ones
stay byte for byte as they are; delete one to render it anew); examples.json is always rewritten.
"""

import json
import os
import sys

import numpy as np

from tempo.synthetic import all_questions, generate_video, write_mp4

HERE = os.path.dirname(os.path.abspath(__file__))
FPS = 4.0
EXAMPLES = [  # (seed, duration in seconds, families asked)
    (900_001, 150, ("needle", "global")),
    (900_002, 600, ("grounding", "global")),
    (900_003, 1500, ("needle", "counting")),
    (900_004, 2700, ("grounding",)),
    (900_005, 420, ("interval",)),
    (900_006, 300, ("order",)),
]


def main() -> int:
    entries = []
    for seed, duration, families in EXAMPLES:
        video = generate_video(seed, duration)
        name = f"synthetic-{seed}-{duration // 60}min.mp4"
        if not os.path.isfile(os.path.join(HERE, name)):
            write_mp4(video, os.path.join(HERE, name), fps=FPS)
        questions = {q.family: q for q in all_questions(video, np.random.default_rng(seed))}
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
