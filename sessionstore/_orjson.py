"""orjson, imported once with SIGINT blocked: every module of the package imports it from here.

orjson's module init crashes the interpreter (SIGSEGV) when a KeyboardInterrupt
interrupts the imports it makes (ijl/orjson#310): a Ctrl-C in the first
moments of `sessionstore demo` or a harness killed it instead of exiting 130.
A Ctrl-C meanwhile is delivered as soon as the import is done. Not imported by
the package itself: orjson's init imports dataclasses, inspect, json and uuid
(~30 ms), which `sessionstore --version` and `import sessionstore` need not pay.
"""

import signal

_blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
try:
    import orjson
finally:
    signal.pthread_sigmask(signal.SIG_SETMASK, _blocked)

__all__ = ["orjson"]
