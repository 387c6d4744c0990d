"""`python -m tempo.bench --first-segment`: the first segment's result is timed apart from the rest of the run."""

import tempo
from tempo import bench
from tests.conftest import ROOT

VIDEO = str(ROOT / "examples" / "synthetic-900001-2min.mp4")


def test_the_first_segment_is_timed_before_the_whole_run():
    model = tempo.from_pretrained(device="cpu")
    figures = bench.first_segments(model, VIDEO, 2)
    assert len(figures["in_process_s"]) == len(figures["isolated_s"]) == 2 and figures["first_call_s"] > 0
    whole = bench.ours_answer(model, VIDEO, bench.QUESTION, bench.RunConfig(), bench.VideoCache(max_bytes=0))
    assert whole["segments"] > 1
    assert 0 < max(figures["in_process_s"] + figures["isolated_s"]) < whole["total_s"]
