"""`python -m recx.sweeps.worker THREADS`: a local worker process. It reads one task (JSON) per line on stdin, runs
it, and answers one outcome (JSON: run_id, status, message) per line on stdout; it exits at the end of stdin.
Anything else it prints goes to stderr (the driver sends that to the worker's log), so the answers stay parseable.
A worker lives for the whole sweep so that the interpreter start and the imports are paid once per job, not per run.
"""

from __future__ import annotations

import json
import os
import sys


def serve(threads: int) -> None:

    from recx.core.memory import keep_freed_memory
    from recx.core.progress import make_progress
    from recx.core.threads import set_compute_threads
    from recx.sweeps.task import RunTask, execute

    keep_freed_memory()
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    set_compute_threads(threads)
    for line in sys.stdin:
        task = RunTask.from_json(line)
        outcome = execute(task, make_progress(quiet=True))
        answers.write(json.dumps({"run_id": task.run_id, "status": outcome.status, "message": outcome.message}) + "\n")
        answers.flush()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
