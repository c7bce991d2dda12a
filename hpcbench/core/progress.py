"""Sweep progress: a bar with ETA on a terminal, one plain line per run otherwise."""

from __future__ import annotations

import sys
import time
from typing import TextIO

# Beyond this a duration is no measurement or plan (a crafted journal's 1e308 s, a sum
# that overflowed to inf): it reads as "over" the cap, never as inf or 300 digits.
DURATION_CAP_S = 10**9  # about 32 years


def format_duration(seconds: float) -> str:
    if seconds != seconds:  # NaN (math.isnan would raise on an int past a float's range)
        return "unknown"
    if seconds > DURATION_CAP_S:
        return f"over {format_duration(DURATION_CAP_S)}"
    seconds = int(round(max(0.0, seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None, width: int = 30) -> None:
        self.total = total
        self.done = 0
        self.failed = 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.width = width
        self.started = time.monotonic()
        self._durations: list[float] = []

    def mean_duration(self) -> float:
        """Mean seconds per finished run (0 before the first)."""
        return sum(self._durations) / len(self._durations) if self._durations else 0.0

    def eta(self) -> float | None:
        """Remaining time from the mean duration of the runs so far."""
        if not self._durations:
            return None
        return sum(self._durations) / len(self._durations) * (self.total - self.done)

    def start(self, label: str) -> None:
        if self.tty:
            self._draw(f"running {label}")
        else:
            print(f"[{self.done + 1}/{self.total}] {label} ...", file=self.stream, flush=True)

    def finish(self, label: str, ok: bool, seconds: float, detail: str = "") -> None:
        self.done += 1
        self.failed += not ok
        self._durations.append(seconds)
        status = "ok" if ok else "FAILED"
        line = f"[{self.done}/{self.total}] {label}: {status} in {format_duration(seconds)}"
        line += f" {detail}" if detail else ""
        eta = self.eta()
        if self.tty:
            # The finished run scrolls up as a plain line; the bar stays at the bottom.
            self.stream.write("\r\033[K" + line + "\n")
            self._draw("")
        else:
            if eta is not None and self.done < self.total:
                line += f", ETA {format_duration(eta)}"
            print(line, file=self.stream, flush=True)

    def note(self, text: str) -> None:
        """A line of its own between runs; on a terminal the bar stays at the bottom."""
        if self.tty:
            self.stream.write("\r\033[K" + text + "\n")
            self._draw("")
        else:
            print(text, file=self.stream, flush=True)

    def _draw(self, note: str) -> None:
        filled = int(self.width * self.done / max(1, self.total))
        eta = self.eta()
        eta_text = f"ETA {format_duration(eta)}" if eta is not None else "ETA --"
        if self.done >= self.total:
            eta_text = "done"  # nothing is left to estimate
        bar = "#" * filled + "." * (self.width - filled)
        failed = f" {self.failed} failed" if self.failed else ""
        self.stream.write(f"\r\033[K[{bar}] {self.done}/{self.total}{failed} {eta_text} {note}")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
        elapsed = format_duration(time.monotonic() - self.started)
        print(f"{self.done} runs in {elapsed}, {self.failed} failed", file=self.stream)
