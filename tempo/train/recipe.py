"""The Tempo-Tiny recipe as one table: the data sizes, steps and learning rates of every stage (`curriculum` runs
it), and the seeds training videos come from."""

from __future__ import annotations

from dataclasses import dataclass, replace

TRAINING_SEEDS = 1_000_000  # training videos use seeds from here on; evaluation uses seeds below it
TUNING_SEEDS = 200_000  # unseen videos the stages report on while the recipe is tuned; the shipped stage is chosen
# on 300_000 on, and kept aside for each version's acceptance check are 500_000 on (v3) and 600_000 on (v4)


@dataclass(frozen=True)
class Recipe:
    """Data sizes, steps and learning rates of every stage."""

    seed: int = 0
    short_videos: int = 200  # 30 s - 2.5 min: base pre-training, stages 0 and 1
    base_videos: int = 2800  # more 30 s - 2.5 min videos, for base pre-training only (see `train`)
    medium_videos: int = 60  # 2 - 10 min at <= medium_frames: stage 2
    long_videos: int = 30  # 10 - 60 min at <= max_frames: stage 3
    max_frames: int = 1024  # frames sampled from a long video, as at inference (tests sample fewer)
    medium_frames: int = 256
    held_out_videos: int = 12  # 30 s - 2.5 min, never trained on: relevance accuracy
    clip_steps: int = 2500  # base pre-training on 2-frame clips (a quarter of a segment's cost)
    clip_batch: int = 16
    base_steps: int = 400  # then on whole 8-frame segments
    base_batch: int = 8
    caption_steps: int = 1200  # stage 0 on single segments ...
    caption_batch: int = 16
    align_steps: int = 300  # ... then on questions about whole short videos
    joint_steps: int = 500
    longer_steps: int = 150
    long_steps: int = 1600
    batch: int = 4  # (video, question) examples per step in stages 0-3
    base_lr: float = 2e-3
    align_lr: float = 1e-3
    lr: float = 3e-4
    compressor_lr: float = 5e-5
    tuning_videos: int = 24  # v3 stages: 1 - 60 min videos, never trained on, to report localisation on
    tuning_max_duration: float = 3600.0
    localise_steps: int = 2400  # v3 stage 1: ranking lists over segments
    localise_lists: int = 4
    localise_lr: float = 5e-4
    pool_videos: int = 1500  # v3 stage 3: short videos whose memories composed inputs are made of
    pool_held_out: int = 40  # ... and unseen ones for the growth curve
    copy_widths: tuple[int, ...] = (1, 4, 16, 64, 128)  # segments per composed input, phase by phase
    copy_steps: tuple[int, ...] = (500, 1000, 1500, 2000, 2500)
    copy_lr: float = 1e-3
    copy_eval_inputs: int = 40  # held-out composed inputs per width and curve point
    copy_ata_share: float = 0.7  # composed inputs allocated by ATA on the compressor's relevance, else at random
    tag_widths: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)  # v3 stage 4: first composed inputs again, W
    tag_steps: tuple[int, ...] = (1000, 1000, 1500, 1500, 1500, 1000, 800, 600)  # doubling, "when" twice as often
    tag_family_weights: tuple[float, ...] = (1.0, 2.0, 1.0)  # needle, grounding, counting
    real_steps: int = 1000  # ... then the decoder on real pairs of long and medium videos ...
    real_share: float = 0.5  # ... this share of the time, else on composed inputs of W = 128
    real_pool_videos: int = 400  # short videos the composed inputs of stage 4 are made of
    wide_widths: tuple[int, ...] = (16, 32, 64, 128)  # v3 stage 5: long phases at the widths stage 4 left short,
    wide_steps: tuple[int, ...] = (1000, 2000, 2000, 1000)  # "when" questions two in three, on fresh videos,
    wide_family_weights: tuple[float, ...] = (1.0, 4.0, 1.0)  # then real pairs again (`real_steps`)
    wide_pool_videos: int = 300
    blend_videos: int = 120  # v4 (stages 6-8, `v4`): 1 - 60 min videos per stage, own-video and global inputs
    blend_short_videos: int = 300  # short videos per v4 stage: v3's composed inputs among other videos
    blend_held_out: int = 12  # unseen 1 - 60 min videos the v4 growth curve is read on
    blend_max_duration: float = 3600.0  # seconds: the evaluation's longest videos (tests shorten it)
    blend_eval_inputs: int = 24  # held-out inputs per sampler, width and curve point
    blend_weights: tuple[tuple[float, ...], ...] = (  # own-video, global, other-video inputs; from stage 7 (v5)
        (0.45, 0.25, 0.3), (0.35, 0.2, 0.2, 0.25),  # also own-video inputs of short videos; stage 8 (v5) adds
        (0.25, 0.15, 0.15, 0.15, 0.2, 0.1),  # interval and order as own-video inputs of long and short videos;
        (0.2, 0.1, 0.1, 0.1, 0.3, 0.2),  # stage 9 (v5) gives them half the inputs; stage 10 (v5) 60%, most of
        (0.15, 0.05, 0.1, 0.1, 0.2, 0.4),  # them short videos', at small widths; stage 11 (v5) gives long inputs
        (0.25, 0.1, 0.1, 0.1, 0.25, 0.2))  # back the share stage 9 had
    blend_video_tags: tuple[float, ...] = (0.0, 0.5, 0.5, 0.5, 0.5, 0.5)  # inputs tagged as a whole video's would be
    blend_family_weights: tuple[float, ...] = (1.0, 2.0, 1.0)  # needle, grounding, counting
    blend_temporal: tuple[bool, ...] = (False, False, True, True, True, True)  # interval and order pooled (v5, from 8)
    blend_temporal_weights: tuple[float, ...] = (2.0, 1.0)  # interval, order: two numbers to copy against one name
    blend_widths: tuple[tuple[int, ...], ...] = ((32, 64, 128), (64, 128), (64, 128), (64, 128),  # stages 6-9
                                                 (16, 32, 64, 128), (64, 128))  # stage 10 from small widths up; 11
    blend_steps: tuple[tuple[int, ...], ...] = ((1200, 2400, 3000), (2000, 3000), (1500, 2200), (2500, 1800),
                                                (3500, 2000, 1000, 600), (1500, 700))
    blend_lrs: tuple[float, ...] = (1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 5e-4)
    blend_layers: tuple[int, ...] = (3, 3, 3, 3, 3, 3)  # the decoder's layers (`grow`); v4 planned 6 for stage 8, v5
    # spends it on interval and order instead (3 layers were ahead at equal CPU time: experiments/tiny-v4)
    blend_pool_shares: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0, 1.0, 0.5)  # of blend_videos and blend_short_videos:
    # stage 11 (v5) pools half as many, to fit the CPU-hours v5 has left

    def scaled(self, factor: float) -> Recipe:
        """The same recipe with `factor` times the videos and steps (for quick trial runs)."""
        counts = ("short_videos", "base_videos", "medium_videos", "long_videos", "held_out_videos", "clip_steps",
                  "base_steps", "caption_steps", "align_steps", "joint_steps", "longer_steps", "long_steps",
                  "tuning_videos", "localise_steps", "pool_videos", "pool_held_out", "copy_eval_inputs", "real_steps",
                  "real_pool_videos", "wide_pool_videos", "blend_videos", "blend_short_videos", "blend_held_out",
                  "blend_eval_inputs")
        scaled = {name: max(2, round(getattr(self, name) * factor)) for name in counts}
        return replace(self, **scaled, copy_steps=tuple(max(2, round(s * factor)) for s in self.copy_steps),
                       tag_steps=tuple(max(2, round(s * factor)) for s in self.tag_steps),
                       wide_steps=tuple(max(2, round(s * factor)) for s in self.wide_steps),
                       blend_steps=tuple(tuple(max(2, round(s * factor)) for s in steps) for steps in self.blend_steps))
