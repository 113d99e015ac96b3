"""argparse types shared by bench's command lines: a bad number is refused at parse time, naming the flag.

nan and inf are never accepted: a nan timeout disables the timeout, a nan tolerance makes a check that
cannot fail.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least `minimum`, refused at parse time with the flag's name."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; use one >= {minimum}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {minimum}; use a whole number >= {minimum}")
        return value

    return parse


def finite_number(*, above: float | None = None, at_least: float | None = None) -> Callable[[str], float]:
    """An argparse type: a finite number (nan and inf would disable a timeout or a check) in range."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number; give one like 30")
        if above is not None and value <= above:
            raise argparse.ArgumentTypeError(f"{text} must be greater than {above:g}")
        if at_least is not None and value < at_least:
            raise argparse.ArgumentTypeError(f"{text} must be at least {at_least:g}")
        return value

    return parse


def positive_pattern(text: str) -> tuple[int, ...]:
    """Tokens per chunk, comma-separated whole numbers >= 1 (e.g. 1,3,2)."""
    try:
        pattern = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not comma-separated whole numbers, e.g. 1,3,2") from None
    if any(n < 1 for n in pattern):
        raise argparse.ArgumentTypeError(f"{text!r} has a chunk below 1 token; use whole numbers >= 1, e.g. 1,3,2")
    return pattern
