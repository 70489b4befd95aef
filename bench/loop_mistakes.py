"""Puts back, one at a time, plausible mistakes in the training loop around the golden-tested functions, runs the
loop goldens and the related suite on each, and prints which tests fail (docs/fidelity.md, issue 43). It edits the
files of the checkout it is given and writes each back as it found it: give it a scratch worktree, never the one
you work in.

    git worktree add --detach /tmp/scratch HEAD
    python bench/loop_mistakes.py /tmp/scratch [--full] [NAME-PART ...]

`--full` runs the whole of tests/ on each mistake instead of the loop goldens and the related suite.

    python bench/loop_mistakes.py --quick   # make ci-bench-quick

`--quick` edits nothing and runs no test: it checks that each mistake still applies to this checkout (its text
found once in its file, the file with the mistake in it still Python), so that the list cannot rot unseen.
"""

import json
import os
import subprocess
import sys

SUBSET = "tests/test_official_prism.py tests/test_official_hns.py tests/test_official_wrmf.py tests/test_official_fastvae.py tests/test_official_bir.py tests/test_official_rg.py tests/test_train_optim.py tests/test_train_schedule.py tests/test_train_sparse.py tests/test_train_row_gradients.py tests/test_train_positive_mask.py tests/test_models_als.py tests/test_models_weight_decay.py tests/test_resume.py tests/test_samplers_midx.py tests/test_sweep_als.py tests/test_contract.py".split()
MISTAKES = {
    "epoch loss = last step's": (
        "recx/training/fit.py",
        'record = {"epoch": epoch, "loss": float(losses.mean())',
        'record = {"epoch": epoch, "loss": float(losses[-1])',
    ),
    "StepLR stepped again at the start of each later epoch (interactions)": (
        "recx/training/runners/interactions.py",
        '        if self.sampler.rebuild_every == "epoch" and self.steps_done == 0:',
        '        if self.steps_done == 0 and epoch > 0:\n            self.schedule.end_epoch()\n        if self.sampler.rebuild_every == "epoch" and self.steps_done == 0:',
    ),
    "MIDX built once, not rebuilt each epoch (users runner)": (
        "recx/training/runners/users.py",
        'self.sampler.rebuild_every == "epoch" and self.steps_done == 0:',
        'self.sampler.rebuild_every == "epoch" and self.steps_done == 0 and epoch == 0:',
    ),
    "Adam's weight decay decoupled (AdamW)": (
        "recx/optim/optimizers.py",
        "class DenseAdam(torch.optim.Adam):",
        "class DenseAdam(torch.optim.AdamW):",
    ),
    "ALS default cg_steps 3 -> 2 (implicit's default relied on)": (
        "recx/models/als/base.py",
        "cg_steps: int = arg(3,",
        "cg_steps: int = arg(2,",
    ),
    "items' half-step before users' in an epoch": (
        "recx/training/runners/alternating.py",
        "solves = [self.model.solve_users, self.model.solve_items]",
        "solves = [self.model.solve_items, self.model.solve_users]",
    ),
    "the last, partial batch dropped (interactions)": (
        "recx/training/runners/interactions.py",
        "self.n_steps = math.ceil(self.items_of.numel() / config.batch_size)",
        "self.n_steps = self.items_of.numel() // config.batch_size",
    ),
    "RG half-steps starting with the items": (
        "recx/training/runners/alternating.py",
        "solves = [solves[(epoch - 1) % 2]]",
        "solves = [solves[epoch % 2]]",
    ),
    "the same order every epoch (one permutation drawn once)": (
        "recx/training/runners/base.py",
        "        if self.config.fixed_order:\n",
        "        if True:  # fixed_order\n",
    ),
    "MAWU's margins clipped before the loss reads them": (
        "recx/losses/mawu.py",
        "        margin = 1.0 - torch.sigmoid(self.user_margin[users] + self.item_margin[items])\n"
        "        with torch.no_grad():\n"
        "            self.user_margin.clamp_(0.0, 1.0)\n"
        "            self.item_margin.clamp_(0.0, 1.0)\n",
        "        with torch.no_grad():\n"
        "            self.user_margin.clamp_(0.0, 1.0)\n"
        "            self.item_margin.clamp_(0.0, 1.0)\n"
        "        margin = 1.0 - torch.sigmoid(self.user_margin[users] + self.item_margin[items])\n",
    ),
    "XIR's half drawn from the batch at hand, not the run's batch size": (
        "recx/samplers/xir.py",
        "half = max(1, (self.args.n_resampled or self.run_batch_size or size) // 2)",
        "half = max(1, (self.args.n_resampled or size) // 2)",
    ),
    "RG's validation tie not an improvement (patience not reset)": (
        "recx/training/fit.py",
        "return score >= best if config.half_steps else score > best",
        "return score > best",
    ),
    "the shuffle applied to the users, not to their positives (pairs broken; interactions)": (
        "recx/training/runners/interactions.py",
        "users_of, items_of = self.users_of.index_select(0, order), self.items_of.index_select(0, order)",
        "users_of, items_of = self.users_of.index_select(0, order), self.items_of",
    ),
    "MAWU's margins read at each pair's row of the batch, not its id's place among the batch's distinct ids": (
        "recx/losses/mawu.py",
        "    return torch.unique(ids, return_inverse=True)[1]\n",
        "    return torch.arange(ids.numel(), device=ids.device)\n",
    ),
    "k-means stopped on an absolute fall of the loss, not a relative one": (
        "recx/samplers/kmeans.py",
        "if previous - loss < previous * tolerance:",
        "if previous - loss < tolerance:",
    ),
}


def applies() -> int:
    """--quick: each mistake's text is found once in this checkout's file, and the file with the mistake compiles."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    broken = 0
    for name, (path, old, new) in MISTAKES.items():
        with open(os.path.join(here, path)) as source:
            s = source.read()
        found = s.count(old)
        verdict = "applies" if found == 1 else f"its text is found {found} times in {path}, not once"
        if found == 1:
            try:
                compile(s.replace(old, new), path, "exec")
            except SyntaxError as error:
                verdict = f"{path} with it is not Python: {error}"
        broken += verdict != "applies"
        print(f"{verdict:8s} {name}", flush=True)
    print(f"{len(MISTAKES) - broken} of {len(MISTAKES)} mistakes apply")
    return 1 if broken else 0


if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0 if len(sys.argv) > 1 else 2)
if sys.argv[1:] == ["--quick"]:
    sys.exit(applies())
W = sys.argv[1]
FULL = "--full" in sys.argv[2:]
only = [a for a in sys.argv[2:] if a != "--full"]
TESTS = ["tests"] if FULL else SUBSET
out = {}
for name, (path, old, new) in MISTAKES.items():
    if only and not any(o in name for o in only):
        continue
    p = os.path.join(W, path)
    s = open(p).read()
    assert s.count(old) == 1, (name, s.count(old))
    open(p, "w").write(s.replace(old, new))
    try:
        r = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=no", "-rf", *TESTS],
            cwd=W,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": W},
        )
        fails = [line for line in r.stdout.splitlines() if line.startswith("FAILED")]
        out[name] = {"summary": r.stdout.strip().splitlines()[-1], "failed": fails}
        print(name, json.dumps(out[name], indent=1), flush=True)
    finally:
        open(p, "w").write(s)  # the file as it was, uncommitted edits included (git checkout would drop them)
