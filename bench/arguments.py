"""argparse types shared by bench's command lines: a bad number is refused at parse time, naming the flag.

nan and inf are never accepted: a nan timeout disables the timeout, a nan tolerance makes a check that
cannot fail.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def whole_number(minimum: int, maximum: int | None = None, why: str = "") -> Callable[[str], int]:
    """An argparse type: an integer of at least `minimum` (and at most `maximum`, for the reason `why`), refused at
    parse time with the flag's name."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; use one >= {minimum}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {minimum}; use a whole number >= {minimum}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"{value} is above {maximum} ({why}); use at most {maximum}")
        return value

    return parse


def number_list(kind: type[int] | type[float], *, at_most: float, why: str) -> Callable[[str], list]:
    """An argparse type: comma-separated finite numbers above 0 and at most `at_most` (for the reason `why`),
    sorted without repeats; refused at parse time, so a sweep never fails after hours of its grid."""
    example = "1,2,4" if kind is int else "0.5,1,2"

    def parse(text: str) -> list:
        parts = [x.strip() for x in text.split(",") if x.strip()]
        try:
            values = [kind(x) for x in parts]
        except ValueError:
            what = "whole numbers" if kind is int else "numbers"
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a comma-separated list of {what}; give one like {example}"
            ) from None
        if not values:
            raise argparse.ArgumentTypeError(f"{text!r} holds no number; give a list like {example}")
        for value in values:
            if not math.isfinite(value) or value <= 0:
                raise argparse.ArgumentTypeError(
                    f"{text!r} holds {value!r}; every value must be a finite number above 0, e.g. {example}"
                )
            if value > at_most:
                raise argparse.ArgumentTypeError(f"{text!r} holds {value:g}, above {at_most:g} ({why}); use less")
        return sorted(set(values))

    return parse


def number_list_or_none(kind: type[int] | type[float], *, at_most: float, why: str) -> Callable[[str], list]:
    """number_list, or `none` for an empty list (e.g. --rates none: no rate grid)."""
    numbers = number_list(kind, at_most=at_most, why=why)
    return lambda text: [] if text.strip() == "none" else numbers(text)


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
