"""The page's controls, made from the settings table (`tempo.settings.SETTINGS`): a slider for a range, a switch for
a yes/no, a choice for a list. The API's parameters are these controls, named after their settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gradio as gr

from tempo.config import Limits, RunConfig
from tempo.model import CheckpointSpec
from tempo.settings import PAGE, PLACES, SERVER, Setting, setting_named, settings

COMPARED = ("strategy", "budget", "k_min", "truncation")  # what the other side of a comparison may change
OTHER = "other_"  # a comparison's other side: other_strategy, other_budget, ...
OTHER_DEFAULTS = {"strategy": "uniform"}  # ATA against a uniform share: the paper's comparison


def control(setting: Setting, spec: CheckpointSpec, place: str | None = None,
            **overrides: Any) -> gr.components.Component:
    """The widget for `setting`, with the range and default it has for this checkpoint (and `place`, where the
    model runs: a default of its own there is said to be one to raise)."""
    value = setting.default(spec, place)
    info = setting.help
    if setting.where is not None and place is not None and place in setting.where:
        info = f"{setting.help}; {value} to start with {PLACES[place]}: raise it for more"
    options: dict[str, Any] = dict(label=setting.label, info=info, value=value) | overrides
    if setting.kind is bool:
        return gr.Checkbox(**options)
    if setting.clock:
        return gr.Textbox(**(options | {"value": ""}), placeholder="m:ss", max_lines=1, max_length=12)
    if setting.choices is None:
        low, high = setting.bounds(spec)
        return gr.Slider(low, high, step=setting.step, **options)
    choices = [(label, value) for value, label in setting.choices.items()]
    return gr.Radio(choices, **options) if len(choices) <= 3 else gr.Dropdown(choices, **options)


def controls(spec: CheckpointSpec, place: str | None = None) -> dict[str, gr.components.Component]:
    """One control per setting the page offers, by name, in the table's order (the API's parameter order), with
    the defaults of `place` (where the model runs); the time range's two ends side by side."""
    made: dict[str, gr.components.Component] = {}
    offered = settings(PAGE)
    for number, setting in enumerate(offered):
        if setting.clock and number and offered[number - 1].clock:
            continue  # placed in the row its range began
        if setting.clock:
            with gr.Row():
                for ranged in offered[number:]:
                    if not ranged.clock:
                        break
                    made[ranged.name] = control(ranged, spec)
        else:
            made[setting.name] = control(setting, spec, place)
    return made


def other_controls(spec: CheckpointSpec) -> dict[str, gr.components.Component]:
    """The other side of a comparison: `other_<name>` for every compared setting."""
    made = {}
    for name in COMPARED:
        setting = setting_named(name)
        made[OTHER + name] = control(setting, spec, label=f"Other {setting.label}", info=None,
                                     value=OTHER_DEFAULTS.get(name, setting.default(spec)))
    return made


def split_others(values: Mapping[str, object]) -> tuple[dict[str, object], dict[str, object]]:
    """A comparison's keyword arguments as (this run's settings, the other side's by setting name)."""
    mine = {name: value for name, value in values.items() if not name.startswith(OTHER)}
    others = {name[len(OTHER):]: value for name, value in values.items() if name.startswith(OTHER)}
    return mine, others


def server_settings(limits: Limits) -> str:
    """What this server keeps, each cap with its value (the table's SERVER settings that have a unit or a range),
    as one line of Markdown for the page."""
    caps = [f"{setting.label.lower()} {setting.value_in(RunConfig(limits=limits)):,}"
            + (f" {setting.unit}" if setting.unit else "") for setting in settings(SERVER) if setting.kind is int]
    variables = ", ".join(f"`{setting.variable}`" for setting in settings(SERVER) if setting.kind is int)
    weights = f" The model's weights are held in int8 (`{setting_named('int8').variable}`)." if limits.int8 else ""
    return (f"This server keeps at most: {' · '.join(caps)}; the least recently used leave first (set by "
            f"{variables}).{weights}")
