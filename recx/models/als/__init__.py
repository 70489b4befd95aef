"""Alternating-least-squares models (training kind `alternating`): WRMF / iALS, RG², RG×."""

from recx.models.als import rg, wrmf  # noqa: F401  (registration)
