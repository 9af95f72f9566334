"""A bench's progress lines: on stderr, unless ``--json`` asked for the JSON object alone."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable


def progress(args: argparse.Namespace) -> Callable[[str], None]:
    def log(msg: str) -> None:
        if not args.json:
            print(msg, file=sys.stderr, flush=True)

    return log
