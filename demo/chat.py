"""A conversation with one video: each answered question is a turn that keeps its whole run, so that selecting the
turn shows its timeline, filmstrip and key frames again; the chat's messages are made from the turns."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import plotly.graph_objects as go

from tempo.events import Finished
from tempo.model.prompts import Exchange
from tempo.render.progress import RunProgress
from tempo.render.report import Asked, Truth, filmstrip_html
from tempo.render.timeline import timeline_figure

from .html import key_frames_html, looked_html, pending_html, question_html, turn_html

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
        return Exchange(self.question, self.result.answer)

    @property
    def question(self) -> str:
        return self.progress.question

    @property
    def result(self) -> Finished:
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
