"""The soak's report: counts, latency, pairs whose repeats differ and answers about another video."""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np

from .clients import Outcome
from .traffic import MIX

DURATION_TOLERANCE_S = 1.0  # the server's probe against the rendered length (frames / fps)


def percentile(values: list[float], share: float) -> float | None:
    return round(float(np.percentile(values, share)), 2) if values else None


def summary(outcomes: list[Outcome], seconds: float) -> dict:
    """Counts, latency, differing pairs and answers about another video."""
    counts = Counter(o.status for o in outcomes)
    answered = [o for o in outcomes if o.status == "answered" and o.job.kind != "hostile"]
    first: dict[tuple, Outcome] = {}
    differing: dict[tuple, list] = defaultdict(list)
    for outcome in sorted(answered, key=lambda o: o.finished_at):
        job = outcome.job
        pair = (job.kind, job.video.path.name, job.question, job.number % 3 if job.kind == "segment" else None)
        if pair not in first:
            first[pair] = outcome
        elif outcome.fingerprint != first[pair].fingerprint:
            differing[pair].append((first[pair].fingerprint, outcome.fingerprint))
    other_video = [o for o in answered if o.duration is not None
                   and abs(o.duration - o.job.video.duration) > DURATION_TOLERANCE_S]
    repeated = Counter(pair for pair in [(o.job.kind, o.job.video.path.name, o.job.question) for o in answered])
    latency = [o.seconds for o in outcomes if o.status == "answered"]
    return {
        "requests": len(outcomes), "seconds": round(seconds, 1), "answered": counts["answered"],
        "refused_queue_full": counts["queue_full"], "refused_bad_input": counts["refused"],
        "refused_not_hostile": sum(o.status == "refused" and o.job.kind != "hostile" for o in outcomes),
        "other_errors": counts["error"], "pairs": len(first), "pairs_repeated": sum(n > 1 for n in repeated.values()),
        "pairs_whose_repeats_differ": len(differing), "answers_about_another_video": len(other_video),
        "latency_p50_s": percentile(latency, 50), "latency_p95_s": percentile(latency, 95),
        "by_endpoint": {kind: dict(Counter(o.status for o in outcomes if o.job.kind == kind))
                        for kind in [*MIX, "hostile"]},
        "examples": {"errors": [f"#{o.job.number} {o.job.kind}: {o.detail[:200]}" for o in outcomes
                                if o.status == "error"][:10],
                     "differing": [f"{pair[0]} {pair[1]} {pair[2]!r}: {seen[0]!r} then {seen[1]!r}"[:300]
                                   for pair, [seen, *_] in list(differing.items())[:10]],
                     "another_video": [f"#{o.job.number} {o.job.kind} {o.job.video.path.name}: reported "
                                       f"{o.duration:g} s" for o in other_video[:10]]},
    }
