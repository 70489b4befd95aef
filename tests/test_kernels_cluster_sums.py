"""Lloyd's centroid update on the host branch (recx.kernels.cluster_sums): the per-cluster sums and sizes
of a float64 reference, equal to the accelerator branch's one-hot product to rounding, whatever the thread count."""

import numba
import torch

from recx.core.device_paths import forced_accelerator_branches
from recx.samplers.kmeans import cluster_sums_of, kmeans


def test_cluster_sums_against_a_float64_reference_and_the_one_hot_product():
    generator = torch.Generator().manual_seed(0)
    points = torch.randn(200_003, 7, generator=generator)  # over three chunks of the kernel
    labels = torch.randint(0, 5, (200_003,), generator=generator)
    labels[labels == 3] = 4  # an empty cluster
    sums, counts = cluster_sums_of(points, labels, 5)
    reference = torch.zeros(5, 7, dtype=torch.float64).index_add_(0, labels, points.double())
    assert sums.dtype == torch.float32 and counts.tolist() == torch.bincount(labels, minlength=5).float().tolist()
    torch.testing.assert_close(sums.double(), reference, rtol=1e-6, atol=1e-6)
    assert (sums[3] == 0).all()
    with forced_accelerator_branches():
        product_sums, product_counts = cluster_sums_of(points, labels, 5)
    torch.testing.assert_close(product_sums, sums, rtol=1e-4, atol=1e-3)
    assert torch.equal(product_counts, counts)


def test_cluster_sums_do_not_depend_on_the_thread_count():
    generator = torch.Generator().manual_seed(1)
    points = torch.randn(300_000, 4, generator=generator)
    labels = torch.randint(0, 3, (300_000,), generator=generator)
    results = []
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
        numba.set_num_threads(threads)
        results.append(cluster_sums_of(points, labels, 3)[0])
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    assert torch.equal(results[0], results[1])


def test_a_lloyd_iteration_assigns_by_the_written_distance():
    """One iteration's labels are the argmin of ‖x‖² - 2 x·c + ‖c‖² as the official code writes it, and its
    centroids are the means of those clusters."""
    points = torch.randn(4000, 12, generator=torch.Generator().manual_seed(3))
    start = points[:7].clone()
    centroids, labels = kmeans(points, start, 1, 0.0, torch.Generator().manual_seed(0))
    distances = points.pow(2).sum(-1, keepdim=True) - 2 * (points @ start.T) + start.pow(2).sum(-1)[None, :]
    assert torch.equal(labels, distances.argmin(-1))
    for k in range(7):
        torch.testing.assert_close(centroids[k], points[labels == k].mean(0), rtol=1e-5, atol=1e-6)
