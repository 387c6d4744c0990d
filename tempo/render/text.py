"""How answers and timings read, everywhere a person sees them (page, report, figures, terminal); times
read as `tempo.times` writes them."""

from __future__ import annotations

NO_ANSWER = "(no answer: the model ended its reply before its first word)"


def answer_text(answer: str) -> str:
    """The answer as people see it: the model's text, or a note where it gave none (an empty box looks broken)."""
    return answer if answer.strip() else NO_ANSWER


def timings_text(timings: dict[str, float], alongside: tuple[str, ...] = ()) -> str:
    """Timings as a sum that adds up to the total, then the parts that ran alongside (decoding workers),
    e.g. "vision 1.20 s + compress 0.80 s + other 0.10 s = 2.10 s · alongside: decode 1.50 s"."""
    serial = [f"{name} {seconds:.2f} s" for name, seconds in timings.items()
              if name not in alongside and name != "total"]
    text = " + ".join(serial) + f" = {timings.get('total', 0.0):.2f} s"
    beside = [f"{name} {timings[name]:.2f} s" for name in alongside if name in timings]
    return text + (" · alongside: " + ", ".join(beside) if beside else "")
