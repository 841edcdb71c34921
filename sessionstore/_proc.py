"""Process identity: a pid plus its start time, so a recycled pid is not mistaken for the writer."""

from __future__ import annotations

import os
from functools import cache

# Start times derived from /proc jitter by up to a clock tick plus the rounding
# of the boot time; a recycled pid starts much later than this.
_START_TOLERANCE_S = 1.0
# pid_t is a signed 32-bit integer.
PID_MAX = 2**31 - 1


@cache
def _boot_time() -> float | None:
    try:
        with open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"btime "):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def _stat_fields(pid: int) -> list[bytes] | None:
    """Fields 3.. of /proc/<pid>/stat (state first), or None without /proc or process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    return stat[stat.rfind(b")") + 2 :].split()


def process_start_time(pid: int) -> float | None:
    """Epoch seconds at which process `pid` started, or None if it is gone or unknowable."""
    boot = _boot_time()
    fields = _stat_fields(pid)
    if boot is None or fields is None:
        return None
    ticks = int(fields[19])  # field 22 overall: starttime, in clock ticks since boot
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def process_alive(pid: int, started_at: float | None) -> bool:
    """Whether the process recorded as (`pid`, `started_at`) is still running.

    Without a recorded start time only the pid's existence can be checked.
    """
    if not 0 < pid <= PID_MAX:
        return False  # no process has this pid, and kill(2) would overflow on it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, belongs to another user
    fields = _stat_fields(pid)
    if fields is not None and fields[0] in (b"Z", b"X"):
        return False  # exited, not yet reaped by its parent
    if started_at is None:
        return True
    current = process_start_time(pid)
    if current is None:
        return True  # no /proc: the pid exists, which is all we can tell
    return abs(current - started_at) <= _START_TOLERANCE_S
