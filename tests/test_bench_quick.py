"""Every bench of bench/ has a --quick mode that `make ci-bench-quick` runs in CI (tiny synthetic data, in seconds),
so that a bench nothing runs cannot rot unseen. The benches themselves run there, not here (each is a fresh process
that loads torch: minutes in all)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Not benches run on their own: the GPU check's scripts (their dry run is `make gpu-check-cpu`), the module the
# benches' --through-cli runs (train_speed's and als_speed's quick runs use it) and the quick mode's helper.
NOT_LISTED = {
    "gpu_check", "gpu_pack", "gpu_runs", "through_cli", "quick",
    # run by make reproduce-headlines-gpu-cpu: the GPU headline command, its pack, data recipes, jobs and summary
    "gpu_headlines", "headlines_pack", "headline_data", "headline_jobs", "headline_summary",
}  # fmt: skip


def _listed() -> list[str]:
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    return re.search(r"^BENCH_QUICK = (.*)$", text, re.M).group(1).split()


def test_every_bench_is_run_quick_in_ci():
    benches = {path.stem for path in (ROOT / "bench").glob("*.py")} - NOT_LISTED
    assert sorted(_listed()) == sorted(benches), "add the bench to BENCH_QUICK in the Makefile (and give it --quick)"
    assert "make ci-bench-quick" in (ROOT / ".ci" / "run").read_text()


def test_every_listed_bench_has_a_quick_mode():
    for name in _listed():
        source = (ROOT / "bench" / f"{name}.py").read_text()
        assert "quick.option(" in source or '"--quick"' in source, f"bench/{name}.py has no --quick"
