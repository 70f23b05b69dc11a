"""A Ctrl-C (SIGINT) or SIGTERM held back for a few lines of the close: the sweep unwinds on one
everywhere else (sweep.sweeper), but where the close works out what it will record, an
interrupt that lands there must reach the place that records there is no answer."""

from __future__ import annotations

import signal
import threading


class HeldInterrupts:
    """SIGINT and SIGTERM held back for a block of the close, and remembered: `raise_if_caught`
    raises the KeyboardInterrupt a Ctrl-C would have, where the caller can handle it. Outside the
    main thread (where signals cannot be handled) it holds nothing."""

    def __init__(self) -> None:
        self.caught: list[int] = []
        self._previous: dict[int, object] = {}

    def __enter__(self) -> HeldInterrupts:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, lambda n, _: self.caught.append(n))
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def raise_if_caught(self) -> None:
        if self.caught:
            raise KeyboardInterrupt(f"signal {self.caught[0]}")
