"""Every setting is declared once, in tempo.settings' table, and every surface is made from it: the page's controls
(and so the API's parameters), the command line's flags and the batch jobs' keys, with one default, one range and
one message for each mistake."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import gradio as gr
import pytest

import tempo
from demo.layout import build_demo
from demo.server import Server
from tempo import batch, cli
from tempo import settings as table
from tempo.config import RunConfig
from tempo.settings import BATCH, CLI, PAGE, Setting, setting_named, settings

EXAMPLE = "examples/synthetic-900001-2min.mp4"
SEED = Setting("seed", "allocation", int, "Seed", "which segments the random strategy keeps", 0, 1000)


@pytest.fixture(scope="module")
def tiny():
    return tempo.from_pretrained(device="cpu")


def page(model) -> tuple[dict[str, dict], dict[str, gr.components.Component]]:
    """The /answer endpoint's parameters by name, and the page's setting controls by label."""
    demo = build_demo(model, tempo.Limits())
    parameters = {p["parameter_name"]: p for p in demo.get_api_info()["named_endpoints"]["/answer"]["parameters"]}
    kinds = (gr.Slider, gr.Dropdown, gr.Radio, gr.Checkbox, gr.Textbox)
    controls = {block.label: block for block in demo.blocks.values() if isinstance(block, kinds)}
    return parameters, controls


def flags() -> dict[str, argparse.Action]:
    """`tempo ask`'s options by flag."""
    ask = cli.build_parser()._subparsers._group_actions[0].choices["ask"]
    return {flag: action for action in ask._actions for flag in action.option_strings}


def cli_config(model, *given: str) -> RunConfig:
    args = cli.build_parser().parse_args(["ask", "--video", "v.mp4", "--question", "q", *given])
    return cli.run_config(args, tempo.Limits(), model.spec)


def job_config(model, **given: object) -> RunConfig:
    job = batch.parse_job(json.dumps({"id": "j", "video": "/v.mp4", "question": "q", **given}), None)
    return batch.job_config(job, RunConfig(), model.spec)


def test_the_page_and_the_api_offer_the_tables_page_settings(tiny):
    parameters, controls = page(tiny)
    assert list(parameters) == ["video", "question", *(s.name for s in settings(PAGE))]
    for setting in settings(PAGE):
        control = controls[setting.label]
        if setting.clock:  # a time, typed: empty means none
            assert setting.default(tiny.spec) is None and control.value == "" and control.placeholder == "m:ss"
            assert parameters[setting.name]["parameter_default"] == ""
            continue
        assert parameters[setting.name]["parameter_default"] == setting.default(tiny.spec), setting.name
        assert control.value == setting.default(tiny.spec)
        if setting.choices:
            assert [value for _, value in control.choices] == list(setting.choices)
        else:
            assert (control.minimum, control.maximum) == setting.bounds(tiny.spec), setting.name
    assert controls["k_min"].maximum == tiny.spec.num_memory_tokens  # a range that depends on the checkpoint


def test_the_command_line_offers_the_tables_cli_settings(tiny):
    options = flags()
    for setting in settings():
        flag = "--" + setting.name.replace("_", "-")
        assert (flag in options) == (CLI in setting.surfaces), flag
        if flag in options:
            assert options[flag].help == setting.describe()  # its range and its default
            assert setting.value_in(cli_config(tiny)) == setting.value_in(RunConfig()), flag  # the same default
    assert "1-k_max tokens; default 4" in options["--k-min"].help
    assert cli_config(tiny, "--k-min", "7", "--strategy", "uniform", "--fast-seek").allocation.k_min == 7


def test_batch_jobs_take_the_tables_batch_settings(tiny):
    for setting in settings(BATCH):
        value = True if setting.kind is bool else next(iter(setting.choices)) if setting.choices else setting.minimum
        assert setting.value_in(job_config(tiny, **{setting.name: value})) == value, setting.name
        assert setting.value_in(job_config(tiny)) == setting.value_in(RunConfig())
    job = batch.parse_job(json.dumps({"id": "j", "video": "/v.mp4", "question": "q", "micro_batch": 2}), None)
    assert "micro_batch" not in job.settings and job.extra == {"micro_batch": 2}  # not a batch key: copied along


@pytest.mark.parametrize("setting, value", [(s, s.bounds()[0] - 1) for s in settings() if s.minimum is not None] +
                         [(s, "neither") for s in settings() if s.choices or s.kind is bool or s.clock] +
                         [(s, "1:75") for s in settings() if s.clock])
def test_each_bad_value_gets_the_tables_message_on_every_surface(tiny, setting, value):
    with pytest.raises(tempo.InputError) as expected:
        setting.check(value, tiny.spec)
    messages = []
    if CLI in setting.surfaces and setting.kind is not bool:
        with pytest.raises(tempo.InputError) as error:
            cli_config(tiny, "--" + setting.name.replace("_", "-"), str(value))
        messages.append(str(error.value))
    if BATCH in setting.surfaces:
        with pytest.raises(tempo.InputError) as error:
            job_config(tiny, **{setting.name: value})
        messages.append(str(error.value))
    if PAGE in setting.surfaces:
        with pytest.raises(tempo.InputError) as error:
            Server(tiny, tempo.Limits()).request(EXAMPLE, "q", {setting.name: value})
        messages.append(str(error.value))
    with pytest.raises(tempo.InputError) as error:  # the library's own way in: a RunConfig built in code
        tempo.answer(tiny, EXAMPLE, "q", holding(setting, value))
    messages.append(str(error.value))
    assert set(messages) == {str(expected.value)}


def holding(setting: Setting, value: object) -> RunConfig:
    """A RunConfig with `value` in `setting`'s field, unchecked."""
    if setting.part == "run":
        return replace(RunConfig(), **{setting.name: value})
    return replace(RunConfig(), **{setting.part: replace(getattr(RunConfig(), setting.part), **{setting.name: value})})


def test_a_setting_added_to_the_table_appears_on_every_surface(tiny, monkeypatch):
    monkeypatch.setattr(table, "SETTINGS", (*table.SETTINGS, SEED))
    parameters, controls = page(tiny)
    assert parameters["seed"]["parameter_default"] == 0 == SEED.default()
    assert (controls["Seed"].minimum, controls["Seed"].maximum, controls["Seed"].value) == (0, 1000, 0)
    assert flags()["--seed"].help == SEED.describe()
    assert cli_config(tiny, "--seed", "7").allocation.seed == 7
    assert job_config(tiny, seed=7).allocation.seed == 7
    assert Server(tiny, tempo.Limits()).request(EXAMPLE, "q", {"seed": 7}).config.allocation.seed == 7
    messages = set()
    for attempt in (lambda: cli_config(tiny, "--seed", "2000"), lambda: job_config(tiny, seed=2000),
                    lambda: Server(tiny, tempo.Limits()).request(EXAMPLE, "q", {"seed": 2000})):
        with pytest.raises(tempo.InputError) as error:
            attempt()
        messages.add(str(error.value))
    assert messages == {"Seed 2000 is greater than maximum 1000 (allowed range 0–1000)."}


@pytest.mark.parametrize("given, seconds", [("12:00", 720.0), ("1:02:03", 3723.0), ("90", 90.0), (" 0:30.5 ", 30.5),
                                            (45, 45), ("", None), (None, None)])
def test_a_time_is_taken_in_seconds_or_as_a_clock(given, seconds):
    assert setting_named("start").check(given) == seconds
