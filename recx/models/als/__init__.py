"""Alternating-least-squares models (runner `alternating`): WRMF / iALS, RG², RG×."""
