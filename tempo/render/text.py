"""How times and answers read, everywhere a person sees them (page, report, figures, terminal)."""

from __future__ import annotations

NO_ANSWER = "(no answer: the model ended its reply before its first word)"


def clock(seconds: float, decimals: int = 0) -> str:
    """Video time as mm:ss, or h:mm:ss past the hour; `decimals` adds fractions of a second (mm:ss.s)."""
    total = round(max(0.0, seconds), decimals)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{int(minutes):02d}:{secs:0{3 + decimals if decimals else 2}.{decimals}f}"
    return f"{int(hours)}:{text}" if hours else text


def span(start: float, end: float) -> str:
    """A stretch of video, e.g. 01:04–01:08."""
    return f"{clock(start)}–{clock(end)}"


def answer_text(answer: str) -> str:
    """The answer as people see it: the model's text, or a note where it gave none (an empty box looks broken)."""
    return answer if answer.strip() else NO_ANSWER
