"""Full-ranking evaluation, metrics, popularity strata and result tables."""
