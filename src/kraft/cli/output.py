"""Standard output for the file tools: a reader that stops reading is not an error.

`kraft dump-log ... | head -1` closes the pipe after one line; the next write raises
BrokenPipeError. Kafka's tools go quiet then (Java's System.out swallows write errors) and
exit 0, and so do these: no traceback, and no second error when Python flushes stdout at
exit, because stdout is pointed at /dev/null first (as the Python docs advise for SIGPIPE).
"""

import functools
import os
import sys
from collections.abc import Callable
from typing import ParamSpec

P = ParamSpec("P")


def quiet_on_broken_pipe(run: Callable[P, int]) -> Callable[P, int]:
    """`run`, returning 0 quietly once whoever reads its standard output has gone."""

    @functools.wraps(run)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> int:
        try:
            return run(*args, **kwargs)
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
            return 0

    return guarded
