"""Puts back, one at a time, plausible mistakes in the training loop around the golden-tested functions, runs the
loop goldens and the related suite on each, and prints which tests fail (docs/fidelity.md, issue 43). It edits the
files of the checkout it is given and restores each with `git checkout`: give it a scratch worktree, never the one
you work in.

    git worktree add --detach /tmp/scratch HEAD
    python bench/loop_mistakes.py /tmp/scratch [NAME-PART ...]
"""

import json
import os
import subprocess
import sys

W = sys.argv[1]
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
}
only = sys.argv[2:]
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
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=no", "-rf", *SUBSET],
            cwd=W,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": W},
        )
        fails = [line for line in r.stdout.splitlines() if line.startswith("FAILED")]
        out[name] = {"summary": r.stdout.strip().splitlines()[-1], "failed": fails}
        print(name, json.dumps(out[name], indent=1), flush=True)
    finally:
        subprocess.run(["git", "checkout", path], cwd=W)
