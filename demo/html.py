"""The page's HTML pieces: header, status line, stats cards, a segment's card, a comparison's summary, the
expected answer of an example, and the script that turns clicks on segments into picks. Pure functions of the
run's data; `layout` places them (styles: app.css)."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path

from tempo.allocation import scaled_relevance
from tempo.analysis import SegmentFrames, most_relevant
from tempo.events import Finished, Segment
from tempo.model import TempoModel
from tempo.moments import Moment, shown
from tempo.render.points import point_field, relevance_text
from tempo.render.progress import RunProgress, Status, headlines, key_segments
from tempo.render.report import Truth, data_uri
from tempo.render.text import answer_text, timings_text
from tempo.times import clock, span, time_mentions

LOOKED_AT = 3  # segments shown as where the compressor looked
LOOK_EDGE = 96  # their thumbnails' long edge
KEY_FRAME_EDGE = 240

# Clicks on a filmstrip thumbnail or on the timeline pick a segment: the picker's value becomes
# {"segment": i, "click": n} (a new value each click, so the same segment twice is two changes). Anything with a
# `data-seconds` (filmstrip cells, key frames, times in the chat, moments) and timeline points move the preview player
# there; a moment (`data-end` too) plays, and pauses at its end.
PICKER_JS = (f"const SEGMENT = {point_field('segment')}, START = {point_field('start')};"  # as PointData has them
             """
let clicks = 0;
const pick = (index) => { if (Number.isInteger(index) && index >= 0) props.value = {segment: index, click: ++clicks}; };
let until = null;  // where a playing moment ends
const seek = (seconds, end) => {
  const video = document.querySelector('#tempo-preview video');
  until = Number.isFinite(end) ? end : null;
  if (video && Number.isFinite(seconds)) {
    video.currentTime = seconds;
    if (until !== null) video.play().catch(() => {});
  }
  if (window.tempoMoment) window.tempoMoment(seconds);  // the moment "Look closer" looks at
};
document.addEventListener('timeupdate', (event) => {  // media events do not bubble: caught on the way down
  const video = event.target;
  if (until !== null && video.closest && video.closest('#tempo-preview') && video.currentTime >= until) {
    until = null;
    video.pause();
  }
}, true);
document.addEventListener('click', (event) => {
  const timed = event.target.closest('[data-seconds]');
  if (timed) { event.preventDefault(); seek(Number(timed.dataset.seconds), Number(timed.dataset.end)); }
  const cell = event.target.closest('#tempo-filmstrip [data-segment]');
  if (cell) pick(Number(cell.dataset.segment));
});
const bound = new WeakSet();
const bind = () => document.querySelectorAll('#tempo-timeline .js-plotly-plot').forEach((plot) => {
  if (bound.has(plot) || typeof plot.on !== 'function') return;
  bound.add(plot);
  plot.on('plotly_click', (data) => {
    const point = data.points && data.points[0];
    if (point && point.customdata) { seek(Number(point.customdata[START])); pick(Number(point.customdata[SEGMENT])); }
  });
});
new MutationObserver(bind).observe(document.body, {childList: true, subtree: true});
bind();
""")

# The moment last sought (any time, thumbnail or timeline point clicked): {"seconds": s, "click": n}, read by
# "Look closer" when it is pressed.
MOMENT_JS = """
let clicks = 0;
window.tempoMoment = (seconds) => {
  if (Number.isFinite(seconds)) props.value = {seconds: seconds, click: ++clicks};
};
"""

# A click on one of the shown turn's moments asks for its clip: {"moment": i (0 = the best), "click": n}.
CLIP_PICKER_JS = """
let clicks = 0;
document.addEventListener('click', (event) => {
  const moment = event.target.closest('#tempo-moments [data-moment]');
  if (moment) props.value = {moment: Number(moment.dataset.moment), click: ++clicks};
});
"""

# A click on a reply in the chat shows that turn's run again: {"turn": i, "click": n}.
TURN_PICKER_JS = """
let clicks = 0;
document.addEventListener('click', (event) => {
  const turn = event.target.closest('#tempo-chat [data-turn]');
  if (turn) props.value = {turn: Number(turn.dataset.turn), click: ++clicks};
});
"""


def header_html(model: TempoModel) -> str:
    spec = model.spec
    note = ""
    if spec.trained_world == "synthetic":
        millions = sum(p.numel() for p in model.parameters()) / 1e6
        note = (f"<p class='note'>This demo runs <b>Tempo-Tiny</b>, a {millions:.1f}M-parameter Tempo that only knows "
                "its synthetic world of moving shapes: try the examples. On your own videos it runs, but its "
                "relevance and answers mean nothing; the real model is Tempo-6B on a GPU.</p>")
    if not spec.takes_history:
        note += ("<p class='note' id='tempo-no-history'>This model answers each question on its own: the chat keeps "
                 "your earlier turns, but they do not reach it.</p>")
    return ("<div class='tempo-header'><h1>Tempo <span>query-aware compression for long videos</span></h1>"
            "<p>A small VLM reads your video 8 frames at a time, packs each segment into memory tokens and scores "
            "how relevant it is to your question; Adaptive Token Allocation spends the token budget where the "
            "relevance is, and a language model answers from what was kept.</p>" + note +
            f"<p class='model'>{html.escape(Path(spec.name).name or spec.name)} · {model.device.type} · "
            f"k_max {spec.num_memory_tokens} memory tokens per segment · context {spec.context_length:,}</p></div>")


def status_html(progress: RunProgress, error: str | None = None) -> str:
    """One line saying what is happening, over a progress bar; an ETA while compressing."""
    if error:
        return f"<div class='tempo-status error'>⚠ {html.escape(error)}</div>"
    done, total = len(progress.segments), progress.num_segments
    if progress.status == Status.OPENING:
        text = "Opening the video…"
    elif progress.status == Status.READING:
        done = progress.read
        text = f"Reading the video · segment {done} of {total}, before the GPU is asked for"
    elif progress.status == Status.COMPRESSING and not done:
        probed = progress.probed
        assert probed is not None  # compressing: probed (Status)
        guess = (f"about {progress.estimate:.0f} s here" if progress.estimate is not None
                 else "the first run here measures how long videos take")
        text = (f"{total} segments ({probed.sampled_frames:,} frames over {clock(probed.duration)}) · {guess} · "
                "waiting for the first segment…")
    elif progress.status == Status.COMPRESSING and progress.from_cache:
        text = f"Asked before: the compression comes from the cache · segment {done} of {total}"
    elif progress.status == Status.COMPRESSING:
        reached = clock(progress.segments[-1].end if done else 0)
        eta = progress.eta()
        assert progress.probed is not None  # compressing: probed (Status)
        text = (f"Compressing segment {done} of {total} · {reached} of {clock(progress.probed.duration)}"
                + (f" · about {eta:.0f} s left" if eta is not None else ""))
    elif progress.status == Status.ANSWERING:
        assert progress.allocation is not None  # answering: allocated (Status)
        text = f"Allocated {progress.allocation.tokens_used:,} of {progress.allocation.budget:,} tokens · answering…"
    else:
        assert progress.finished is not None  # done: finished (Status)
        text = f"Done in {progress.finished.timings.get('total', 0.0):.1f} s" + (
            " · asked before, so the compression came from the cache" if progress.from_cache else "")
    if progress.zoom and progress.status != Status.DONE:
        text = f"Looking closer at {span(*progress.zoom.window)}, as {progress.zoom.reason} · {text}"
    width = 100 * done / total if total else 0
    return f"<div class='tempo-status'>{text}<div class='bar'><div style='width:{width:.1f}%'></div></div></div>"


def stats_html(finished: Finished, context_truncated: int) -> str:
    body = "".join(f"<div class='card'><div class='value'>{html.escape(row.value)}</div>"
                   f"<div class='label'>{html.escape(row.label)}</div></div>" for row in headlines(finished))
    body += f"<div class='timings'>{html.escape(timings_text(finished.timings, finished.alongside))}</div>"
    if context_truncated:
        body += (f"<div class='warning'>{context_truncated:,} visual positions were cut to fit the decoder context "
                 "(as in the released code); lower the budget or max frames to keep them all.</div>")
    return f"<div class='tempo-stats'>{body}</div>"


def truth_html(truth: Truth | None) -> str:
    """The expected answer of an example, and whether the model's matches."""
    if truth is None:
        return ""
    verdict, mark = ("right", "✓") if truth.correct else ("wrong", "✗")
    return (f"<div class='tempo-truth {verdict}'>{mark} Expected <b>{html.escape(truth.expected)}</b> · the answer is "
            f"{verdict}. The evidence is shaded green on the timeline.</div>")


def segment_html(look: SegmentFrames, k_max: int) -> str:
    """The inspector's card for one segment."""
    segment = look.segment
    facts = [("time", span(segment.start, segment.end)),
             (f"relevance, scaled as ATA reads it (raw relevance {segment.relevance:.3g})", f"{look.scaled:.2f}"),
             ("rank", f"{look.rank} of {look.num_segments} by relevance"),
             ("tokens kept", f"{segment.tokens} of {k_max}")]
    cells = "".join(f"<div class='card'><div class='value'>{html.escape(value)}</div>"
                    f"<div class='label'>{label}</div></div>" for label, value in facts)
    return (f"<div class='tempo-segment'><h3>Segment {segment.index + 1}</h3><div class='tempo-stats'>{cells}</div>"
            "</div>")


def comparison_html(before: Finished, after: Finished, labels: tuple[str, str], changed: Sequence[int],
                    truth: Truth | None = None, verdicts: tuple[str, str] = ("", "")) -> str:
    """How two allocations of one compression differ, in plain sentences: tokens spent, segments that changed,
    the two answers (with the expected one for an example), and the biggest changes."""
    differ = sum(a.tokens != b.tokens for a, b in zip(before.segments, after.segments))
    sentences = [
        f"<b>{html.escape(labels[0])}</b> spends {before.tokens_used:,} tokens; <b>{html.escape(labels[1])}</b> "
        f"spends {after.tokens_used:,}.",
        f"{differ} of {len(after.segments)} segments keep a different number of tokens." if differ else
        "Every segment keeps the same number of tokens.",
    ]
    answers = [f"“{html.escape(answer_text(r.answer))}”" + (f" ({v})" if v else "")
               for r, v in zip((before, after), verdicts)]
    if before.answer.strip() == after.answer.strip():
        sentences.append(f"Both answer {answers[0]}.")
    else:
        sentences.append(f"The first answers {answers[0]}; the other answers {answers[1]}.")
    if truth is not None:
        sentences.append(f"The expected answer is <b>{html.escape(truth.expected)}</b>.")
    items = "".join(
        f"<li>{span(after.segments[i].start, after.segments[i].end)}: {before.segments[i].tokens} → "
        f"{after.segments[i].tokens} tokens</li>" for i in changed)
    return (f"<div class='tempo-compare'><p>{' '.join(sentences)}</p>"
            + (f"<p>Changed most:</p><ul>{items}</ul>" if items else "") + "</div>")


def seek(seconds: float, text: str, kind: str = "tempo-seek") -> str:
    """A clickable time: the page moves the preview player to `seconds` (see PICKER_JS)."""
    return f"<a class='{kind}' data-seconds='{seconds:.2f}' title='Play from {clock(seconds)}'>{text}</a>"


def escaped(text: str) -> str:
    """Text as HTML that no markdown or markup in it can change (line breaks kept)."""
    return html.escape(text).replace("\n", "<br>")


def seekable(text: str, duration: float = math.inf) -> str:
    """`text` escaped, every time it mentions within the video's `duration` made clickable (a time past the end, as
    a model can answer, names no moment: it stays text, as the timeline leaves it out)."""
    out, last = [], 0
    for start, end, seconds in time_mentions(text):
        if not 0 <= seconds <= duration:
            continue
        out += [escaped(text[last:start]), seek(seconds, escaped(text[start:end]))]
        last = end
    return "".join(out) + escaped(text[last:])


def question_html(question: str) -> str:
    """A visitor's question in the chat."""
    return f"<div class='tempo-question'>{escaped(question)}</div>"


def looked_html(segments: Sequence[Segment], count: int = LOOKED_AT) -> str:
    """Where the compressor looked: its most relevant segments, as clickable key frames (seeking to the frame's
    time) with their spans."""
    cells = []
    scaled = scaled_relevance([s.relevance for s in segments])
    for segment in most_relevant(segments, count):
        image = f"<img src='{data_uri(segment.frame, LOOK_EDGE)}' alt=''>" if segment.frame is not None else ""
        score = scaled[segments.index(segment)]
        cells.append(seek(segment.start if segment.frame_time is None else segment.frame_time,
                          f"{image}<span title='{html.escape(relevance_text(segment.relevance, score))}'>"
                          f"{span(segment.start, segment.end)} · {score:.2f}</span>", "tempo-seek tempo-look"))
    return ("<div class='tempo-looked'><div class='caption'>Where the compressor looked before the decoder answered "
            "(relevance scaled as ATA reads it: 1 = its most relevant segment):</div>" + "".join(cells)
            + "</div>") if cells else ""


def pending_html(partial: str) -> str:
    """The reply while it is being written."""
    return f"<div class='tempo-turn pending'><div class='tempo-reply'>{escaped(partial) or '…'}</div></div>"


def key_frames_html(segments: Sequence[Segment]) -> str:
    """The segments that kept the most tokens, as their key frames, each playing the preview from its time."""
    cells = [seek(seconds, f"<img src='{data_uri(s.frame, KEY_FRAME_EDGE)}' alt=''>"
                           f"<span>{clock(seconds)} · {s.tokens} tokens</span>", "tempo-seek tempo-key")
             for s in key_segments(segments) if s.frame is not None  # key segments have frames
             for seconds in [s.start if s.frame_time is None else s.frame_time]]
    return ("<div class='tempo-keys'><div class='caption'>Key frames: the segments that kept the most tokens</div>"
            f"<div class='row'>{''.join(cells)}</div></div>") if cells else ""


def moments_html(moments: Sequence[Moment]) -> str:
    """The shown turn's moments as `shown` picks them, best first: each a button that plays it in the preview (and
    asks for its clip), with its facts as `shown` words them and a bar of its score against the best one's."""
    rows = "".join(
        f"<button class='tempo-moment' data-moment='{i}' data-seconds='{s.moment.start:.2f}' "
        f"data-end='{s.moment.end:.2f}' title='Play {s.when} and make its clip'><b class='rank'>{s.rank}</b>"
        f"<span class='when'>{s.when}</span><span class='details'>{html.escape(' · '.join(s.details))}</span>"
        f"<span class='score'><i style='width:{100 * s.share:.0f}%'></i></span>"
        f"<span class='value'>{s.value}</span></button>" for i, s in enumerate(shown(moments)))
    if not rows:
        return ""
    return ("<div class='tempo-moments'><div class='caption'>Moments, best first: where the relevance stands out. "
            f"Click one to play it and make its clip.</div>{rows}</div>")
