"""Child processes that do not outlive their parent: `die_with_parent(pid)` at the start of a
child (Linux: the kernel sends it SIGKILL when the parent thread that started it exits; a
parent already gone makes it exit at once)."""

from __future__ import annotations

import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Get SIGKILL when `parent` dies (Linux), so no orphan keeps running or writing."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before the signal was asked for
        sys.exit(3)
