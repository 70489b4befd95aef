"""Per-loss defaults (recx.config.run_config.LOSS_DEFAULTS) and the run-start summary of non-default settings."""

from recx.config.run_config import non_default_settings, resolve


def test_softmax_gets_shared_candidates_cosine_scores_and_rowwise_adagrad_unless_told_otherwise():
    config = resolve({})
    assert (config.loss, config.n_negatives, config.sampler_args["shared"]) == ("softmax", 2000, True)
    assert (config.model_args["scoring"], config.model_args["temperature"], config.model_args["init"]) == (
        "cosine",
        0.1,
        "xavier",
    )
    assert (config.optimizer, config.lr) == ("rowwise_adagrad", 0.02)
    summary = non_default_settings(config)
    assert summary == (
        "set: (nothing); defaults for softmax: n_negatives=2000, lr=0.02, model_args.scoring=cosine, "
        "model_args.temperature=0.1, sampler_args.shared=True; optimizer rowwise_adagrad"
    )
    assert resolve({"lr": 1e-3}).optimizer == "adam"  # an lr in Adam's scale: the optimizer bundle steps aside


def test_a_bundle_is_not_applied_when_any_of_its_keys_is_set():
    config = resolve({"n_negatives": 10, "loss_args": {"temperature": 0.2}})
    assert (config.n_negatives, config.sampler_args["shared"]) == (10, False)
    assert (config.model_args["scoring"], config.model_args["temperature"]) == ("dot", 1.0)
    assert non_default_settings(config) == "set: n_negatives=10, loss_args.temperature=0.2; optimizer adam"


def test_the_optimizer_bundles_apply_only_to_the_measured_setup():
    """Row-wise Adagrad was measured with MF on each loss's default candidates and scores; elsewhere `auto`."""
    assert resolve({"model": "mf"}).optimizer == "rowwise_adagrad"
    stated = resolve({"sampler": "uniform", "n_negatives": 2000, "sampler_args": {"shared": True}})
    assert (stated.optimizer, stated.lr) == ("rowwise_adagrad", 0.02)  # the defaults, written out: same setup
    for raw in (
        {"model": "lightgcn"},
        {"sampler": "popularity"},
        {"model_args": {"scoring": "dot"}},
        {"n_negatives": 500},
        {"model_args": {"scoring": "cosine"}},
    ):  # cosine at τ 1: not the measured
        config = resolve(raw)
        assert (config.optimizer, config.lr) == ("adam", 5e-3), raw
    for raw in ({"loss": "bpr", "model": "lightgcn"}, {"loss": "bpr", "sampler": "dns"}):
        config = resolve(raw)
        assert (config.optimizer, config.lr) == ("lazy_adam", 5e-3), raw


def test_bpr_gets_one_negative_and_rowwise_adagrad_unless_its_lr_optimizer_or_decay_is_set():
    config = resolve({"loss": "bpr"})
    assert (config.n_negatives, config.optimizer, config.lr) == (1, "rowwise_adagrad", 0.05)
    assert non_default_settings(config) == (
        "set: loss=bpr; defaults for bpr: n_negatives=1, lr=0.05; optimizer rowwise_adagrad"
    )
    assert (resolve({"loss": "bpr", "lr": 0.01}).optimizer, resolve({"loss": "bpr", "lr": 0.01}).lr) == (
        "lazy_adam",
        0.01,
    )
    assert resolve({"loss": "bpr", "optimizer": "sgd"}).lr == 5e-3
    decayed = resolve({"loss": "bpr", "weight_decay": 1e-4})  # full-table decay: dense Adam, not the bundle
    assert (decayed.optimizer, decayed.lr) == ("adam", 5e-3)


def test_samplers_without_shared_keep_their_args():
    config = resolve({"sampler": "dns"})  # softmax with DNS: no `shared` key, so 2000 negatives are not imposed
    assert config.n_negatives == 100 and "shared" not in config.sampler_args
    assert config.model_args["scoring"] == "cosine"


def test_a_bundle_left_out_for_another_setup_is_said_with_why_and_what_trains_instead(tiny_root, tmp_path, recx_cli):
    """Changing only the sampler of a softmax run switched it from row-wise Adagrad at lr 0.02 to dense Adam at lr
    0.005 without a word (issue 46, item 6): `recx train` and `recx sweep --dry-run` now say which bundle and why."""
    from recx.config.run_config import bundle_note

    note = bundle_note(resolve({"sampler": "popularity"}))
    assert note == (
        "softmax's default optimizer=rowwise_adagrad, lr=0.02 is left out: it is measured for sampler=uniform (this "
        "run: sampler=popularity), so the run trains with optimizer=adam, lr=0.005; set optimizer and lr to choose"
    )
    assert bundle_note(resolve({})) is None and bundle_note(resolve({"sampler": "popularity", "lr": 0.01})) is None
    assert "measured for model=mf (this run: model=lightgcn)" in bundle_note(
        resolve({"model": "lightgcn", "loss": "bpr"})
    )
    assert bundle_note(resolve({"model": "fastvae", "loss": "softmax"})) is None  # its optimizer is the model's
    assert bundle_note(resolve({"model": "wrmf"})) is None  # no loss, no bundle
    fast = ("--dim", "8", "--epochs", "1", "--device", "cpu", "--data-root", tiny_root, "--dataset", "tiny", "--quiet")
    for sampler, said in (("popularity", True), ("uniform", False)):
        trained = recx_cli("train", *fast, "--sampler", sampler, "--run-dir", tmp_path / sampler)
        assert trained.code == 0, trained.err
        assert (f"note: {note}" in " ".join(trained.out.split())) is said, trained.out
    experiments = tmp_path / "e.yaml"
    experiments.write_text(
        "experiments:\n  two:\n    datasets: [tiny]\n    defaults: {dim: 8, epochs: 1, device: cpu}\n"
        "    methods:\n      uniform: {sampler: uniform}\n      popularity: {sampler: popularity}\n"
    )
    planned = recx_cli("sweep", experiments, "-e", "two", "--dry-run", "--data-root", tiny_root)
    assert planned.code == 0, planned.err
    shown = " ".join(planned.out.split())
    assert f"note: method popularity: {note}" in shown and "method uniform:" not in shown
