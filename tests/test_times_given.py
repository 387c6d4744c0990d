"""Times a visitor or an agent sends (a clip's start and end on the page and the API, the From and To settings on
the CLI, the API and MCP) are parsed once, by `seconds_given`: to finite seconds from the video's start, or a
sentence that names what was wrong. Fuzzed: nothing else comes out."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tempo.errors import InputError
from tempo.settings import setting_named
from tempo.times import LATEST_S, seconds_given

LABEL = "The clip's end"


@pytest.mark.parametrize("value, seconds", [
    ("64", 64.0), (" 1:00 ", 60.0), ("1:02:03", 3723.0), ("12.5", 12.5), (7, 7.0), (0.25, 0.25), ("-0", 0.0),
    ("24:00:00", LATEST_S), (None, None), ("", None), ("  ", None)])
def test_times_people_write(value, seconds):
    assert seconds_given(value, LABEL) == seconds


@pytest.mark.parametrize("value", ["-0", "-0.0", -0.0])
def test_a_negative_zero_reads_as_zero(value):
    # -0.0 == 0.0, so the sign is asked for: a time shown from it would read "-0.0"
    assert str(seconds_given(value, LABEL)) == "0.0" and math.copysign(1.0, seconds_given(value, LABEL)) == 1.0


@pytest.mark.parametrize("value, says", [
    ("inf", "must be at most 24:00:00, a day into the video (got 'inf')"),
    ("1e309", "must be at most 24:00:00, a day into the video (got '1e309')"),
    ("1" * 1000, "must be at most 24:00:00, a day into the video (got '111111"),
    (float("inf"), "must be at most 24:00:00, a day into the video (got inf)"),
    pytest.param(10 ** 400, "must be at most 24:00:00", id="400 digits"),  # the CLI reads a long number as an int
    pytest.param(-(10 ** 400), "must be 0 or later", id="-400 digits"),
    ("9" * 1000 + ":00", "must be a time such as 12:00, 1:02:03 or 720 seconds (got '9999"),
    ("86400.5", "must be at most 24:00:00"),
    ("-5", "must be 0 or later: times count from the video's start (got '-5')"),
    (-0.5, "must be 0 or later"),
    ("nan", "must be a time such as 12:00, 1:02:03 or 720 seconds (got 'nan')"),
    (float("nan"), "must be a time such as 12:00, 1:02:03 or 720 seconds (got nan)"),
    (True, "must be a time such as"), ([1, 2], "must be a time such as"),
    ("1:75", "must be a time such as"), ("soon", "must be a time such as")])
def test_times_refused_with_a_sentence(value, says):
    with pytest.raises(InputError) as refused:
        seconds_given(value, LABEL)
    assert str(refused.value).startswith(f"{LABEL} {says}")


def test_the_from_and_to_settings_parse_the_same_way():
    """The CLI, the API and MCP hand From and To to the settings' check, which reads them with `seconds_given`."""
    with pytest.raises(InputError, match=r"^From must be at most 24:00:00, a day into the video \(got '1e309'\)"):
        setting_named("start").check("1e309")
    with pytest.raises(InputError, match=r"^To must be 0 or later"):
        setting_named("end").check("-3")
    assert setting_named("end").check("2:00") == 120.0


ANYTHING = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(-(10 ** 500), 10 ** 500),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=60),
    st.from_regex(r"\A-?[0-9]{0,400}(:[0-9]{0,400}){0,3}(\.[0-9]{0,5})?(e-?[0-9]{1,4})?\Z"),
    st.builds(lambda digits, tail: "9" * digits + tail, st.integers(0, 1000), st.sampled_from(["", ":00", ":00:00"])),
    st.lists(st.integers(), max_size=2))


@settings(max_examples=400, deadline=None)
@given(ANYTHING)
def test_any_value_is_seconds_or_a_sentence(value):
    try:
        seconds = seconds_given(value, LABEL)
    except InputError as refused:
        assert str(refused).startswith(LABEL + " must be ") and str(refused).endswith(").")
        return
    assert seconds is None or (isinstance(seconds, float) and math.isfinite(seconds) and 0 <= seconds <= LATEST_S)
