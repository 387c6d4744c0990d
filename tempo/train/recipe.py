"""The Tempo-Tiny recipe: the settings every stage shares, and the numbered stages as a list of records, one per
stage, each with its own settings (`staged.run_stage` runs one). Why each stage is what it is, with its
measurements: docs/tempo-tiny.md and experiments/."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

TRAINING_SEEDS = 1_000_000  # training videos use seeds from here on; evaluation uses seeds below it
TUNING_SEEDS = 200_000  # unseen videos the stages report on while the recipe is tuned (docs/tempo-tiny.md lists
# the other evaluation ranges: the shipped stage is chosen on one, each version's acceptance check on another)


def scaled_count(count: int, factor: float) -> int:
    """A count of videos or steps times `factor`, never below 2 (a trial run still takes every path)."""
    return max(2, round(count * factor))


@dataclass(frozen=True)
class LocaliseStage:
    """Tokenizer, base pre-training, then the compressor's relevance trained to rank the evidence first."""

    number: int
    version: str
    steps: int  # ranking updates ...
    lists: int  # ... of this many lists each
    lr: float

    def scaled(self, factor: float) -> LocaliseStage:
        return replace(self, steps=scaled_count(self.steps, factor))


@dataclass(frozen=True)
class RelevanceStage:
    """v7: the compressor's relevance on one-object ranking lists and lists for questions naming two objects
    (`two_objects`), its memory tokens anchored to where the stage it follows left them."""

    number: int
    version: str
    follows: int  # the stage whose state it starts from
    steps: int  # updates ...
    lists: int  # ... of this many lists each
    lr: float
    two_object_share: float  # of the lists
    anchor: float  # weight of the memory anchor beside the ranking losses
    videos_of: int | None = None  # the relevance stage whose encoded videos it trains on (None: its own); the
    # vision tower has been frozen since stage 3, so they are the same features

    def scaled(self, factor: float) -> RelevanceStage:
        return replace(self, steps=scaled_count(self.steps, factor))


@dataclass(frozen=True)
class PaperStage:
    """The paper's stages 0-2 at toy scale (the recipe's align, joint and longer settings), the ranking loss beside
    every step that trains the compressor."""

    number: int
    version: str

    def scaled(self, factor: float) -> PaperStage:
        return self


@dataclass(frozen=True)
class ComposedStage:
    """The decoder alone on composed inputs of short videos' segments, one phase per width; then, with
    `real_steps`, on real pairs of long and medium videos `real_share` of the time."""

    number: int
    version: str
    report_key: str  # the key its phases' growth curve goes under among the stage report's parts
    widths: tuple[int, ...]  # segments per composed input, phase by phase
    steps: tuple[int, ...]
    family_weights: tuple[float, ...] | None  # needle, grounding, counting; None draws them evenly
    pool_videos: int  # short videos its pool is made of ...
    skip: int  # ... after the first this many (the ones earlier stages pooled)
    lr: float
    real_steps: int = 0
    real_share: float = 0.0
    real_lr: float = 0.0

    def scaled(self, factor: float) -> ComposedStage:
        return replace(self, steps=tuple(scaled_count(s, factor) for s in self.steps),
                       pool_videos=scaled_count(self.pool_videos, factor),
                       skip=scaled_count(self.skip, factor) if self.skip else 0,
                       real_steps=scaled_count(self.real_steps, factor) if self.real_steps else 0)


@dataclass(frozen=True)
class DecoderSize:
    """A decoder grown wider (`grow.widened`): hidden width, attention heads and key-value heads (head width stays
    32), MLP width, and layers (`grow.grown`). Each only grows."""

    layers: int
    width: int
    heads: int
    kv_heads: int
    mlp_width: int


@dataclass(frozen=True)
class BlendStage:
    """The decoder alone on a blend of samplers over fresh 1-60 minute and short videos (`blend_stages`), one phase
    per width. `weights` give own-video, global and other-video inputs, then (when there is one more) short
    own-video inputs, then (with `temporal`) interval and order own-video inputs of long and of short videos, then
    (with `counting_pool_share`) counting own-video inputs of videos pooled for counting alone."""

    number: int
    version: str
    weights: tuple[float, ...]
    video_tags: float  # share of the inputs tagged as a whole video's would be
    temporal: bool  # interval and order questions pooled too
    widths: tuple[int, ...]
    steps: tuple[int, ...]
    lr: float
    layers: int  # the decoder grown to this many layers first (`grow`)
    pool_share: float  # of the recipe's blend_videos and blend_short_videos
    slot: int  # which stage-wide block of fresh videos it pools (`blend_stages.seed_offsets`)
    decoder: DecoderSize | None = None  # the decoder grown to this size first (width, heads, MLP and layers)
    counting_pool_share: float = 0.0  # of the slot's videos after `pool_share`, pooled for counting questions alone
    temporal_weights: tuple[float, ...] | None = None  # interval : order; None: the recipe's
    follows: int | None = None  # the stage whose state it starts from; None: the one numbered before it
    distractors: bool = False  # v7: needle inputs with distractors (long, then short videos) end the weights
    uneven_tags: float = 0.0  # v7: share of the inputs whose tags are not evenly spaced (`uneven_tags`)

    def scaled(self, factor: float) -> BlendStage:
        return replace(self, steps=tuple(scaled_count(s, factor) for s in self.steps))


Stage = LocaliseStage | PaperStage | ComposedStage | BlendStage | RelevanceStage

# Needle, grounding and counting weights of the blend stages' own-video and other-video inputs, and the interval
# and order weights of their temporal ones: two numbers to copy against one name to read.
BLEND_FAMILIES = (1.0, 2.0, 1.0)
TEMPORAL_WEIGHTS = (2.0, 1.0)

# The decoder v6 grows v5's into: the sizing sweep's pick (experiments/tiny-v6/README.md, sweep/sizing-sweep.json).
V6_DECODER = DecoderSize(layers=5, width=128, heads=4, kv_heads=2, mlp_width=384)

# v7's blend: own video, global, other videos, short own video, interval and order of long and of short videos
# (stage 12's, each a little less), then needle inputs with distractors of long and of short videos.
V7_BLEND = (0.2, 0.1, 0.1, 0.05, 0.2, 0.15, 0.1, 0.1)

STAGES: tuple[Stage, ...] = (
    LocaliseStage(1, "v3", steps=2400, lists=4, lr=5e-4),
    PaperStage(2, "v3"),
    ComposedStage(3, "v3", "compose", widths=(1, 4, 16, 64, 128), steps=(500, 1000, 1500, 2000, 2500),
                  family_weights=None, pool_videos=1500, skip=0, lr=1e-3),
    ComposedStage(4, "v3", "tags", widths=(1, 2, 4, 8, 16, 32, 64, 128),
                  steps=(1000, 1000, 1500, 1500, 1500, 1000, 800, 600), family_weights=(1.0, 2.0, 1.0),
                  pool_videos=400, skip=0, lr=1e-3, real_steps=1000, real_share=0.5, real_lr=3e-4),
    ComposedStage(5, "v3", "wide", widths=(16, 32, 64, 128), steps=(1000, 2000, 2000, 1000),
                  family_weights=(1.0, 4.0, 1.0), pool_videos=300, skip=1500, lr=1e-3, real_steps=1000,
                  real_share=0.5, real_lr=3e-4),
    BlendStage(6, "v4", weights=(0.45, 0.25, 0.3), video_tags=0.0, temporal=False, widths=(32, 64, 128),
               steps=(1200, 2400, 3000), lr=1e-3, layers=3, pool_share=1.0, slot=0),
    BlendStage(7, "v5", weights=(0.35, 0.2, 0.2, 0.25), video_tags=0.5, temporal=False, widths=(64, 128),
               steps=(2000, 3000), lr=1e-3, layers=3, pool_share=1.0, slot=1),
    BlendStage(8, "v5", weights=(0.25, 0.15, 0.15, 0.15, 0.2, 0.1), video_tags=0.5, temporal=True,
               widths=(64, 128), steps=(1500, 2200), lr=1e-3, layers=3, pool_share=1.0, slot=2),
    BlendStage(9, "v5", weights=(0.2, 0.1, 0.1, 0.1, 0.3, 0.2), video_tags=0.5, temporal=True, widths=(64, 128),
               steps=(2500, 1800), lr=1e-3, layers=3, pool_share=1.0, slot=3),
    BlendStage(10, "v5", weights=(0.15, 0.05, 0.1, 0.1, 0.2, 0.4), video_tags=0.5, temporal=True,
               widths=(16, 32, 64, 128), steps=(3500, 2000, 1000, 600), lr=1e-3, layers=3, pool_share=1.0, slot=4),
    BlendStage(11, "v5", weights=(0.25, 0.1, 0.1, 0.1, 0.25, 0.2), video_tags=0.5, temporal=True,
               widths=(64, 128), steps=(1500, 700), lr=5e-4, layers=3, pool_share=0.5, slot=5),
    BlendStage(12, "v6", weights=(0.25, 0.1, 0.1, 0.1, 0.25, 0.2), video_tags=0.5, temporal=True,
               widths=(16, 32, 64, 128), steps=(1500, 1500, 1500, 1000), lr=1e-3, layers=3, pool_share=0.75,
               slot=6, decoder=V6_DECODER),
    BlendStage(13, "v6", weights=(0.2, 0.1, 0.05, 0.05, 0.2, 0.2, 0.2), video_tags=0.5, temporal=True,
               widths=(8, 16, 32, 64, 128), steps=(800, 1000, 1200, 1200, 800), lr=1e-3, layers=V6_DECODER.layers,
               pool_share=0.5, slot=7, counting_pool_share=0.5, temporal_weights=(1.0, 1.0)),
    BlendStage(14, "v6", weights=(0.25, 0.1, 0.1, 0.1, 0.25, 0.2), video_tags=0.5, temporal=True, widths=(64, 128),
               steps=(1500, 700), lr=5e-4, layers=V6_DECODER.layers, pool_share=0.5, slot=8),
    # v7 (experiments/tiny-v7/README.md) goes on from v6's shipped stage 12, not from 13 or 14.
    RelevanceStage(15, "v7", follows=12, steps=1000, lists=4, lr=2e-4, two_object_share=0.5, anchor=100.0),
    # stage 15 left order's two objects short; a trial from it (relevance_again_cost.py) chose these settings
    RelevanceStage(16, "v7", follows=15, steps=600, lists=4, lr=2e-4, two_object_share=0.75, anchor=30.0,
                   videos_of=15),
    BlendStage(17, "v7", weights=V7_BLEND, video_tags=0.5, temporal=True, widths=(16, 32, 64, 128),
               steps=(1200, 1200, 1200, 900), lr=1e-3, layers=V6_DECODER.layers, pool_share=0.75, slot=9,
               distractors=True, uneven_tags=0.25),
    BlendStage(18, "v7", weights=V7_BLEND, video_tags=0.5, temporal=True, widths=(64, 128), steps=(1500, 700),
               lr=5e-4, layers=V6_DECODER.layers, pool_share=0.5, slot=10, distractors=True, uneven_tags=0.25),
)


@dataclass(frozen=True)
class Recipe:
    """The settings every stage shares, and the stages."""

    seed: int = 0
    short_videos: int = 200  # 30 s - 2.5 min: base pre-training and the paper's stages 0 and 1
    base_videos: int = 2800  # more 30 s - 2.5 min videos, for base pre-training only (see `curriculum.train`)
    medium_videos: int = 60  # 2 - 10 min at <= medium_frames: the paper's stage 2
    long_videos: int = 30  # 10 - 60 min at <= max_frames: the paper's stage 3
    max_frames: int = 1024  # frames sampled from a long video, as at inference (tests sample fewer)
    medium_frames: int = 256
    held_out_videos: int = 12  # 30 s - 2.5 min, never trained on: relevance accuracy
    clip_steps: int = 2500  # base pre-training on 2-frame clips (a quarter of a segment's cost)
    clip_batch: int = 16
    base_steps: int = 400  # then on whole 8-frame segments
    base_batch: int = 8
    caption_steps: int = 1200  # the paper's stage 0 on single segments ...
    caption_batch: int = 16
    align_steps: int = 300  # ... then on questions about whole short videos
    joint_steps: int = 500
    longer_steps: int = 150
    long_steps: int = 1600
    batch: int = 4  # (video, question) examples per step in the paper's stages 0-3
    base_lr: float = 2e-3
    align_lr: float = 1e-3
    lr: float = 3e-4
    compressor_lr: float = 5e-5
    tuning_videos: int = 24  # 1 - 60 min videos, never trained on, that localisation is reported on
    tuning_max_duration: float = 3600.0
    pool_held_out: int = 40  # unseen short videos the composed-input growth curve is read on
    copy_eval_inputs: int = 40  # held-out composed inputs per width and curve point
    copy_ata_share: float = 0.7  # composed inputs allocated by ATA on the compressor's relevance, else at random
    blend_videos: int = 120  # 1 - 60 min videos a blend stage pools (times its pool_share) ...
    blend_short_videos: int = 300  # ... and short videos
    blend_held_out: int = 12  # unseen 1 - 60 min videos the blend stages' growth curve is read on
    blend_max_duration: float = 3600.0  # seconds: the evaluation's longest videos (tests shorten it)
    blend_eval_inputs: int = 24  # held-out inputs per sampler, width and curve point
    blend_family_weights: tuple[float, ...] = BLEND_FAMILIES
    blend_temporal_weights: tuple[float, ...] = TEMPORAL_WEIGHTS
    stages: tuple[Stage, ...] = field(default=STAGES)

    def stage(self, number: int) -> Stage:
        """The stage numbered `number`."""
        for stage in self.stages:
            if stage.number == number:
                return stage
        raise ValueError(f"there is no stage {number}; the stages are {[s.number for s in self.stages]}")

    def scaled(self, factor: float) -> Recipe:
        """The same recipe with `factor` times the videos and steps (for quick trial runs)."""
        counts = ("short_videos", "base_videos", "medium_videos", "long_videos", "held_out_videos", "clip_steps",
                  "base_steps", "caption_steps", "align_steps", "joint_steps", "longer_steps", "long_steps",
                  "tuning_videos", "pool_held_out", "copy_eval_inputs", "blend_videos", "blend_short_videos",
                  "blend_held_out", "blend_eval_inputs")
        scaled: dict[str, object] = {name: scaled_count(getattr(self, name), factor) for name in counts}
        scaled["stages"] = tuple(stage.scaled(factor) for stage in self.stages)
        return replace(self, **scaled)  # type: ignore[arg-type]  # every name above is an int field


def shared_settings(recipe: Recipe) -> dict[str, object]:
    """The recipe's settings apart from its stages."""
    return {f.name: getattr(recipe, f.name) for f in fields(recipe) if f.name != "stages"}
