"""Times as people read and write them (`tempo.times`), each expected string or number worked out by hand."""

from __future__ import annotations

import pytest

from tempo.errors import InputError
from tempo.times import clock, clock_said, clock_seconds, length, quoted, span, time_mentions


@pytest.mark.parametrize("seconds, decimals, shown", [
    (0, 0, "00:00"), (59.4, 0, "00:59"), (59.6, 0, "01:00"), (3599, 0, "59:59"), (3600, 0, "1:00:00"),
    (3725, 0, "1:02:05"), (-3, 0, "00:00"), (65.2, 1, "01:05.2"), (5.04, 2, "00:05.04"), (3661.5, 1, "1:01:01.5"),
    (36000, 0, "10:00:00"), (600, 0, "10:00"),
])
def test_clock(seconds, decimals, shown):
    assert clock(seconds, decimals) == shown


def test_clock_said_span_and_length():
    assert (clock_said(65), clock_said(65.0), clock_said(65.5)) == ("01:05", "01:05", "01:05.5")
    assert span(64, 68) == "01:04–01:08"
    # hours from two hours, minutes from two minutes, else seconds
    assert [length(s) for s in (7200, 7199, 120, 119, 90.4)] == ["2.0 h", "120.0 min", "2.0 min", "119 s", "90 s"]
    assert length(720_000) == "200.0 h"  # 720000 / 3600


def test_quoted_cuts_long_values():
    assert quoted("abc") == "'abc'"
    assert quoted("x" * 38) == "'" + "x" * 38 + "'"  # 40 characters with its quotes: kept
    assert quoted("x" * 39) == "'" + "x" * 36 + "..."  # 41: cut to 37 and an ellipsis
    assert quoted(12) == "12"


@pytest.mark.parametrize("given, seconds", [
    (None, None), ("", None), ("  ", None), (12.5, 12.5), (90, 90), ("720", 720.0), ("12:00", 720.0),
    ("1:02:03", 3723.0), ("1:02:03.5", 3723.5), (" 2:05 ", 125.0), ("1:59.5", 119.5), ("0:00", 0.0),
    ("-5", -5.0), (" 1 :05", 65.0), ("10:00:00", 36000.0),
])
def test_clock_seconds(given, seconds):
    assert clock_seconds(given, "Start") == seconds


# "+1:05", "-1:30", "1_0:05" and "1:+2:03" are int()'s to read, not a clock's: every place but the seconds is digits
@pytest.mark.parametrize("given", ["1:2:3:4", "a:05", "1:60", "0:60", "1:-5", "abc", "1:x", ":05", "1.5:00", "+1:05",
                                   "-1:30", "1_0:05", "1:+2:03"])
def test_clock_seconds_refuses_what_is_no_time(given):
    with pytest.raises(InputError, match=r"^Start must be a time such as 12:00, 1:02:03 or 720 seconds \(got '"):
        clock_seconds(given, "Start")


def test_time_mentions():
    text = "at 2:03 and 1:02:03, then 122.9 s, 45 seconds, 3 sec, 2:03.5, 5s and x1:05"
    expected = [("2:03", 123), ("1:02:03", 3723), ("122.9 s", 122.9), ("45 seconds", 45.0), ("3 sec", 3.0),
                ("2:03.5", 123), ("5s", 5.0)]
    found = time_mentions(text)
    assert [text[start:end] for start, end, _ in found] == [said for said, _ in expected]
    assert [seconds for _, _, seconds in found] == [seconds for _, seconds in expected]
    assert all(start == text.index(said) for (start, _, _), (said, _) in zip(found, expected))
