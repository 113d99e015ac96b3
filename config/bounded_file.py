"""Read a small file a person named (a config, a crossover.json, a sweep file) without hanging or filling memory.

Checked with stat before opening (opening a FIFO blocks until a writer comes; /dev/zero never ends), opened without
blocking, checked again on the open file, then read with a bound, so a wrong path is a sentence within a second.
One owner: the config loader, the endpoint's crossover file and bench's input files all read through it.

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class UnreadableFile(ValueError):
    """The file cannot be read as asked; the message is a sentence naming it and the fix."""


def read_bounded(
    file: str | Path,
    *,
    where: str,
    max_bytes: int,
    limit_name: str,
    expect: str,
    unreadable_fix: str,
) -> bytes:
    """At most `max_bytes` of a regular file. `where` names it ("config file 'x.yaml'"), `limit_name` what is
    bounded ("a config"), `expect` the fix for a device, pipe or directory, `unreadable_fix` the fix for a missing or
    forbidden file."""
    not_regular = f"{where} is not a regular file (a device, pipe or directory); {expect}"
    try:
        if not stat.S_ISREG(Path(file).stat().st_mode):
            raise UnreadableFile(not_regular)
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as stream:
            info = os.fstat(stream.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise UnreadableFile(not_regular)
            if info.st_size > max_bytes:
                raise UnreadableFile(
                    f"{where} is {info.st_size} bytes; {limit_name} is at most {max_bytes}, check you chose the right "
                    "file"
                )
            raw = stream.read(max_bytes + 1)
    except OSError as err:
        raise UnreadableFile(f"{where} cannot be read ({err.strerror}); {unreadable_fix}") from None
    if len(raw) > max_bytes:  # the file grew after fstat
        raise UnreadableFile(f"{where} is over {max_bytes} bytes; {limit_name} is at most that, check the file")
    return raw
