"""`recx report`: tables with the best value per column marked, paired significance tests against a baseline
method, and plots (convergence, per-stratum bars, metric versus a swept parameter) from sweep results."""
