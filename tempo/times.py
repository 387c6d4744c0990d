"""Times in a video as people read and write them: one format everywhere (page, report, figures, terminal,
messages), and the two ways times come back in: typed as a setting, and named in an answer."""

from __future__ import annotations

import math
import re

from .errors import InputError

LATEST_S = 24 * 3600.0  # the latest time anyone may name in a video: a day
TIME_EXAMPLE = "a time such as 12:00, 1:02:03 or 720 seconds"


def clock(seconds: float, decimals: int = 0) -> str:
    """Video time as mm:ss, or h:mm:ss past the hour; `decimals` adds fractions of a second (mm:ss.s)."""
    total = round(max(0.0, seconds), decimals)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{int(minutes):02d}:{secs:0{3 + decimals if decimals else 2}.{decimals}f}"
    return f"{int(hours)}:{text}" if hours else text


def clock_said(seconds: float) -> str:
    """A time in a message, as the time settings take it: mm:ss, with tenths where it has them."""
    return clock(seconds, 0 if float(seconds).is_integer() else 1)


def span(start: float, end: float) -> str:
    """A stretch of video, e.g. 01:04–01:08."""
    return f"{clock(start)}–{clock(end)}"


def length(seconds: float) -> str:
    """A video length for messages: hours, minutes or seconds, whichever reads naturally."""
    if seconds >= 7200:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.0f} s"


def quoted(value: object) -> str:
    """A value someone gave, quoted in a message (cut short when long)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def clock_seconds(value: object, label: str) -> object:
    """A time as given (seconds, "m:ss" or "h:mm:ss"; None or "" for none) in seconds; anything else as it came,
    for the range check to explain, or an InputError for text that is no time."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        return value
    parts = value.strip().split(":")
    try:
        if len(parts) > 3 or (len(parts) > 1 and any(not p.strip().isdigit() for p in parts[:-1])):
            raise ValueError
        seconds = float(parts[-1])
        if len(parts) > 1 and not 0 <= seconds < 60:
            raise ValueError
        for place, part in enumerate(reversed(parts[:-1])):
            seconds += int(part) * 60 ** (place + 1)
    except (ValueError, OverflowError):  # OverflowError: hours or minutes with hundreds of digits
        raise InputError(f"{label} must be {TIME_EXAMPLE} (got {quoted(value)}).") from None
    return seconds


def seconds_given(value: object, label: str) -> float | None:
    """A time a visitor or an agent sent (seconds, "m:ss" or "h:mm:ss"; None or "" for none), parsed once: seconds
    from the video's start, 0 to LATEST_S, or an InputError whose sentence names what was wrong."""
    seconds = clock_seconds(value, label)
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or (isinstance(seconds, float)
                                                                             and math.isnan(seconds)):
        raise InputError(f"{label} must be {TIME_EXAMPLE} (got {quoted(value)}).")
    if seconds < 0:
        raise InputError(f"{label} must be 0 or later: times count from the video's start (got {quoted(value)}).")
    if seconds > LATEST_S:  # infinity and numbers too long for a float land here too
        raise InputError(f"{label} must be at most {clock(LATEST_S)}, a day into the video (got {quoted(value)}).")
    return float(seconds) + 0.0  # -0.0 reads as 0


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
