"""The example plugin's methods keep recx's contract (recx.testing, the kit recx's own contract test calls), and
match their formulas on hand-worked inputs."""

import math

import recx_example  # noqa: F401  (registration, when the package is not installed)
import torch

from recx.testing import check_loss, check_metric, check_sampler, make_sampler, random_batch, random_dataset


def test_mixture_keeps_the_sampler_contract(tmp_path):
    check_sampler("mixture", {"weight": 0.3}, workdir=tmp_path)


def test_mixture_log_q_is_its_formula():
    dataset = random_dataset()
    batch = random_batch(dataset)
    sampler = make_sampler("mixture", dataset, 8, weight=0.3)
    counts = dataset.item_popularity.double()
    expected = torch.log(0.3 / dataset.n_items + 0.7 * counts / counts.sum())
    got = sampler.log_probability(batch, torch.arange(dataset.n_items)[None, :]).double()[0]
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)


def test_hinge_keeps_the_loss_contract(tmp_path):
    check_loss("hinge", {"margin": 0.5}, workdir=tmp_path)


def test_hinge_by_hand():
    from recx_example.hinge import Hinge, HingeArgs

    from recx import LossInput

    scores = LossInput(
        torch.tensor([2.0, 0.0]), torch.tensor([[1.5, 3.0], [-2.0, -0.5]]), torch.zeros(2), torch.zeros(1, 2)
    )
    # query 0: max(0, 1 - 0.5) = 0.5 and max(0, 1 + 1) = 2; query 1: max(0, 1 - 2) = 0 and max(0, 1 - 0.5) = 0.5
    assert math.isclose(float(Hinge(HingeArgs(margin=1.0))(scores)), ((0.5 + 2) / 2 + (0 + 0.5) / 2) / 2)


def test_map_keeps_the_metric_contract():
    check_metric("map")


def test_map_by_hand():
    from recx_example.average_precision import AveragePrecision

    from recx import TopK

    top = TopK(torch.tensor([[True, False, True, False]]), torch.tensor([3]))
    assert math.isclose(float(AveragePrecision().per_user(top, 4)[0]), (1 / 1 + 2 / 3) / 3)
    assert math.isclose(float(AveragePrecision().per_user(top, 2)[0]), 1 / 2)


def test_tail_coverage_keeps_the_metric_contract():
    check_metric("tail_coverage")  # a catalogue-level metric: one value per weighting of the users


def test_tail_coverage_by_hand():
    from recx_example.tail_coverage import TailCoverage

    from recx import Catalogue, Exposure

    # 10 items: the long tail (recx's unpopular stratum) is the 8 least popular, items 2..9
    popularity = torch.tensor([9.0, 8, 7, 6, 5, 4, 3, 2, 1, 0])
    strata = torch.tensor([0, 1, 2, 2, 2, 2, 2, 2, 2, 2])
    catalogue = Catalogue(popularity, strata, n_users=20)
    counts = torch.tensor([[3.0, 2, 1, 0, 0, 4, 0, 0, 0, 0], [3.0, 2, 0, 0, 0, 0, 0, 0, 0, 0]])  # two weightings
    got = TailCoverage().from_exposure(Exposure(counts, torch.tensor([3.0, 3.0]), catalogue), k=2)["all"]
    assert got.tolist() == [2 / 8, 0.0]  # items 2 and 5 of the tail reached; none in the second weighting
