"""How times and answers read, everywhere a person sees them (page, report, figures, terminal)."""

from __future__ import annotations

import re

from ..config import clock

NO_ANSWER = "(no answer: the model ended its reply before its first word)"


def span(start: float, end: float) -> str:
    """A stretch of video, e.g. 01:04–01:08."""
    return f"{clock(start)}–{clock(end)}"


def answer_text(answer: str) -> str:
    """The answer as people see it: the model's text, or a note where it gave none (an empty box looks broken)."""
    return answer if answer.strip() else NO_ANSWER


# Times as answers say them: 2:03 or 1:02:03 (a clock), or 122.9 s / 45 seconds / 3 sec.
TIME_MENTION = re.compile(r"\b(?:(\d{1,2}):)?(\d{1,2}):(\d{2})(?:\.\d+)?\b|\b(\d+(?:\.\d+)?)\s*(?:s|secs?|seconds?)\b")


def time_mentions(text: str) -> list[tuple[int, int, float]]:
    """Every time `text` mentions, as (start, end, seconds into the video); `start:end` slices the mention."""
    found = []
    for match in TIME_MENTION.finditer(text):
        hours, minutes, secs, plain = match.groups()
        if plain is not None:
            seconds = float(plain)
        else:
            seconds = int(hours or 0) * 3600 + int(minutes) * 60 + int(secs)
        found.append((match.start(), match.end(), seconds))
    return found


def timings_text(timings: dict[str, float], alongside: tuple[str, ...] = ()) -> str:
    """Stage times as a sum that adds up to the total, then the stages that ran alongside (decoding workers),
    e.g. "vision 1.20 s + compress 0.80 s + other 0.10 s = 2.10 s · alongside: decode 1.50 s"."""
    serial = [f"{name} {seconds:.2f} s" for name, seconds in timings.items()
              if name not in alongside and name != "total"]
    text = " + ".join(serial) + f" = {timings.get('total', 0.0):.2f} s"
    beside = [f"{name} {timings[name]:.2f} s" for name in alongside if name in timings]
    return text + (" · alongside: " + ", ".join(beside) if beside else "")
