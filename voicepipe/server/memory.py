"""Hand the C allocator's free pages back to the system once a session is over.

A session's model steps run on several threads (the event loop's executor,
PyTorch's, CTranslate2's and onnxruntime's own), so glibc gives them separate
malloc arenas. What a finished session freed stays inside those arenas: glibc
returns memory on its own only from the top of a heap, and only past a trim
threshold that can itself rise to 64 MB once large blocks have been freed
(the dynamic mmap threshold, mallopt(3)). Measured on the assistant (docs/BENCHMARKS.md, "Memory
per session"): once the session objects themselves were freed, RSS still crept
up by ~120 MB over the first dozen sessions, all of it free memory inside the
arenas (``mallinfo2`` ``fordblks``), and ``malloc_trim(0)`` gave it back.

``malloc_trim`` walks every arena and returns whole free pages (``madvise``),
not only a heap's top; it is glibc-only, so elsewhere this is a no-op.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from collections.abc import Callable

log = logging.getLogger(__name__)


def _load_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL("libc.so.6").malloc_trim  # absent from musl
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


_TRIM = _load_trim()


def release_free_memory() -> bool:
    """Return the allocator's free pages to the system; True if glibc did release some.

    It locks one arena at a time while it walks it (a few ms each): call it from a
    worker thread, not from the event loop.
    """
    if _TRIM is None:
        return False
    return bool(_TRIM(0))
