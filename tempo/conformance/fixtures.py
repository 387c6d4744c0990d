"""A fixture set as the released code recorded it: each case (`Case`: its settings and scalar results, its tensors
and its video) and the base model's folder."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import torch
from safetensors.torch import load_file

from ..allocation import Strategy
from ..config import SamplingConfig


def base_dir(directory: str) -> str:
    """The fixture set's base model: its one folder under base/ that holds a config.json."""
    base_root = os.path.join(directory, "base")
    candidates = sorted(d for d in os.listdir(base_root) if os.path.isfile(os.path.join(base_root, d, "config.json")))
    if len(candidates) != 1:
        raise SystemExit(f"expected one base model directory under {base_root}, found {candidates}")
    return os.path.join(base_root, candidates[0])


@dataclass
class Case:
    """One recorded case: its settings and scalar results (`case.json`), its tensors, and where its video is."""

    name: str
    recorded: dict
    tensors: dict[str, torch.Tensor]
    video: str

    @classmethod
    def read(cls, directory: str, name: str) -> Case:
        case_dir = os.path.join(directory, "cases", name)
        with open(os.path.join(case_dir, "case.json")) as f:
            recorded = json.load(f)
        return cls(name, recorded, load_file(os.path.join(case_dir, "tensors.safetensors")),
                   os.path.join(directory, "videos", recorded["video"]))

    @property
    def query(self) -> str:
        return self.recorded["query"]

    @property
    def sampling(self) -> SamplingConfig:
        recorded = self.recorded
        return SamplingConfig(fps=recorded["video_fps"], max_frames=recorded["max_frames"], min_frames=4,
                              segment_frames=recorded["frame_windows"])

    @property
    def strategy(self) -> str:
        return Strategy.ATA.value if self.recorded["dynamic_compress"] else Strategy.OFF.value

    def expected_tokens(self, k_max: int, segments: int) -> list[int]:
        return self.tensors["allocations"].tolist() if "allocations" in self.tensors else [k_max] * segments
