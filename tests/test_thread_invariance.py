"""A seeded run gives the same numbers with 1 and 2 compute threads, so a run may follow its CPU share
(recx.core.threads.follow_share) without changing its results.

The cases are the ones whose numbers once changed with the thread count: advanced indexing's backward
(`table[ids]`, a thread-dependent sum over repeated ids; recx.core.gather.gather_rows replaces it) under the
whole-table scoring that BIR, XIR and the shared-candidate softmax take when the batch is as large as the catalogue;
and the compiled kernels that split rows among threads (BPR's row gradients, WRMF's per-row CG); FastVAE's row-sparse
gradients summed into its kept buffers.
Tensors are big enough for torch to split its loops over two threads (a 2048 x 64 gradient).
"""

import numba
import pytest
import torch

from recx.config.run_config import resolve
from recx.core.gather import gather_rows
from recx.core.progress import make_progress
from recx.core.threads import set_compute_threads
from recx.data.dataset import load_dataset
from recx.data.prepare import PrepareOptions, prepare
from recx.runs.train_run import train_run


@pytest.fixture
def threads_restored():
    before = torch.get_num_threads()
    yield
    set_compute_threads(before)
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)


def test_gather_rows_is_indexing_with_a_thread_independent_backward(threads_restored):
    generator = torch.Generator().manual_seed(0)
    table = torch.randn(1500, 64, generator=generator, dtype=torch.float32)
    ids = torch.randint(0, 1500, (2048,), generator=generator)
    upstream = torch.randn(2048, 64, generator=generator)
    gradients = []
    for threads in (1, 2):
        set_compute_threads(threads)
        leaf = table.clone().requires_grad_()
        picked = gather_rows(leaf, ids)
        assert torch.equal(picked, table[ids])
        picked.backward(upstream)
        gradients.append(leaf.grad)
    assert torch.equal(gradients[0], gradients[1])
    reference = torch.zeros(1500, 64, dtype=torch.float64).index_add_(0, ids, upstream.double())
    torch.testing.assert_close(gradients[0].double(), reference, rtol=1e-5, atol=1e-5)
    assert gather_rows(table, ids.view(32, 64)).shape == (32, 64, 64)


CASES = {
    "bir": {"loss": "softmax", "sampler": "bir"},
    "xir": {"loss": "softmax", "sampler": "xir"},
    "shared softmax": {"loss": "softmax", "sampler": "uniform", "n_negatives": 2000, "sampler_args": {"shared": True}},
    "bpr": {"loss": "bpr", "sampler": "uniform"},
    "wrmf": {"model": "wrmf"},
    "fastvae": {"model": "fastvae", "loss": "softmax", "sampler": "uniform", "n_negatives": 20, "batch_size": 256},
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_seeded_run_gives_the_same_numbers_with_one_and_two_threads(name, tmp_path, threads_restored):
    root = tmp_path / "data"
    synthetic = {"n_users": 1200, "n_items": 1500, "mean_length": 12}
    prepare("mid", PrepareOptions(format="synthetic", ratios="80/10/10", synthetic=synthetic), root)
    dataset = load_dataset(root, "mid")
    config = resolve({"dataset": "mid", "dim": 64, "epochs": 1, "batch_size": 2048, "seed": 0, **CASES[name]})
    outcomes = []
    for threads in (1, 2):
        set_compute_threads(threads)
        with make_progress(quiet=True) as progress:
            outcome = train_run(config, dataset, tmp_path / f"run-{threads}", progress, ks=[20])
        outcomes.append(outcome.results["value"].to_numpy())
    assert (outcomes[0] == outcomes[1]).all()
