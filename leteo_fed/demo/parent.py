"""A child process that dies with the process that launched it (the demos' and simulations'
deployments on one machine).

Kept apart from :mod:`leteo_fed.demo.cluster` (which imports gRPC) because every `leteo-fed`
command calls :func:`die_with_parent_if_asked` at start-up.
"""

from __future__ import annotations

import ctypes
import os
import signal

PARENT_ENV = "LETEO_DIE_WITH_PARENT"
_PR_SET_PDEATHSIG = 1


def die_with_parent_if_asked() -> None:
    """Called at CLI start-up in children: SIGTERM when the launching process dies.

    Set in the child itself (not via preexec_fn) so the launcher can use vfork/posix_spawn:
    forking a process that runs gRPC threads is unsafe.
    """
    parent = os.environ.pop(PARENT_ENV, None)
    if not parent:
        return
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent):  # the parent died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)
