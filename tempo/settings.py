"""The one table of settings people choose, and what reads it: each setting's type, range, unit and help, its check,
and a run's config built, checked and summarised from it.

`SETTINGS` declares each user-facing setting once; the page's controls, the API's parameters, the CLI's flags and the
batch jobs' keys are all made from it, so one bad value gets one message wherever it comes in. The defaults are the
dataclasses' (`tempo.config`).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol, cast

from .allocation import STRATEGIES, TRUNCATIONS
from .config import Limits, RunConfig, Zoom
from .errors import InputError
from .times import LATEST_S, clock_said, quoted, seconds_given


class Checkpoint(Protocol):
    """What the settings' ranges and defaults depend on in a checkpoint (a loaded model's `spec` has it)."""

    @property
    def num_memory_tokens(self) -> int: ...  # k_max

    @property
    def visual_token_budget(self) -> int: ...


ZOOMS = {  # value: what it does (the app's label)
    Zoom.OFF.value: "off (the whole video only)",
    Zoom.AUTO.value: "auto ('when', 'from when to when', 'which first')",
    Zoom.ALWAYS.value: "always",
}
PAGE, CLI, BATCH = "page", "cli", "batch"  # where a setting can be given (the page's API takes what the page does)
SERVER = "server"  # a server's own setting, from its environment ($TEMPO_<NAME>), shown on its page
ENV_PREFIX = "TEMPO_"
EVERYWHERE = frozenset({PAGE, CLI, BATCH})
K_MAX = "num_memory_tokens"  # a maximum that is the checkpoint's memory tokens per segment
# Where the model runs, for defaults that depend on it (Setting.where): a device type, or a ZeroGPU Space.
PLACES = {"cpu": "on a CPU", "cuda": "on CUDA", "zero_gpu": "on a ZeroGPU Space"}
YES_NO = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


@dataclass(frozen=True)
class Setting:
    """One setting a person chooses: the RunConfig part that holds it, its type and range, and how it is named and
    explained wherever it is offered. Its default is the dataclass field's (the budget's: the checkpoint's)."""

    name: str  # the field, API parameter and job key; the CLI flag is --name-with-dashes
    part: str  # "sampling", "allocation", "generation" or "limits", or "run" for RunConfig's own fields
    kind: type  # int, float, str or bool
    label: str
    help: str
    minimum: float | None = None
    maximum: float | str | None = None  # K_MAX: the checkpoint's memory tokens per segment
    step: float = 1
    unit: str = ""
    choices: Mapping[str, str] | None = None  # value: label
    surfaces: frozenset[str] = EVERYWHERE
    checkpoint_default: str | None = None  # the Checkpoint attribute that is the default where the config has None
    clock: bool = False  # a time in the video, given in seconds or as m:ss / h:mm:ss; empty for none
    where: Mapping[str, object] | None = None  # defaults by place (PLACES), over the field's; "cpu" first
    renamed_from: str | None = None  # a SERVER setting's name before a rename, still read (with a warning)

    def value_in(self, config: RunConfig) -> object:
        return getattr(config if self.part == "run" else getattr(config, self.part), self.name)

    def default(self, spec: Checkpoint | None = None, place: str | None = None) -> object:
        """The library's default (with `spec`: the checkpoint's where it has one, and within this checkpoint's
        range; with `place`, that place's where the table gives one); None where only a checkpoint or the place
        can say."""
        value = self.value_in(RunConfig())
        if self.where is not None and place is not None:
            value = self.where.get(place, value if value is not None else next(iter(self.where.values())))
        if value is None and self.checkpoint_default is not None and spec is not None:
            value = getattr(spec, self.checkpoint_default)
        if self.choices is None and self.kind in (int, float) and value is not None:
            assert isinstance(value, (int, float))  # a number setting's field, place default or checkpoint attribute
            low, high = self.bounds(spec)
            value = min(max(value, low), high)
        return value

    def bounds(self, spec: Checkpoint | None = None) -> tuple[float, float]:
        """(minimum, maximum); a maximum named after a Checkpoint attribute is unbounded without `spec`."""
        minimum, maximum = self.minimum, self.maximum
        if isinstance(maximum, str):
            maximum = getattr(spec, maximum) if spec is not None else math.inf
        if minimum is None or maximum is None:  # only the number settings have a range, and each has both ends
            raise TypeError(f"The {self.name} setting has no range.")
        return minimum, maximum

    def describe(self, spec: Checkpoint | None = None) -> str:
        """The help text with the range and the default, e.g. for a command line's --help."""
        default = self.default(spec)
        if self.kind is bool:
            return f"{self.help} (default {'on' if default else 'off'})"
        if self.kind is str and self.choices is None:
            return f"{self.help} (default {quoted(default) if default else 'none'})"
        if self.choices is not None:
            allowed = "one of " + ", ".join(self.choices)
        else:
            low, high = self.bounds(spec)
            top = "k_max" if high == math.inf and self.maximum == K_MAX else f"{high:g}"
            allowed = f"{low:g}-{top}" + (f" {self.unit}" if self.unit else "")
        shown = ("none" if self.clock else "the checkpoint's") if default is None else default
        if self.where is not None:
            placed = ", ".join(f"{value} {PLACES[place]}" for place, value in self.where.items())
            shown = placed if default is None else f"{shown}; {placed}"
        return f"{self.help} ({allowed}; default {shown})"

    @property
    def variable(self) -> str:
        """The environment variable a SERVER setting is read from."""
        return ENV_PREFIX + self.name.upper()

    def from_env(self, fallback: object) -> object:
        """The value in the environment (`variable`, or its name's before a rename), checked; else `fallback`."""
        old = ENV_PREFIX + self.renamed_from.upper() if self.renamed_from else ""
        variable = old if self.variable not in os.environ and old in os.environ else self.variable
        if variable == old:
            logging.getLogger(__name__).warning("%s is the old name of %s: read in this release, ignored in the next",
                                                old, self.variable)
        text = os.environ.get(variable)
        if text is None:
            return fallback
        value: object = text
        if self.kind is bool:
            if text.strip().lower() not in YES_NO:
                raise InputError(f"{variable}={text!r} is not on or off (1/0, true/false, yes/no, on/off).")
            value = YES_NO[text.strip().lower()]
        if self.kind in (int, float):
            try:
                value = float(text)
            except ValueError:
                raise InputError(f"{variable}={text!r} is not a number.") from None
        try:
            return self.check(value)
        except InputError as exc:
            raise InputError(f"{variable}: {exc}") from None

    def check(self, value: object, spec: Checkpoint | None = None, exact: bool = False) -> object:
        """`value` if it is one this setting takes (whole numbers as int, numbers as float), else an InputError that
        names the setting and what it takes. Every way into a run checks here, so each mistake has one message.
        `exact`: a whole-number setting must hold an int already (a config built in code is not converted)."""
        if value is None and (self.checkpoint_default is not None or self.where is not None
                              and self.value_in(RunConfig()) is None):
            return None  # the checkpoint's, or the place's
        if self.clock:
            value = seconds_given(value, self.label)
            if value is None:
                return None
        if self.choices is not None:
            if not isinstance(value, str) or value not in self.choices:
                raise InputError(f"{self.label} must be one of {', '.join(self.choices)} (got {quoted(value)}).")
            return value
        if self.kind is bool:
            if not isinstance(value, bool):
                raise InputError(f"{self.label} must be true or false (got {quoted(value)}).")
            return value
        if self.kind is str:  # free text, e.g. a list of names
            if not isinstance(value, str):
                raise InputError(f"{self.label} must be text (got {quoted(value)}).")
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"{self.label} must be a number (got {quoted(value)}).")
        if not math.isfinite(value):
            raise InputError(f"{self.label} must be a finite number (got {quoted(value)}).")
        if self.kind is int and not (isinstance(value, int) if exact else float(value).is_integer()):
            raise InputError(f"{self.label} must be a whole number (got {quoted(value)}).")
        low, high = self.bounds(spec)
        if not low <= value <= high:
            side = f"less than minimum {low:g}" if value < low else f"greater than maximum {high:g}"
            raise InputError(f"{self.label} {value:g} is {side} (allowed range {low:g}–{high:g}).")
        return int(value) if self.kind is int else float(value)


SETTINGS: tuple[Setting, ...] = (
    Setting("max_frames", "sampling", int, "Max sampled frames", "2 frames per second up to this cap", 1, 2048,
            unit="frames"),
    Setting("budget", "allocation", int, "Visual token budget", "memory tokens shared by all segments", 1, 65536,
            unit="tokens", checkpoint_default="visual_token_budget"),
    Setting("k_min", "allocation", int, "k_min", "tokens every segment keeps", 1, K_MAX, unit="tokens"),
    Setting("strategy", "allocation", str, "Allocation strategy", "how the budget is shared between segments",
            choices=STRATEGIES),
    Setting("truncation", "allocation", str, "Intra-segment reduction",
            "which of a segment's memory tokens it keeps", choices=TRUNCATIONS),
    Setting("temperature", "generation", float, "Temperature", "0 = greedy", 0, 2, step=0.05),
    Setting("max_new_tokens", "generation", int, "Max new tokens", "the longest answer, in tokens", 1, 2048,
            unit="tokens", where={"zero_gpu": 128}),  # each token reserves GPU time there (demo/device.GpuCost)
    Setting("top_p", "generation", float, "Top-p", "when sampling, draw from the likeliest tokens that make up this "
            "share of the probability", 0.01, 1, step=0.01, surfaces=frozenset({CLI, BATCH})),
    Setting("fast_seek", "sampling", bool, "Fast seek",
            "decode intra frames only: an hour in seconds, but not the released sampling",
            surfaces=frozenset({CLI, BATCH})),
    Setting("start", "sampling", float, "From", "analyse the video from this time (m:ss or seconds; empty: the "
            "beginning)", 0, LATEST_S, unit="s", clock=True),
    Setting("end", "sampling", float, "To", "up to this time (m:ss or seconds; empty: the end)", 0, LATEST_S,
            unit="s", clock=True),
    Setting("zoom", "run", str, "Zoom", "compress the whole video, then ask again over the stretch around its "
            "most relevant moment, sampled at the full 2 fps", choices=ZOOMS),
    Setting("micro_batch", "run", int, "Micro-batch", "segments per compressor forward pass", 1, 64,
            unit="segments", surfaces=frozenset({CLI}), where={"cpu": 4, "cuda": 16}),  # docs/cuda.md: why 16
    Setting("cache_mb", "limits", int, "Per-video cache", "decoded frames or vision features and compressions "
            "kept for follow-up questions; the least recently used video leaves first", 1, 999_999, unit="MB",
            surfaces=frozenset({SERVER})),
    Setting("cache_questions", "limits", int, "Compressions per video", "questions whose compression each cached "
            "video keeps; the least recently asked leaves first", 1, 1024, surfaces=frozenset({SERVER})),
    Setting("uploads_mb", "limits", int, "Upload folder", "uploads, videos handed to the tools, previews and files "
            "handed out; the oldest file leaves first", 1, 999_999, unit="MB", surfaces=frozenset({SERVER})),
    Setting("sessions", "limits", int, "Sessions kept", "visitors whose conversation stays in memory; the least "
            "recently seen leaves first", 1, 999_999, surfaces=frozenset({SERVER})),
    Setting("allowed_hosts", "limits", str, "Allowed hosts", "names besides localhost, 127.0.0.1 and [::1] that a "
            "local server (or a Space, besides its own) answers, comma-separated", surfaces=frozenset({SERVER})),
    Setting("live_recent_min", "limits", int, "Live recent memories", "minutes of a live stream's memories that Ask "
            "now answers from, within the frame cap's worth of segments; the oldest leave first", 1, 240, unit="min",
            surfaces=frozenset({SERVER}), renamed_from="live_window_min"),
    Setting("live_replay_min", "limits", int, "Live replay", "minutes of a live stream's frames kept to watch "
            "again; the oldest leave first", 1, 60, unit="min", surfaces=frozenset({SERVER})),
    Setting("live_watches", "limits", int, "Live watches", "streams watched at once; another is refused until one "
            "stops", 1, 64, surfaces=frozenset({SERVER})),
    Setting("live_lab_streams", "limits", bool, "Cameras on this network", "let live mode read streams from this "
            "machine's private network (10.x, 172.16-31.x, 192.168.x): for a lab machine's own cameras; never on a "
            "Space", surfaces=frozenset({SERVER})),
    Setting("int8", "limits", bool, "Int8 weights", "hold the decoder's and compressor's linear weights in int8 "
            "(about half the GPU memory of bf16 weights, logits within 5e-2 relative on the conformance set); read "
            "when the model is loaded", surfaces=frozenset({SERVER, CLI})),
)


def settings(surface: str | None = None) -> tuple[Setting, ...]:
    """The table, or the settings offered on one surface (PAGE, CLI, BATCH), in table order."""
    return tuple(s for s in SETTINGS if surface is None or surface in s.surfaces)


def setting_named(name: str) -> Setting:
    for setting in SETTINGS:
        if setting.name == name:
            return setting
    raise InputError(f"There is no setting {name!r}; the settings are {', '.join(s.name for s in SETTINGS)}.")


def summary(config: RunConfig, budget: int) -> dict[str, object]:
    """The chosen settings of `config`, for reports and JSON (`budget`: the one in effect, after defaults)."""
    return {s.name: budget if s.name == "budget" else s.value_in(config) for s in settings()
            if s.surfaces - {SERVER}}  # a server's own settings are not a run's


def validate(config: RunConfig, spec: Checkpoint | None = None) -> None:
    """Every setting of `config` in range (with `spec`, the ranges that depend on the checkpoint too)."""
    for setting in settings():
        setting.check(setting.value_in(config), spec, exact=True)
    fps = config.sampling.fps
    if not (isinstance(fps, (int, float)) and math.isfinite(fps) and fps > 0):
        raise InputError(f"Sampling fps must be a positive number (got {fps!r}).")
    start, end = config.sampling.start, config.sampling.end
    if start is not None and end is not None and end <= start:
        raise InputError(f"The range ends ({clock_said(end)}) before it starts ({clock_said(start)}).")


def with_settings(config: RunConfig, values: Mapping[str, object], spec: Checkpoint | None = None) -> RunConfig:
    """`config` with `values` (setting name: value, from a page, an API call, a command line or a job), each checked
    against the table; the one place a value from outside becomes part of a run."""
    parts: dict[str, dict[str, Any]] = {}  # part: {field: checked value}, keyword arguments to replace()
    for name, value in values.items():
        setting = setting_named(name)
        parts.setdefault(setting.part, {})[name] = setting.check(value, spec)
    config = replace(config, **parts.pop("run", {}))
    return replace(config, **{part: replace(getattr(config, part), **changes) for part, changes in parts.items()})


def limits_from_env() -> Limits:
    """The limits' defaults, overridden by $TEMPO_MAX_QUESTION_CHARS and the other variables read here (docs/limits.md),
    and by each SERVER setting's $TEMPO_<NAME>."""
    default = Limits()

    def positive(name: str, fallback: float) -> float:
        text = os.environ.get(name)
        if text is None:
            return fallback
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"{name}={text!r} is not a number.") from None
        if not (math.isfinite(value) and value > 0):
            raise InputError(f"{name} must be a positive number (got {text!r}).")
        return value

    return Limits(
        max_question_chars=int(positive("TEMPO_MAX_QUESTION_CHARS", default.max_question_chars)),
        max_upload_bytes=int(positive("TEMPO_MAX_UPLOAD_MB", default.max_upload_bytes / 2**20) * 2**20),
        max_duration_s=positive("TEMPO_MAX_DURATION_MIN", default.max_duration_s / 60) * 60,
        max_frame_pixels=int(positive("TEMPO_MAX_FRAME_MEGAPIXELS", default.max_frame_pixels / 1e6) * 1e6),
        decode_memory_bytes=int(positive("TEMPO_DECODE_MEMORY_MB", default.decode_memory_bytes / 2**20) * 2**20),
        decode_stall_s=positive("TEMPO_DECODE_STALL_S", default.decode_stall_s),
        max_clip_s=positive("TEMPO_MAX_CLIP_S", default.max_clip_s),
        # keyword arguments: each SERVER setting's value, checked against its row (a value of its field's type)
        **cast("dict[str, Any]", {setting.name: setting.from_env(getattr(default, setting.name))
                                  for setting in settings(SERVER)}),
    )
