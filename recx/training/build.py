"""Build a run's model, sampler and loss from the registries by the names in its configuration."""

from __future__ import annotations

import torch

from recx.config.run_config import RunConfig
from recx.data.dataset import Dataset
from recx.losses.registry import LOSSES
from recx.models.registry import MODELS
from recx.samplers.registry import SAMPLERS, new_sampler


def build_model(config: RunConfig, dataset: Dataset, device: torch.device):
    model_class = MODELS.get(config.model)
    torch.manual_seed(config.seed)
    model = model_class(dataset.n_users, dataset.n_items, config.dim, model_class.Args(**config.model_args), dataset)
    return model.to(device)


def build_sampler(config: RunConfig, dataset: Dataset, generator: torch.Generator):
    """The run's sampler; one a plugin registered has its first draw checked (recx.samplers.base.checked_draw)."""
    sampler = new_sampler(config.sampler, dataset, config.n_negatives, config.sampler_args, generator, config.kernels)
    owner = SAMPLERS.owner(config.sampler)
    if not owner.startswith("recx ("):
        sampler.output_check = f"sampler {config.sampler!r} of {owner}"
    return sampler


def build_loss(config: RunConfig, dataset: Dataset, device: torch.device):
    loss_class = LOSSES.get(config.loss)
    return loss_class(loss_class.Args(**config.loss_args), dataset).to(device)
