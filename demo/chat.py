"""A conversation with one video: each answered question is a turn that keeps its whole run, so that selecting the
turn shows its timeline, filmstrip and key frames again; the chat's messages are made from the turns."""

from __future__ import annotations

import html
from dataclasses import dataclass, replace
from functools import cached_property

import plotly.graph_objects as go

from tempo.events import Finished, Segment
from tempo.model.prompts import Exchange
from tempo.render.progress import RunProgress
from tempo.render.report import Asked, Truth, filmstrip_html
from tempo.render.text import answer_text
from tempo.render.timeline import timeline_figure
from tempo.times import clock, span

from .html import key_frames_html, looked_html, moments_html, pending_html, question_html, seekable

MAX_TURNS = 24  # a conversation keeps its latest turns (each holds its run's thumbnails)


@dataclass(frozen=True)
class Turn:
    """One question's finished run on the page, with how it was allocated and whether its compression was cached."""

    progress: RunProgress
    truth: Truth | None
    evidence: tuple[tuple[float, float], ...]
    label: str
    cached: bool
    remembers: bool = False  # the model reads earlier turns with a question

    @property
    def exchange(self) -> Exchange:
        """This turn as the decoder reads it in a later turn."""
        return Exchange(self.question, self.finished.answer)

    @property
    def question(self) -> str:
        return self.progress.question

    @property
    def finished(self) -> Finished:
        assert self.progress.finished is not None  # a turn is a finished run
        return self.progress.finished

    # What the page shows of a turn, made once: a turn is shown again on selection and after every later one.
    @cached_property
    def figure(self) -> go.Figure:
        return timeline_figure(self.progress, self.evidence)

    @cached_property
    def asked(self) -> Asked:
        return Asked(self.progress, self.truth, self.figure)

    @cached_property
    def filmstrip(self) -> str:
        allocation = self.progress.allocation
        assert allocation is not None  # a finished run was allocated
        return filmstrip_html(self.progress.segments, allocation.k_min, allocation.k_max)

    @cached_property
    def key_frames(self) -> str:
        return key_frames_html(self.progress.segments)

    @cached_property
    def looked(self) -> str:
        return looked_html(self.progress.segments)

    @cached_property
    def moments(self) -> str:
        return moments_html(self.finished.moments)

    @property
    def highlight_segments(self) -> list[Segment]:
        """The segments its moments span: a zoomed run's whole-video pass as well as its window's."""
        zoom = self.progress.zoom
        return (list(zoom.segments) if zoom else []) + self.progress.segments


@dataclass(frozen=True)
class Conversation:
    """The turns about one video, oldest first, and the one shown on the page."""

    video: str
    turns: tuple[Turn, ...] = ()
    selected: int | None = None

    def with_turn(self, turn: Turn) -> Conversation:
        """With `turn` added (the oldest dropped past MAX_TURNS) and selected."""
        turns = (self.turns + (turn,))[-MAX_TURNS:]
        return replace(self, turns=turns, selected=len(turns) - 1)

    def selecting(self, index: int) -> Conversation:
        """With turn `index` shown on the page."""
        return replace(self, selected=index)


def history(conversation: Conversation | None) -> tuple[Exchange, ...]:
    """The conversation's turns, oldest first, as a next question's earlier turns."""
    return tuple(turn.exchange for turn in conversation.turns) if conversation is not None else ()


def continued(conversation: object, video: str) -> Conversation:
    """The conversation about `video`: the one going on, or a new one (another video starts afresh)."""
    if isinstance(conversation, Conversation) and conversation.video == video:
        return conversation
    return Conversation(video)


def messages(conversation: Conversation | None, asking: str | None = None, partial: str = "") -> list[dict]:
    """The chat's messages: every turn (the selected one marked), then the question being answered, if any."""
    shown = []
    if conversation is not None:
        for index, turn in enumerate(conversation.turns):
            shown += [{"role": "user", "content": question_html(turn.question)},
                      {"role": "assistant", "content": turn_html(index, turn, index == conversation.selected)}]
    if asking is not None:
        shown += [{"role": "user", "content": question_html(asking)},
                  {"role": "assistant", "content": pending_html(partial)}]
    return shown


def turn_html(index: int, turn: Turn, selected: bool) -> str:
    """A turn's reply in the chat: the answer with clickable times, where the compressor looked, how it was
    allocated, and for an example whether it is right. `data-turn` lets a click show the turn's run again."""
    finished = turn.finished
    verdict = ""
    if turn.truth is not None:
        mark = "right" if turn.truth.correct else "wrong"
        verdict = (f"<div class='tempo-verdict {mark}'>{'✓' if turn.truth.correct else '✗'} expected "
                   f"{seekable(turn.truth.expected)}</div>")
    meta = (f"{html.escape(turn.label)} · {finished.tokens_used:,} tokens · {finished.timings.get('total', 0.0):.1f} s"
            + (" · compression from the cache" if turn.cached else "") + memory_text(finished, turn.remembers)
            + (f" · over {span(*finished.video.window)} of {clock(finished.video.duration)}" if finished.video.window
               else "") + (f" · zoomed in, as {finished.zoom.reason}" if finished.zoom else ""))
    return (f"<div class='tempo-turn{' selected' if selected else ''}' data-turn='{index}'>"
            f"<div class='tempo-reply'>{seekable(answer_text(finished.answer), finished.video.duration)}</div>{verdict}"
            f"{turn.looked}<div class='tempo-meta'>{meta}</div></div>")


def memory_text(finished: Finished, remembers: bool) -> str:
    """What of the conversation the model read with this question (nothing to say for a model that reads none)."""
    if not remembers or not (finished.history_used or finished.history_dropped):
        return ""
    text = f" · read with {finished.history_used} earlier turn{'s' * (finished.history_used != 1)}"
    return text + (f" ({finished.history_dropped} older left out)" if finished.history_dropped else "")
