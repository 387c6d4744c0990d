"""What every training stage shares: the optimiser's schedule, progress lines, the file a loop's progress is saved to
so that a cut-off run goes on from it, the answer loss, and a faster patch embedding for training on a CPU."""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..model.compressor import LocalCompressor

log = logging.getLogger("tempo.train")
WARMUP = 0.03


class Schedule:
    """AdamW with a 3% linear warm-up and a cosine decay to zero."""

    def __init__(self, groups: list[dict], steps: int):
        self.optimizer = torch.optim.AdamW(groups, weight_decay=0.0)
        self.steps = steps
        self.base = [group["lr"] for group in groups]
        self.step_index = 0

    def step(self) -> None:
        self.step_index += 1
        warmup = max(1, round(WARMUP * self.steps))
        progress = self.step_index / warmup if self.step_index < warmup else \
            0.5 * (1 + math.cos(math.pi * (self.step_index - warmup) / max(1, self.steps - warmup)))
        for group, base in zip(self.optimizer.param_groups, self.base):
            group["lr"] = base * progress
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def state_dict(self) -> dict:
        """The parameters it updates, the optimiser's state and how far along the schedule it is."""
        return {"params": [p.detach() for group in self.optimizer.param_groups for p in group["params"]],
                "optimizer": self.optimizer.state_dict(), "step_index": self.step_index}

    def load_state_dict(self, saved: dict) -> None:
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        with torch.no_grad():
            for param, value in zip(params, saved["params"], strict=True):
                param.copy_(value)
        self.optimizer.load_state_dict(saved["optimizer"])
        self.step_index = saved["step_index"]


class Progress:
    def __init__(self, stage: str, steps: int, every: int):
        self.stage, self.steps, self.every = stage, steps, every
        self.started = time.perf_counter()
        self.earlier_seconds = 0.0  # of the runs cut off before this one went on from their progress file
        self.average: float | None = None
        self.losses: list[float] = []

    def line_due(self, step: int) -> bool:
        """Whether a progress line follows this update (0-based)."""
        return (step + 1) % self.every == 0 or step + 1 == self.steps

    def update(self, step: int, loss: float) -> None:
        self.average = loss if self.average is None else 0.95 * self.average + 0.05 * loss
        self.losses.append(round(loss, 5))
        if self.line_due(step):
            elapsed = time.perf_counter() - self.started
            log.info("%-8s step %4d/%d  loss %.4f  %5.0fs elapsed, %5.0fs left", self.stage, step + 1, self.steps,
                     self.average, elapsed, elapsed / (step + 1) * (self.steps - step - 1))

    def summary(self) -> dict:
        return {"seconds": round(time.perf_counter() - self.started, 1), "final_loss": self.average,
                "losses": self.losses[::max(1, len(self.losses) // 100)]}

    def state_dict(self) -> dict:
        return {"average": self.average, "losses": list(self.losses), "seconds": time.perf_counter() - self.started}

    def load_state_dict(self, saved: dict) -> None:
        """Go on from `saved`; elapsed seconds then count the earlier runs' too (up to their last save)."""
        self.average, self.losses = saved["average"], list(saved["losses"])
        self.earlier_seconds = saved["seconds"]
        self.started = time.perf_counter() - saved["seconds"]


@dataclass(frozen=True)
class ProgressFile:
    """Where a stage's training loop saves how far it got, and the key (recipe, stage, starting weights) a saved
    file must hold for a run to go on from it."""

    path: str
    key: dict

    def save(self, saved: dict) -> None:
        """Whole or not at all: a run cut off while writing leaves the file before."""
        torch.save({"key": self.key} | saved, self.path + ".partial")
        os.replace(self.path + ".partial", self.path)

    def read(self) -> dict | None:
        """What was saved under this key; None when nothing was, or when the file is another run's."""
        if not os.path.isfile(self.path):
            return None
        saved = torch.load(self.path, weights_only=True)
        if saved.get("key") != self.key:
            log.info("progress in %s was saved by another recipe, stage or starting state; starting over", self.path)
            return None
        return saved

    def save_loop(self, updates: int, schedule: Schedule, progress: Progress, rng: np.random.Generator,
                  **kept: object) -> None:
        """A training loop after `updates` updates: its schedule, progress, both random streams, and `kept` (what
        else it reports, such as readings so far)."""
        self.save({"updates": updates, "schedule": schedule.state_dict(), "progress": progress.state_dict(),
                   "rng": rng.bit_generator.state, "torch_rng": torch.get_rng_state()} | kept)

    def go_on(self, schedule: Schedule, progress: Progress, rng: np.random.Generator) -> dict | None:
        """The loop put back as `save_loop` saved it under this key, and what was saved (its "updates" and what else
        it kept); None, and the loop left alone, when nothing was."""
        if (saved := self.read()) is None:
            return None
        schedule.load_state_dict(saved["schedule"])
        progress.load_state_dict(saved["progress"])
        rng.bit_generator.state = saved["rng"]
        torch.set_rng_state(saved["torch_rng"])
        log.info("resumed at update %d of %d from %s", saved["updates"], progress.steps, self.path)
        return saved

    def remove(self) -> None:
        if os.path.isfile(self.path):
            os.remove(self.path)


def use_linear_patch_embed(compressor: LocalCompressor) -> None:
    """Conv3d with stride == kernel is a matmul over flattened patches; on CPU its backward is ~15x slower than
    the matmul's, so training runs the same weights as a linear map."""
    embed = compressor.vlm.visual.patch_embed

    def forward(hidden_states: torch.Tensor) -> torch.Tensor:
        weight = embed.proj.weight
        return F.linear(hidden_states.to(weight.dtype), weight.reshape(weight.shape[0], -1), embed.proj.bias)

    embed.forward = forward


def answer_positions_loss(logits: torch.Tensor, answer: list[int]) -> torch.Tensor:
    """Cross-entropy of `answer`, given logits [n + 1, V] for its last prompt position and its own tokens."""
    return F.cross_entropy(logits[:len(answer)].float(), torch.tensor(answer, device=logits.device))
