"""`tempo bench --first-segment`: each timed call stops at the first compressed segment."""

import tempo
from tempo.bench import runs
from tempo.events import Finished, SegmentCompressed
from tests.conftest import ROOT

VIDEO = str(ROOT / "examples" / "synthetic-900001-2min.mp4")


def test_each_call_stops_at_the_first_segment(monkeypatch):
    seen: list[list[type]] = []

    def recorded(*args, **kwargs):
        seen.append([])
        for event in tempo.engine.run(*args, **kwargs):
            seen[-1].append(type(event))
            yield event

    monkeypatch.setattr(runs, "run", recorded)
    figures = runs.first_segments(tempo.from_pretrained(device="cpu"), VIDEO, 2)
    assert len(figures["in_process_s"]) == len(figures["isolated_s"]) == 2
    assert all(seconds > 0 for seconds in [figures["first_call_s"], *figures["in_process_s"], *figures["isolated_s"]])
    assert len(seen) == 6  # one untimed call of each kind, then two of each
    assert all(events.count(SegmentCompressed) == 1 and events[-1] is SegmentCompressed and Finished not in events
               for events in seen)
