"""One segment record: `tempo.events.Segment` is what every caller reads about a segment, and an event or a view
about one (`SegmentCompressed`, `SegmentWatched`, `Alert`, `SegmentFrames`) holds it as a field rather than
extending it or repeating where it sits. The engine's tensors (`PreparedSegment`, `EncodedSegment`) carry an index
but no span, so with the record they are the only three segment classes."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_architecture import sources

RECORD = "tempo.events.Segment"
SPAN = {"index", "start", "end"}  # where a segment sits in its video: the record's fields, and no one else's


def second_shapes(modules: dict[str, Path]) -> list[str]:
    """Every class, other than the record, that extends a class named `Segment` or declares a segment's span."""
    found = []
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ClassDef) or f"{module}.{node.name}" == RECORD:
                continue
            bases = {ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases}
            fields = {statement.target.id for statement in node.body
                      if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)}
            if "Segment" in bases:
                found.append(f"{module}.{node.name} extends Segment: give it a field `segment: Segment` instead")
            elif SPAN <= fields:
                found.append(f"{module}.{node.name} repeats a segment's index, start and end: hold an "
                             "events.Segment instead")
    return found


def test_only_the_record_says_where_a_segment_sits():
    assert second_shapes(sources()) == []


def test_a_second_segment_shape_is_caught(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("class Look(events.Segment):\n    rank: int\n\n\n"
                       "class Mark:\n    index: int\n    start: float\n    end: float\n\n\n"
                       "class Gap:\n    start: float\n    end: float\n")
    assert second_shapes({"planted": planted}) == [
        "planted.Look extends Segment: give it a field `segment: Segment` instead",
        "planted.Mark repeats a segment's index, start and end: hold an events.Segment instead"]
