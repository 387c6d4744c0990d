"""One segment record: `tempo.events.Segment` is what every caller reads about a segment, and an event or a view
about one (`SegmentCompressed`, `SegmentWatched`, `Alert`, `SegmentFrames`) holds it as a field rather than
extending it or repeating where it sits. The engine's tensors (`PreparedSegment`: its pixels, then in their place
their `VisionFeatures`) carry an index but no span, so with the record they are the only segment classes."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import torch

from tempo.video.segments import PreparedSegment, VisionFeatures
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


def tensor_bytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def test_a_segment_holds_its_pixels_then_their_features_never_both():
    rows, thumbnail = torch.zeros(16, 24, dtype=torch.uint8), np.zeros((4, 6, 3), np.uint8)
    features = VisionFeatures(torch.zeros(4, 8, dtype=torch.float16), [torch.zeros(4, 8, dtype=torch.float16)] * 2,
                              (1, 4, 4))
    pixels = PreparedSegment(3, rows, (1, 4, 4), thumbnail, shown=5)
    assert pixels.vision is None and pixels.nbytes == thumbnail.nbytes + tensor_bytes(rows)

    encoded = pixels.encoded(features)
    assert encoded.pixel_rows is None and encoded.vision is features  # the cache holds one of them
    assert (encoded.index, encoded.grid, encoded.thumbnail, encoded.shown) == (3, (1, 4, 4), thumbnail, 5)
    assert encoded.nbytes == thumbnail.nbytes + tensor_bytes(features.embeds, *features.deepstack)
    assert pixels.pixel_rows is rows  # a new record: the decoded one is left as it was
    for neither_or_both in ({"pixel_rows": None}, {"vision": features}):
        with pytest.raises(ValueError, match="either"):
            PreparedSegment(**{"index": 0, "pixel_rows": rows, "grid": (1, 4, 4), "thumbnail": thumbnail,
                               **neither_or_both})


def test_the_vision_tower_replaces_a_batchs_pixels(fixture_model, fixtures):
    from tempo.config import Limits, SamplingConfig
    from tempo.engine.steps import encode_batch
    from tempo.timing import Timer
    from tempo.video.segments import LocalDecoder

    decoder = LocalDecoder(fixtures / "videos" / "bikes.mp4", SamplingConfig(), fixture_model.geometry, Limits(),
                           Timer())
    decoded = list(decoder.segments())[:2]
    once = encode_batch(fixture_model, [decoded[0]], Timer())
    batch = encode_batch(fixture_model, [once[0], decoded[1]], Timer())
    assert batch[0] is once[0]  # already encoded: passed as it is
    assert all(s.pixel_rows is None and s.vision is not None for s in batch)
    assert [s.index for s in batch] == [0, 1] and all(s.vision.grid == s.grid for s in batch)
