"""The page: one small builder per panel, then the wiring of its events to `handlers` and of the API's endpoints to
`api`. Handlers return named updates; `connect` maps the names onto this page's components."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr

from tempo.config import Limits
from tempo.model import TempoModel
from tempo.render.progress import RunProgress
from tempo.render.timeline import timeline_figure
from tempo.settings import limits_from_env, setting_named

from . import api, handlers, live_api, live_layout, tools
from .html import CLIP_PICKER_JS, MOMENT_JS, PICKER_JS, TURN_PICKER_JS, header_html
from .server import Server
from .settings import controls, other_controls, server_settings

QUEUE_SIZE = 16  # requests waiting beyond this are refused ("queue is full") instead of piling up
ANALYZE_OUTPUTS = ("status", "timeline", "chat", "gallery", "stats", "json_file", "csv_file", "report_file",
                   "filmstrip", "truth", "conversation", "moments", "clip_file",
                   "highlights_file")  # what /analyze returns, in this order (added ones last)
Outputs = dict[str, gr.components.Component]


@dataclass
class Inputs:
    """What a visitor gives: the video, its preview, the question, the settings (by name) and the buttons."""

    upload: gr.File
    preview: gr.Video
    question: gr.Textbox
    run: gr.Button
    closer: gr.Button
    cancel: gr.Button
    settings: Outputs
    every_token: gr.Checkbox


def input_panel(server: Server) -> Inputs:
    """Upload, question and Ask first (above the fold on a laptop), then the preview, examples and settings."""
    upload = gr.File(label="Video", file_types=["video"], file_count="single", height=130, elem_id="tempo-video")
    question = gr.Textbox(label="Question", lines=2, max_length=server.limits.max_question_chars,
                          placeholder="e.g. When does the speaker show the chart?", elem_id="tempo-question")
    with gr.Row():
        run = gr.Button("Compress & answer", variant="primary", scale=3, elem_id="tempo-ask")
        closer = gr.Button("Look closer", variant="secondary", scale=2, elem_id="tempo-closer")
        cancel = gr.Button("Cancel", variant="stop", scale=1, elem_id="tempo-cancel")
    preview = gr.Video(label="Preview", interactive=False, height=240, elem_id="tempo-preview")
    if server.examples:
        gr.Examples([[e.video, e.question] for e in server.examples], inputs=[upload, question],
                    example_labels=[e.label for e in server.examples])
    with gr.Accordion("Advanced settings", open=False):
        settings = controls(server.model.spec, server.device.place)
        every_token = gr.Checkbox(label="Every memory token (the baseline: nothing dropped)")
        gr.Markdown(server_settings(server.limits), elem_id="tempo-server-settings")
    return Inputs(upload, preview, question, run, closer, cancel, settings, every_token)


def result_panel() -> tuple[Outputs, Pickers]:
    """The run's outputs by name (status, timeline, chat, ...), and the hidden pickers that clicks on segments and
    on the chat's replies set."""
    status = gr.HTML(elem_id="tempo-status")
    timeline = gr.Plot(timeline_figure(RunProgress()), show_label=False, elem_id="tempo-timeline")
    filmstrip = gr.HTML(elem_id="tempo-filmstrip")
    pickers = Pickers(gr.HTML(value={}, html_template="", js_on_load=PICKER_JS, elem_id="tempo-picker"),
                      gr.HTML(value={}, html_template="", js_on_load=TURN_PICKER_JS, elem_id="tempo-turn-picker"),
                      gr.HTML(value={}, html_template="", js_on_load=MOMENT_JS, elem_id="tempo-moment"),
                      gr.HTML(value={}, html_template="", js_on_load=CLIP_PICKER_JS, elem_id="tempo-clip-picker"))
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            # Every message is HTML this server made, with the visitor's and the model's text escaped (html.py),
            # so Gradio's sanitizer, which would strip the data-turn/data-seconds the page's script reads, is off.
            chat = gr.Chatbot(label="Conversation with this video", show_label=False, height=360,
                              elem_id="tempo-chat", sanitize_html=False,
                              buttons=["copy"], feedback_options=None, group_consecutive_messages=False,
                              placeholder="Ask a question: every answer stays here; click one to see its run again.")
            truth = gr.HTML(elem_id="tempo-truth")
        with gr.Column(scale=2):
            moments = gr.HTML(elem_id="tempo-moments")
            clip_file = gr.DownloadButton("Clip · MP4", visible=False, size="sm", variant="primary",
                                          elem_id="tempo-clip")
            stats = gr.HTML(elem_id="tempo-stats")
            with gr.Row():
                json_file = gr.DownloadButton("Turns · JSON", visible=False, size="sm")
                csv_file = gr.DownloadButton("Segments · CSV", visible=False, size="sm")
                report_file = gr.DownloadButton("Report · HTML", visible=False, size="sm")
                highlights_file = gr.DownloadButton("Highlights · PNG", visible=False, size="sm",
                                                    elem_id="tempo-highlights")
    outputs = dict(status=status, timeline=timeline, chat=chat, stats=stats, json_file=json_file,
                   csv_file=csv_file, report_file=report_file, filmstrip=filmstrip, truth=truth, moments=moments,
                   clip_file=clip_file, highlights_file=highlights_file)
    return outputs, pickers


@dataclass
class Pickers:
    """Hidden values the page's script sets: a segment picked on the timeline or filmstrip, a turn in the chat, the
    moment last sought (what "Look closer" looks at), and the shown turn's moment whose clip is asked for."""

    segment: gr.HTML
    turn: gr.HTML
    moment: gr.HTML
    clip: gr.HTML


@dataclass
class Tabs:
    """The analysis tabs: each tab's outputs by name, and its controls."""

    tabs: gr.Tabs
    segment: Outputs
    compare: Outputs
    others: Outputs
    compare_button: gr.Button
    sweep: Outputs
    sweep_button: gr.Button


def analysis_tabs(server: Server) -> Tabs:
    with gr.Tabs(elem_id="tempo-analysis") as tabs:
        with gr.Tab("Segment", id="segment"):
            gr.Markdown("Click a segment on the timeline or the filmstrip to see every frame it sampled.")
            segment = dict(card=gr.HTML(elem_id="tempo-segment"),
                           frames=gr.Gallery(show_label=False, columns=8, object_fit="contain", height=200,
                                             format="jpeg", elem_id="tempo-segment-frames"))
        with gr.Tab("Compare", id="compare"):
            gr.Markdown("Another allocation of the same compression, beside this one (nothing is compressed again).")
            with gr.Row():
                others = other_controls(server.model.spec)
            compare_button = gr.Button("Compare", elem_id="tempo-compare-button")
            summary = gr.HTML(elem_id="tempo-compare-summary")
            with gr.Row(equal_height=False):
                with gr.Column():
                    first_plot = gr.Plot(show_label=False, elem_id="tempo-compare-first")
                    first_answer = gr.Textbox(label="This run", interactive=False, lines=2,
                                              elem_id="tempo-compare-first-answer")
                with gr.Column():
                    second_plot = gr.Plot(show_label=False, elem_id="tempo-compare-second")
                    second_answer = gr.Textbox(label="The other", interactive=False, lines=2,
                                               elem_id="tempo-compare-second-answer")
            changes = gr.Plot(show_label=False, elem_id="tempo-compare-changes")
            compare = dict(first_plot=first_plot, first_answer=first_answer, second_plot=second_plot,
                           second_answer=second_answer, changes=changes, summary=summary)
        with gr.Tab("Budget sweep", id="sweep"):
            gr.Markdown("The same compression allocated at budgets from one token per segment to every memory token, "
                        "and the answer at each.")
            sweep_button = gr.Button("Run the sweep", elem_id="tempo-sweep-button")
            sweep = dict(plot=gr.Plot(show_label=False, elem_id="tempo-sweep"),
                         answers=gr.Dataframe(headers=["budget", "tokens used", "answer", "verdict"], interactive=False,
                                              wrap=True, column_widths=["18%", "14%", "48%", "20%"],
                                              elem_id="tempo-sweep-answers"))
        with gr.Tab("Live", id="live"):
            live_layout.live_tab(server)
    segment["tabs"] = tabs
    return Tabs(tabs, segment, compare, others, compare_button, sweep, sweep_button)


def connect(handler: Callable, server: Server, outputs: Outputs | None = None) -> Callable:
    """`handler` with its server filled in, as Gradio calls it: its named updates become values in the order of
    `outputs` (what it leaves out stays as it is; a name `outputs` lacks is refused). Name, docstring and signature
    are kept for the API page."""
    bound = functools.partial(handler, server)

    def ordered(updates: Any) -> Any:  # the handler's named updates (a mapping) when `outputs` is given
        if outputs is None:
            return updates
        unknown = set(updates) - set(outputs)
        if unknown:  # a misspelt or unwired name would otherwise vanish without a trace
            raise KeyError(f"{handler.__name__} updates {sorted(unknown)}, which this event does not output "
                           f"(it outputs {list(outputs)})")
        values = [updates.get(name, gr.skip()) for name in outputs]
        return values[0] if len(values) == 1 else values

    if inspect.isgeneratorfunction(inspect.unwrap(handler)):
        def fn(*args: Any, **kwargs: Any) -> Any:
            for updates in bound(*args, **kwargs):
                yield ordered(updates)
    else:
        def fn(*args: Any, **kwargs: Any) -> Any:
            return ordered(bound(*args, **kwargs))
    fn.__name__, fn.__doc__, fn.__signature__ = handler.__name__, handler.__doc__, inspect.signature(bound)  # type: ignore[attr-defined]  # typeshed: functions lack __signature__
    return fn


def wire(server: Server, inputs: Inputs, outputs: Outputs, pickers: Pickers, tabs: Tabs) -> None:
    """The page's events. Handlers get the raw request values (preprocess=False) and check them themselves: which
    file may be opened, and settings named in the messages."""
    video = [inputs.upload, inputs.question]
    # /analyze's parameters: the settings up to the time range, every_token, then the time range and what came
    # after it (each added later, so that calls naming the earlier ones by position keep working).
    names = list(inputs.settings)
    first_ranged = next((i for i, name in enumerate(names) if setting_named(name).clock), len(names))
    run_settings = ({name: inputs.settings[name] for name in names[:first_ranged]}
                    | {"every_token": inputs.every_token}
                    | {name: inputs.settings[name] for name in names[first_ranged:]})
    private: dict[str, Any] = dict(api_visibility="private", preprocess=False)
    fresh = {"preview": inputs.preview, "chat": outputs["chat"], "conversation": outputs["conversation"]}
    inputs.upload.change(connect(handlers.show_preview, server, fresh), inputs.upload, list(fresh.values()),
                         concurrency_id="preview", concurrency_limit=2, show_progress="minimal", **private)
    strategy = {"strategy": inputs.settings["strategy"]}
    inputs.every_token.change(connect(handlers.strategy_choice, server, strategy), inputs.every_token,
                                 list(strategy.values()), api_visibility="private", queue=False)
    asked = gr.on([inputs.run.click, inputs.question.submit], not_a_tool(connect(handlers.analyze, server, outputs)),
                  inputs=video, inputs_kwargs=run_settings | {"conversation": outputs["conversation"]},
                  outputs=list(outputs.values()), api_name="analyze", concurrency_id="model", show_progress="hidden",
                  preprocess=False)
    closer = inputs.closer.click(connect(handlers.look_closer, server, outputs), [*video, pickers.moment],
                                 inputs_kwargs=run_settings | {"conversation": outputs["conversation"]},  # type: ignore[arg-type]  # gradio's dict is invariant
                                 outputs=list(outputs.values()), concurrency_id="model", show_progress="hidden",
                                 **private)
    inputs.cancel.click(connect(handlers.cancelled, server, {"status": outputs["status"]}), None, outputs["status"],
                        cancels=[asked, closer], api_visibility="private", queue=False)
    turn = {name: outputs[name] for name in ("timeline", "status", "chat", "conversation", "gallery", "stats",
                                             "filmstrip", "truth", "moments", "clip_file")}
    pickers.turn.change(connect(handlers.show_turn, server, turn), [outputs["conversation"], pickers.turn],
                        list(turn.values()), queue=False, **private)
    clip = {"clip_file": outputs["clip_file"]}
    pickers.clip.change(connect(handlers.clip_view, server, clip), [outputs["conversation"], pickers.clip],
                        list(clip.values()), concurrency_id="clip", concurrency_limit=2, show_progress="minimal",
                        **private)
    pickers.segment.change(connect(handlers.segment_view, server, tabs.segment), [*video, pickers.segment],
                           list(tabs.segment.values()), inputs_kwargs=run_settings, concurrency_id="model",  # type: ignore[arg-type]  # gradio's dict is invariant
                           **private)
    tabs.compare_button.click(connect(handlers.compare_view, server, tabs.compare), video,
                              list(tabs.compare.values()), inputs_kwargs=inputs.settings | tabs.others,  # type: ignore[arg-type]  # gradio's dict is invariant
                              concurrency_id="model", **private)
    tabs.sweep_button.click(connect(handlers.sweep_view, server, tabs.sweep), video, list(tabs.sweep.values()),
                            inputs_kwargs=inputs.settings, concurrency_id="model", **private)  # type: ignore[arg-type]  # gradio's dict is invariant


def api_endpoints(server: Server, inputs: Inputs, tabs: Tabs) -> None:
    """The API's own endpoints: the page's work as JSON (and files), on hidden components; documented for
    `gradio_client`, not MCP tools."""
    video = [inputs.upload, inputs.question]
    as_json, file = gr.JSON(visible=False), gr.File(visible=False)  # an endpoint's JSON, or its file
    segment = dict(facts=as_json, frames=gr.Gallery(visible=False))
    endpoints: list[tuple[Callable, str, Outputs, gr.components.Component | Outputs]] = [
                 (api.answer, "answer", inputs.settings, as_json),
                 (api.chat, "chat", inputs.settings | {"history": gr.JSON(visible=False)}, as_json),
                 (api.compare, "compare", inputs.settings | tabs.others, as_json),
                 (api.sweep, "sweep", inputs.settings, as_json),
                 (api.segment, "segment", inputs.settings | {"segment": gr.Number(visible=False, precision=0)},
                  segment),
                 (api.report, "report", inputs.settings, file),
                 (api.gallery, "gallery", inputs.settings, gr.File(visible=False))]
    for endpoint, name, settings, outputs in endpoints:
        named = outputs if isinstance(outputs, dict) else None
        gr.Button(visible=False).click(not_a_tool(connect(endpoint, server, named)), video,
                                       list(outputs.values()) if isinstance(outputs, dict) else outputs,
                                       inputs_kwargs=settings,  # type: ignore[arg-type]  # gradio's dict is invariant
                                       api_name=name, concurrency_id="model", preprocess=False)
    span: dict[str, gr.blocks.Block] = dict(start=gr.Textbox(visible=False), end=gr.Textbox(visible=False))
    gr.Button(visible=False).click(not_a_tool(connect(api.clip, server)), inputs.upload, gr.File(visible=False),
                                   inputs_kwargs=span, api_name="clip", concurrency_id="clip", concurrency_limit=2,
                                   preprocess=False)
    watching: dict[str, gr.blocks.Block] = dict(threshold=gr.Number(None, visible=False),
                                                minutes=gr.Number(None, visible=False))
    texts = [gr.Textbox(visible=False), gr.Textbox(visible=False)]  # the stream and the question, as text
    gr.Button(visible=False).click(not_a_tool(connect(live_api.watch, server)), texts, as_json, inputs_kwargs=watching,
                                   api_name="watch", concurrency_id="live", preprocess=False)


def not_a_tool(fn: Callable) -> Callable:
    """`fn` left off the MCP tool list while its endpoint stays on the API page. Gradio lists every documented
    endpoint as a tool unless its function is marked as another MCP kind (`gradio.mcp`'s resources and prompts
    carry the same mark); the tools are `tool_endpoints`' two, with a reason for each (README, "MCP")."""
    fn._mcp_type = "endpoint"  # type: ignore[attr-defined]  # a mark on the function that gradio.mcp reads
    return fn


def tool_endpoints(server: Server) -> None:
    """The agents' tools (`tools`), which MCP lists by their functions' names: plain values in, each component
    hidden, JSON text out. Registered before the other endpoints, so that `answer` is the tool's name (Gradio
    numbers a name used twice, and /answer's function has it too)."""
    text = dict(video=gr.Textbox(visible=False), question=gr.Textbox(visible=False))
    ranged: dict[str, gr.blocks.Block] = dict(start=gr.Textbox(visible=False), end=gr.Textbox(visible=False))
    budget: dict[str, gr.blocks.Block] = dict(budget=gr.Number(None, visible=False, precision=0))
    zoom: dict[str, gr.blocks.Block] = dict(zoom=gr.Textbox(visible=False))
    for tool, name, settings in [(tools.answer, "answer_tool", budget | ranged | zoom),
                                 (tools.locate, "locate", ranged)]:
        gr.Button(visible=False).click(connect(tool, server), list(text.values()), gr.Textbox(visible=False),
                                       inputs_kwargs=settings, api_name=name, concurrency_id="model",
                                       preprocess=False)
    waiting: dict[str, gr.blocks.Block] = dict(timeout=gr.Number(None, visible=False),
                                               threshold=gr.Number(None, visible=False))
    gr.Button(visible=False).click(connect(tools.wait_for, server), list(text.values()), gr.Textbox(visible=False),
                                   inputs_kwargs=waiting, api_name="wait_for", concurrency_id="live", preprocess=False)


def build_demo(model: TempoModel, limits: Limits | None = None) -> gr.Blocks:
    """The page around `model`; `limits` guard every request (default: from the environment, see `limits_from_env`)."""
    server = Server(model, limits or limits_from_env())
    with gr.Blocks(title="Tempo · long-video QA", analytics_enabled=False, delete_cache=(1800, 3600)) as demo:
        gr.HTML(header_html(model))
        with gr.Row(equal_height=False):
            with gr.Column(scale=2, min_width=340):
                inputs = input_panel(server)
            with gr.Column(scale=5):
                shown, pickers = result_panel()
                tabs = analysis_tabs(server)
                shown["gallery"] = gr.HTML(elem_id="tempo-gallery")
        shown["conversation"] = gr.State(None, time_to_live=3600)  # a session's turns, kept an hour after its last use
        tool_endpoints(server)
        wire(server, inputs, {name: shown[name] for name in ANALYZE_OUTPUTS}, pickers, tabs)
        api_endpoints(server, inputs, tabs)
    demo.unload(live_layout.unloaded(server))  # a closed page's watch stops, and what it kept is freed
    demo.temp_file_sets.append(server.handed)  # the videos tools were handed go when uploads go (delete_cache)
    return demo.queue(max_size=QUEUE_SIZE, default_concurrency_limit=server.device.concurrency)
