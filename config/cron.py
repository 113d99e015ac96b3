"""The cron expressions KEDA's cron scaler accepts, parsed by its rules, so a bad one is a sentence at synth instead
of an error in the operator after deploy.

KEDA v2.20.2 (pkg/scalers/cron_scaler.go, cronMetadata.Validate) parses `start` and `end` with robfig/cron v3.0.1's
`cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)`: exactly five fields, no descriptors
(`@daily`), no seconds, and refuses start == end. What follows is that parser's grammar (parser.go v3.0.1: Parse,
normalizeFields, getField, getRange, parseIntOrName, mustParseInt; spec.go: the bounds and names), with its messages.
Its `TZ=`/`CRON_TZ=` prefix is refused here: the window's zone is WarmWindow.timezone.

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class _Bounds:
    name: str
    low: int
    high: int
    names: dict[str, int]


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
FIELDS = (
    _Bounds("minute", 0, 59, {}),
    _Bounds("hour", 0, 23, {}),
    _Bounds("day of month", 1, 31, {}),
    _Bounds("month", 1, 12, {m: i + 1 for i, m in enumerate(_MONTHS)}),
    _Bounds("day of week", 0, 6, {d: i for i, d in enumerate(_DAYS)}),
)


class CronError(ValueError):
    """robfig/cron's reason (its wording) for refusing an expression."""


def parse(spec: str) -> tuple[frozenset[int], ...]:
    """The minutes, hours, days of month, months and weekdays `spec` matches, or CronError with robfig's reason.

    Two expressions with equal results fire at the same times (KEDA compares the strings only)."""
    if not spec:
        raise CronError("empty spec string")
    if spec.startswith(("TZ=", "CRON_TZ=")):
        raise CronError("a TZ= prefix is not used here; set the window's timezone instead")
    if spec.startswith("@"):
        raise CronError(f"parser does not accept descriptors: {spec}")
    fields = spec.split()
    if len(fields) != len(FIELDS):
        raise CronError(f"expected exactly {len(FIELDS)} fields, found {len(fields)}: [{' '.join(fields)}]")
    return tuple(_field(text, bounds) for text, bounds in zip(fields, FIELDS, strict=True))


def _field(text: str, r: _Bounds) -> frozenset[int]:
    """A comma-separated list of ranges (Go's strings.FieldsFunc: empty items are skipped)."""
    out: set[int] = set()
    for expr in (item for item in text.split(",") if item):
        out |= _range(expr, r)
    if not out:
        # robfig accepts a field of commas only and then never fires; KEDA would keep the window shut forever.
        raise CronError(f"the {r.name} field {text!r} names no value")
    return frozenset(out)


def _range(expr: str, r: _Bounds) -> set[int]:
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    if low_and_high[0] in ("*", "?"):
        start, end = r.low, r.high
    else:
        start = _int_or_name(low_and_high[0], r)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _int_or_name(low_and_high[1], r)
        else:
            raise CronError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _int(range_and_step[1])
        if len(low_and_high) == 1:  # "N/step" means "N-max/step"
            end = r.high
    else:
        raise CronError(f"too many slashes: {expr}")
    if start < r.low:
        raise CronError(f"beginning of range ({start}) below minimum ({r.low}): {expr}")
    if end > r.high:
        raise CronError(f"end of range ({end}) above maximum ({r.high}): {expr}")
    if start > end:
        raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise CronError(f"step of range should be a positive number: {expr}")
    return set(range(start, end + 1, step))


def _int_or_name(expr: str, r: _Bounds) -> int:
    return r.names[expr.lower()] if expr.lower() in r.names else _int(expr)


def _int(expr: str) -> int:
    """Go's strconv.Atoi: optional sign, ASCII digits only."""
    digits = expr[1:] if expr[:1] in "+-" else expr
    if not digits or not digits.isascii() or not digits.isdigit():
        raise CronError(f"failed to parse int from {expr}: strconv.Atoi: parsing {expr!r}: invalid syntax")
    num = int(expr)
    if num < 0:
        raise CronError(f"negative number ({num}) not allowed: {expr}")
    return num
