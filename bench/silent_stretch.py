"""Longest stretch a user waits with no new information on screen, for any recx command.

Runs the command in a pseudo-terminal (so the progress display is the one a user sees), timestamps every chunk of
output, and drops what changes without telling anything: elapsed/remaining timers and spinner frames. The longest
gap between two chunks that differ otherwise (from the start to the first output, and from the last change to the
exit, included) is the figure. The baseline is the same command with its output piped (one plain line per epoch),
run in the same process after the terminal run.

    python bench/silent_stretch.py [--terminal-only] [--limit S] -- python3 -m recx train --dataset gowalla --epochs 1
    python bench/silent_stretch.py --quick

`--limit S` sends the command Ctrl-C after S seconds (its interrupt message is part of the record). `--quick` (make
ci-bench-quick) with no command times `python -m recx --version --verbose` (torch loads behind the spinner).
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time

ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\r")
TIMERS = re.compile(rb"-?\d+:\d\d:\d\d|-:--:--|[\xe2\xa0-\xe2\xa3][\x80-\xbf]{1,2}|[\xe2\x94\x80-\xe2\x95\xbf]")


def _normalised(chunk: bytes) -> bytes:
    text = TIMERS.sub(b"", ANSI.sub(b"", chunk))
    return re.sub(rb"[ \t\n]+", b" ", text).strip()


def silences(events: list[tuple[float, bytes]], end: float) -> list[tuple[float, float, str]]:
    """Every stretch without new information: (length, start, the text shown during it), longest first."""
    last_time, last_text, found = 0.0, b"", []
    for at, chunk in events:
        text = _normalised(chunk)
        if not text or text == last_text:
            continue
        found.append((at - last_time, last_time, last_text.decode(errors="replace")[-160:]))
        last_time, last_text = at, text
    found.append((end - last_time, last_time, last_text.decode(errors="replace")[-160:]))
    return sorted(found, reverse=True)


def in_terminal(command: list[str], limit_s: float, columns: int = 150) -> tuple[list[tuple[float, bytes]], float, int]:
    """Output chunks with their times; after `limit_s` the command gets SIGINT (Ctrl-C) and its reply is kept."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(command[0], command)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    start, events, interrupted = time.perf_counter(), [], False
    while True:
        if not interrupted and time.perf_counter() - start > limit_s:
            os.kill(pid, signal.SIGINT)
            interrupted = True
        if not select.select([fd], [], [], 0.5)[0]:
            continue
        try:
            data = os.read(fd, 1 << 16)
        except OSError:
            break
        if not data:
            break
        events.append((time.perf_counter() - start, data))
    _, status = os.waitpid(pid, 0)
    return events, time.perf_counter() - start, os.waitstatus_to_exitcode(status)


def piped(command: list[str], limit_s: float) -> tuple[list[tuple[float, bytes]], float, int]:
    start, events = time.perf_counter(), []
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    timer = threading.Timer(limit_s, process.send_signal, [signal.SIGINT]) if limit_s < float("inf") else None
    if timer is not None:
        timer.start()
    for line in process.stdout:
        events.append((time.perf_counter() - start, line))
    code = process.wait()
    if timer is not None:
        timer.cancel()
    return events, time.perf_counter() - start, code


def main() -> None:
    if "--" not in sys.argv and "--quick" in sys.argv[1:]:
        sys.argv += ["--", sys.executable, "-m", "recx", "--version", "--verbose"]
    if "--" not in sys.argv or sys.argv[-1] == "--":
        sys.exit(__doc__)
    command, options = sys.argv[sys.argv.index("--") + 1 :], sys.argv[1 : sys.argv.index("--")]
    limit_s = float(options[options.index("--limit") + 1]) if "--limit" in options else float("inf")
    modes = [("terminal", in_terminal)] + ([] if "--terminal-only" in options else [("piped (baseline)", piped)])
    for name, run in modes:
        events, total, code = run(command, limit_s)
        longest = silences(events, total)
        print(
            f"{name}: exit {code}, {total:.1f} s in all; first output after {events[0][0] if events else total:.2f} s",
            flush=True,
        )
        for gap, at, shown in longest[:3]:
            print(f"  silent {gap:.2f} s from t = {at:.1f} s, showing: {shown!r}", flush=True)
        if name == "terminal":
            terminal_gap = longest[0][0]
    if len(modes) == 2:
        print(f"longest silent stretch, piped / terminal: {longest[0][0] / max(terminal_gap, 1e-9):.1f}x")


if __name__ == "__main__":
    main()
