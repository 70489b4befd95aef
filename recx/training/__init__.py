"""Training: one run from a resolved configuration to a completed run folder."""
