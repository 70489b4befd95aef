"""recx.core.memory: with glibc's malloc tuned, the large temporaries of a repeated step mostly reuse freed memory instead
of faulting in fresh pages."""

import subprocess
import sys

import pytest

PROGRAM = """
import resource, sys, tempfile, torch
from recx.core.memory import keep_freed_memory
tuned = keep_freed_memory() if sys.argv[1] == "tuned" else False
if sys.argv[1] == "trained from python":  # recx.train alone, as a user's script runs it: no `recx` entry point
    import recx
    with tempfile.TemporaryDirectory() as root:
        recx.prepare("s", format="synthetic", ratios="80/10/10", synthetic={"n_users": 40, "n_items": 30}, data_root=root)
        recx.train(dataset="s", loss="bpr", epochs=1, ks="5", valid_metric="ndcg@5", data_root=root, run_dir=root + "/r")
query, items = torch.randn(1024, 64), torch.randn(20000, 64)
def step():  # an evaluation chunk: scores, a masked copy, top-k (two 80 MB temporaries)
    scores = query @ items.T
    return scores.masked_fill(scores > 3.5, float("-inf")).topk(20, dim=1).indices
step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(6):
    step()
print(tuned, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, check=True).stdout
    tuned, faults = out.splitlines()[-1].split()  # the last line: a run from Python prints its settings before
    return tuned, int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc tuning is Linux-only")
def test_repeated_large_temporaries_fault_far_fewer_pages_when_tuned():
    tuned, tuned_faults = _faults("tuned")
    _, plain_faults = _faults("plain")
    assert tuned == "True"
    assert plain_faults > 6 * 20_000  # untuned, every step faults in both temporaries afresh (4 KiB pages)
    assert tuned_faults < plain_faults / 3


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc tuning is Linux-only")
def test_a_run_trained_from_python_keeps_freed_memory_as_the_command_does():
    """recx.train (recx.runs.train_run) tunes malloc itself: a script that never runs the `recx` entry point would
    otherwise step with a page fault per 4 KiB of every large temporary (the Netflix-size bench's epoch 1.6x)."""
    _, trained_faults = _faults("trained from python")
    _, plain_faults = _faults("plain")
    assert plain_faults > 6 * 20_000
    assert trained_faults < plain_faults / 3
