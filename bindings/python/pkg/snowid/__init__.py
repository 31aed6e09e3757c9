# SPDX-License-Identifier: MIT
"""snowid: unique, roughly time-ordered 64-bit IDs (or UUIDv7s) from the
host's snowidd, taken from its shared segment by libsnowid (one atomic
operation, no system call).

    import snowid
    with snowid.SnowId() as s:
        i = s.next(); parts = s.decode(i)

Errors are OSError subclasses with errno set (BlockingIOError for EAGAIN,
FileNotFoundError for ENOENT, ...), their message naming the errno.
"""
import enum as _enum
import os as _os

from ._snowid import (  # noqa: F401
    EPOCH_DEFAULT_MS,
    MAX_WAIT_DEFAULT_USEC,
    HostStats,
    Layout,
    Parts,
    SnowId,
    Status,
    decode,
    decode_uuid7,
    default_layout,
    encode,
)
from ._snowid import _after_fork_child

__all__ = [
    "SnowId", "open", "Parts", "Layout", "Status", "HostStats", "State", "decode",
    "decode_uuid7", "encode", "default_layout", "EPOCH_DEFAULT_MS", "MAX_WAIT_DEFAULT",
]

#: the default wait budget, in seconds
MAX_WAIT_DEFAULT = MAX_WAIT_DEFAULT_USEC / 1e6


class State(_enum.IntEnum):
    """Status.state: what the daemon says of its segment."""
    STARTING = 0
    LEASED = 1
    NO_LEASE = 2
    RESTORED = 3      # the store was restored: nothing extended until fenced
    LAYOUT_LOST = 4   # the cluster's layout or fence is gone
    RETIRED = 5       # replaced by a newer segment (clients follow)
    STORE_FULL = 6    # the store is full: nothing extended
    # STORE_FULL by its name from when etcd was the only store (an alias:
    # State(6) is State.STORE_FULL); deprecated, it goes in the next release
    ETCD_FULL = 6


def open(instance=None, *, max_wait=MAX_WAIT_DEFAULT):  # noqa: A001
    """SnowId(instance, max_wait=max_wait)."""
    return SnowId(instance, max_wait=max_wait)


# a child of fork() keeps every handle; the calls that were waiting in
# threads of the parent are not in it
_os.register_at_fork(after_in_child=_after_fork_child)
