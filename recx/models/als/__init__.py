"""Alternating-least-squares models (training kind `alternating`): WRMF / iALS, RG², RG×."""
