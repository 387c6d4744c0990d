"""The Live tab's controls and outputs, its script and styles, and its events wired to the handlers in `live`."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import gradio as gr

from .live import (
    Updates,
    ask_now,
    camera_check,
    camera_frame,
    kind_changed,
    replay_at,
    set_threshold,
    start_watch,
    stop_watch,
)
from .live_api import synthetic_allowed, watches_of
from .live_sources import NOT_ON_ZEROGPU, config_of, synthetic_source, zerogpu_live_cost
from .live_view import live_figure
from .refusals import refusal
from .server import Server

CAMERA_EVERY_S = 0.5  # the browser sends a frame this often: the 2 fps the compressor samples
SYNTHETIC_SEED = 800_011  # the page's synthetic world: its first event (a purple diamond) comes at 0:24
KINDS = {"camera": "Camera", "url": "Stream URL", "file": "A file, played as live",
         "synthetic": "Synthetic world (never ends)"}

# A click on anything with `data-live-seconds` (an alert, a time in an answer, a key frame) asks for the replay
# from there: {"seconds": s, "click": n}. New alerts become browser notifications once the visitor allows them.
LIVE_JS = """
let clicks = 0;
document.addEventListener('click', (event) => {
  const timed = event.target.closest('[data-live-seconds]');
  if (timed) { event.preventDefault(); props.value = {seconds: Number(timed.dataset.liveSeconds), click: ++clicks}; }
});
const told = new Set();
new MutationObserver(() => {
  document.querySelectorAll('#tempo-live-chat .tempo-live-alert').forEach((alert) => {
    const key = alert.dataset.liveSeconds;
    if (told.has(key)) return;
    told.add(key);
    if (window.tempoLiveNotify && 'Notification' in window && Notification.permission === 'granted')
      new Notification('Tempo live: an alert', {body: alert.innerText.split('\\n')[0]});
  });
}).observe(document.body, {childList: true, subtree: true});
"""
NOTIFY_JS = ("(on) => { window.tempoLiveNotify = on; if (on && 'Notification' in window) "
             "Notification.requestPermission(); return on; }")
LIVE_CSS = """
#tempo-live-film .tempo-live-film { display: flex; gap: 4px; overflow: hidden; justify-content: flex-end; }
#tempo-live-film a { flex: 0 0 auto; cursor: pointer; text-align: center; font-size: 0.7rem; }
#tempo-live-film img { display: block; height: 40px; border-radius: 3px; }
.tempo-live-alert { display: flex; gap: 10px; align-items: center; cursor: pointer; }
.tempo-live-alert img { height: 72px; border-radius: 4px; border: 2px solid #dc2626; }
.tempo-live-seek { cursor: pointer; text-decoration: underline dotted; }
"""


def live_tab(server: Server) -> dict[str, gr.components.Component]:
    """The Live tab's controls and outputs, wired (called inside its `gr.Tab`); on ZeroGPU, why there is none."""
    if server.device.remote:
        gr.Markdown(NOT_ON_ZEROGPU.format(minutes=zerogpu_live_cost()[1]), elem_id="tempo-live-off")
        return {}
    tiny = synthetic_allowed(server)
    gr.HTML(f"<style>{LIVE_CSS}</style>", padding=False)
    gr.Markdown("A standing question over a stream: every 8 frames (4 s at 2 fps) are compressed with it as they "
                "arrive, and a segment whose relevance rises clearly above the stream's recent level raises an alert."
                + (" Tempo-Tiny knows only its synthetic world of shapes: the synthetic stream shows live mode doing "
                   "what it can do here." if tiny else ""))
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=300):
            controls = source_controls(server, tiny)
        with gr.Column(scale=3):
            views = watch_views()
    return wire(server, controls, views)


def source_controls(server: Server, tiny: bool) -> dict[str, Any]:
    """The left column: the source and its input, the standing question, the alert threshold, start and stop."""
    kinds = [(label, kind) for kind, label in KINDS.items() if kind != "synthetic" or tiny]
    kind = gr.Radio(kinds, value="synthetic" if tiny else "camera", label="Source", elem_id="tempo-live-kind")
    cam = gr.Image(sources=["webcam"], streaming=True, type="numpy", label="Camera", visible=not tiny,
                   webcam_options=gr.WebcamOptions(mirror=False), height=220, elem_id="tempo-live-camera")
    url = gr.Textbox(label="Stream URL", placeholder="https://…/live.m3u8, rtsp://…, or an endless http video",
                     visible=False, max_lines=1, elem_id="tempo-live-url")
    upload = gr.File(label="Video, played as if live", file_types=["video"], visible=False, height=100,
                     elem_id="tempo-live-file")
    seed = gr.Number(SYNTHETIC_SEED, precision=0, label="World seed (800,000-899,999: never trained on)",
                     visible=tiny, elem_id="tempo-live-seed")
    question = gr.Textbox(label="Standing question", lines=2, elem_id="tempo-live-question",
                          max_length=server.limits.max_question_chars,
                          value=synthetic_source(SYNTHETIC_SEED).suggestion if tiny else "",
                          placeholder="e.g. Tell me when the delivery van arrives")
    threshold = gr.Slider(0.5, 12, value=config_of(server.limits).rule.rise, step=0.5, label="Alert threshold",
                          info="how far a segment's relevance must rise above the stream's recent level "
                               "(log-odds); it applies from the next segment", elem_id="tempo-live-threshold")
    notify = gr.Checkbox(label="Also as a browser notification", elem_id="tempo-live-notify")
    with gr.Row():
        start = gr.Button("Start watching", variant="primary", elem_id="tempo-live-start")
        stop = gr.Button("Stop", variant="stop", elem_id="tempo-live-stop")
    return dict(kind=kind, cam=cam, url=url, upload=upload, seed=seed, question=question, threshold=threshold,
                notify=notify, start=start, stop=stop)


def watch_views() -> dict[str, Any]:
    """The right column: the watch's status, timeline, filmstrip and conversation, "Ask now", the replay."""
    status = gr.HTML(elem_id="tempo-live-status")
    timeline = gr.Plot(live_figure([]), show_label=False, elem_id="tempo-live-timeline")
    film = gr.HTML(elem_id="tempo-live-film")
    chat = gr.Chatbot(label="Alerts and answers", show_label=False, height=300, elem_id="tempo-live-chat",
                      sanitize_html=False, feedback_options=None, group_consecutive_messages=False,
                      placeholder="Alerts appear here with their moment; so do answers to Ask now.")
    with gr.Row():
        ask = gr.Textbox(label="Ask now", scale=4, max_lines=1, elem_id="tempo-live-ask",
                         placeholder="a question about the last minutes, answered over the window")
        ask_button = gr.Button("Ask now", scale=1, elem_id="tempo-live-ask-button")
    replay = gr.Video(label="Replay", interactive=False, autoplay=True, height=220, elem_id="tempo-live-replay")
    picker = gr.HTML(value={}, html_template="", js_on_load=LIVE_JS, elem_id="tempo-live-picker")
    timer = gr.Timer(2.0, active=False)
    return dict(status=status, timeline=timeline, film=film, chat=chat, ask=ask, ask_button=ask_button,
                replay=replay, picker=picker, timer=timer)


def wire(server: Server, controls: dict[str, Any], views: dict[str, Any]) -> dict[str, gr.components.Component]:
    """The tab's events, each handler given the outputs it names; returns what a watch updates."""
    c, v = controls, views
    watching = {name: v[name] for name in ("status", "timeline", "film", "chat", "timer")}
    limit = server.limits.live_watches
    source = dict(cam=c["cam"], url=c["url"], upload=c["upload"], seed=c["seed"], question=c["question"])
    c["kind"].change(named(kind_changed, server, source), [c["kind"], c["seed"]], list(source.values()), queue=False,
                     api_visibility="private")
    started = c["start"].click(named(start_watch, server, watching),
                               [c[name] for name in ("kind", "url", "upload", "seed", "question", "threshold")],
                               list(watching.values()), concurrency_id="live", concurrency_limit=limit,
                               show_progress="hidden", api_visibility="private")
    c["cam"].stream(named(camera_frame, server, watching), [c["cam"], c["question"], c["threshold"]],
                    list(watching.values()), stream_every=CAMERA_EVERY_S, concurrency_id="live-camera",
                    concurrency_limit=limit, show_progress="hidden", api_visibility="private")
    v["timer"].tick(named(camera_check, server, watching), None, list(watching.values()), show_progress="hidden",
                    api_visibility="private")
    c["stop"].click(named(stop_watch, server, dict(status=v["status"], timer=v["timer"])), None,
                    [v["status"], v["timer"]], cancels=[started], queue=False, api_visibility="private")
    c["threshold"].change(named(set_threshold, server, {}), c["threshold"], None, queue=False,
                          api_visibility="private")
    c["notify"].change(None, c["notify"], None, js=NOTIFY_JS, queue=False, api_visibility="private")
    gr.on([v["ask_button"].click, v["ask"].submit], named(ask_now, server, dict(chat=v["chat"], ask=v["ask"])),
          v["ask"], [v["chat"], v["ask"]], concurrency_id="model", show_progress="hidden", api_visibility="private")
    v["picker"].change(named(replay_at, server, dict(replay=v["replay"])), v["picker"], v["replay"],
                       concurrency_id="live-replay", concurrency_limit=2, api_visibility="private")
    return watching


def named(handler: Callable, server: Server, outputs: dict) -> Callable:
    """`handler` as Gradio calls it: the server and the visitor's session filled in, its named updates in the order
    of `outputs` (what it leaves out stays as it is), refusals as the visitor's message."""
    names = list(outputs)

    def ordered(updates: Updates) -> object:
        values = [updates.get(name, gr.skip()) for name in names]
        return values[0] if len(values) == 1 else values if values else None

    if inspect.isgeneratorfunction(handler):
        def fn(*args: Any) -> Any:
            *values, request = args
            try:
                for updates in handler(server, *values, owner=owner_of(request)):
                    yield ordered(updates)
            except Exception as exc:
                raise refusal(exc) from None
    else:
        def fn(*args: Any) -> Any:
            *values, request = args
            try:
                return ordered(handler(server, *values, owner=owner_of(request)))
            except Exception as exc:
                raise refusal(exc) from None
    # Gradio passes the request where the signature names a gr.Request: after the event's inputs.
    inputs = [p for p in list(inspect.signature(handler).parameters.values())[1:] if p.kind == p.POSITIONAL_OR_KEYWORD]
    signature = inspect.Signature([p.replace(annotation=inspect.Parameter.empty) for p in inputs] + [
        inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=gr.Request)])
    fn.__signature__ = signature  # type: ignore[attr-defined]
    fn.__name__, fn.__doc__, fn.__annotations__ = handler.__name__, handler.__doc__, {"request": gr.Request}
    return fn


def owner_of(request: gr.Request | None) -> str:
    return "page-" + str(getattr(request, "session_hash", None) or "anonymous")


def unloaded(server: Server) -> Callable:
    """What a closed page frees: its watch, and everything it kept."""
    def close(request: gr.Request) -> None:
        watches = watches_of(server)
        watches.close(owner_of(request))
        watches.resume(owner_of(request))
    return close
