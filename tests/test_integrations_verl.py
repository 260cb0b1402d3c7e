"""toy_rl.integrations.verl: BAPO as verl 0.9.1 policy-loss modes, checked against verl's own code.

Skipped when verl is not installed (``pip install --no-deps verl==0.9.1`` plus the few modules its
import needs: docs/scaling_out.md).
"""
import json
import sys
import time
from importlib.metadata import entry_points

import pytest
import torch

core_algos = pytest.importorskip("verl.trainer.ppo.core_algos", reason="verl (or a module its import needs) is not installed: docs/scaling_out.md, CI")
# verl's own import has run its plug-in discovery (the "verl.plugins" entry points) by now: note
# whether that loaded our module, before this file imports it.
LOADED_BY_VERL = "toy_rl.integrations.verl" in sys.modules

from omegaconf import OmegaConf  # noqa: E402  (a verl dependency)
from verl.workers.config import FSDPActorConfig  # noqa: E402

import toy_rl.integrations.verl as plugin  # noqa: E402
from toy_rl.clipping import BAPO, ClipHigher, Symmetric, policy_loss  # noqa: E402
from toy_rl.integrations.verl_core import VERL_AGGREGATIONS, toy_rl_equivalent  # noqa: E402

F64 = torch.float64


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_thread):
    yield


def actor_config(**policy_loss):
    """verl's real actor config (dataclass), with our policy-loss config class."""
    return FSDPActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, clip_ratio_high=0.28,
                           policy_loss=plugin.BAPOPolicyLossConfig(**policy_loss))


def batch(seed, B=8, T=16, empty_row=False, dtype=F64, spread=0.5):
    """A random verl micro-batch: log-ratios wide enough that both clips and the dual-clip bind."""
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(B, T, generator=g, dtype=dtype) * 3
    logp = old + spread * torch.randn(B, T, generator=g, dtype=dtype)
    logp[0, :3] = old[0, :3] + torch.tensor([1.5, -1.5, 1.2], dtype=dtype)   # r ≈ 4.5, 0.22, 3.3
    adv = torch.randn(B, 1, generator=g, dtype=dtype).expand(B, T).contiguous()
    adv[0, 1:3] = -1.0                                                       # the dual-clip binds at r ≈ 3.3
    lengths = torch.randint(2, T + 1, (B,), generator=g)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    if empty_row:
        mask[-1] = False
    return old, logp, adv, mask


def loss_and_grad(fn, old, logp, *args, **kwargs):
    lp = logp.clone().requires_grad_(True)
    loss, info = fn(old, lp, *args, **kwargs)
    (grad,) = torch.autograd.grad(loss, lp)
    return loss.detach(), grad, info


# (a) discovery -------------------------------------------------------------------------------------

def test_verl_finds_the_modes_through_its_entry_point():
    eps = [ep for ep in entry_points(group="verl.plugins") if ep.value == "toy_rl.integrations.verl"]
    assert eps, "toy_rl's verl.plugins entry point is not installed: reinstall toy_rl (pip install -e .)"
    assert LOADED_BY_VERL, "importing verl did not load toy_rl.integrations.verl through its entry point"
    assert eps[0].load() is plugin                                  # what verl/__init__.py does for each one
    assert core_algos.get_policy_loss_fn("bapo") is plugin.compute_policy_loss_bapo
    assert core_algos.get_policy_loss_fn("bapo_authors") is plugin.compute_policy_loss_bapo_authors


def test_external_modules_fallback():
    from verl.utils.import_utils import import_external_libs     # what VERL_USE_EXTERNAL_MODULES calls
    import_external_libs("toy_rl.integrations.verl".split(","))
    assert core_algos.get_policy_loss_fn("bapo") is plugin.compute_policy_loss_bapo


# (b) mode bapo = toy_rl.clipping.policy_loss(BAPO()) ----------------------------------------------------

@pytest.mark.parametrize("mode", VERL_AGGREGATIONS)
@pytest.mark.parametrize("seed,empty_row", [(0, False), (1, False), (2, True)])
def test_bapo_mode_equals_policy_loss(mode, seed, empty_row):
    old, logp, adv, mask = batch(seed, empty_row=empty_row)
    fn = core_algos.get_policy_loss_fn("bapo")
    loss, grad, metrics = loss_and_grad(fn, old, logp, adv, mask, mode, actor_config(loss_mode="bapo"), None)

    agg, factor = toy_rl_equivalent(mode, mask)
    ref, ref_grad, stats = loss_and_grad(lambda o, lp: policy_loss(lp, o, adv, mask, BAPO(), agg=agg), old, logp)
    torch.testing.assert_close(loss, ref * factor, rtol=1e-6, atol=1e-9)
    torch.testing.assert_close(grad, ref_grad * factor, rtol=1e-6, atol=1e-9)
    for key in ("c_low", "c_high", "rho"):
        assert metrics[f"bapo/{key}"] == pytest.approx(stats[key], rel=1e-9)
    assert metrics["actor/pg_clipfrac"] == pytest.approx(stats["clip_frac"], rel=1e-6)
    assert metrics["actor/pg_clipfrac_lower"] == 0.0                # mode bapo: no dual-clip by default
    assert metrics["bapo/rho_reached"] == stats["rho_reached"]


def test_the_search_moves_the_bounds_here():
    """The batches above are not a degenerate case where BAPO keeps its starting bounds."""
    chosen = []
    for seed in range(3):
        old, logp, adv, mask = batch(seed)
        stats = policy_loss(logp, old, adv, mask, BAPO())[1]
        chosen.append((stats["c_low"], stats["c_high"]))
    assert any(bounds != pytest.approx((0.6, 1.2)) for bounds in chosen), chosen


def test_bapo_settings_from_the_policy_loss_config():
    old, logp, adv, mask = batch(3)
    cfg = actor_config(loss_mode="bapo", bapo_rho0=0.3, bapo_high_range=[1.1, 2.0], bapo_high_step=0.1,
                       bapo_low_range=[0.7, 0.9], bapo_low_step=0.05, bapo_order="lower_first", bapo_count="all",
                       bapo_balance="pos_neg", bapo_eps=1e-8, bapo_dual_clip=3.0)
    rule, dual = plugin.bapo_settings(cfg)
    assert rule == BAPO(rho0=0.3, low_range=(0.7, 0.9), high_range=(1.1, 2.0), low_step=0.05, high_step=0.1,
                        order="lower_first", count="all", balance="pos_neg", eps=1e-8) and dual == 3.0
    loss, grad, metrics = loss_and_grad(plugin.compute_policy_loss_bapo, old, logp, adv, mask, "token-mean", cfg, None)
    ref, ref_grad, stats = loss_and_grad(lambda o, lp: policy_loss(lp, o, adv, mask, rule, dual_clip=3.0), old, logp)
    torch.testing.assert_close((loss, grad), (ref, ref_grad), rtol=1e-6, atol=1e-9)
    assert (metrics["bapo/c_low"], metrics["bapo/c_high"]) == pytest.approx((stats["c_low"], stats["c_high"]))
    assert metrics["actor/pg_clipfrac_lower"] == pytest.approx(stats["dual_clip_frac"]) and stats["dual_clip_frac"] > 0
    # the same keys in a plain OmegaConf node, and no config at all (BAPO()'s defaults)
    node = OmegaConf.create({"clip_ratio_c": 3.0, "policy_loss": {"loss_mode": "bapo", "bapo_rho0": 0.3}})
    assert plugin.bapo_settings(node) == (BAPO(rho0=0.3), None)
    assert plugin.bapo_settings(None) == (BAPO(), None)
    assert plugin.bapo_settings(actor_config(loss_mode="bapo")) == (BAPO(), None)


def test_rollout_is_weights_scale_the_loss_and_weigh_the_masses():
    old, logp, adv, mask = batch(4)
    w = torch.rand(mask.shape, generator=torch.Generator().manual_seed(4), dtype=F64) + 0.5
    cfg = actor_config(loss_mode="bapo")
    loss, grad, metrics = loss_and_grad(plugin.compute_policy_loss_bapo, old, logp, adv, mask, "token-mean", cfg, w)
    m = mask.to(F64)
    b = BAPO().bounds(torch.exp(logp - old).reshape(1, -1), adv.reshape(1, -1), m.reshape(1, -1), weights=(m * w).reshape(1, -1))
    assert (metrics["bapo/c_low"], metrics["bapo/c_high"]) == pytest.approx((float(b.c_low), float(b.c_high)))

    def ref_fn(o, lp):
        r = torch.exp(torch.clamp(lp - o, -20, 20))
        s = torch.minimum(r * adv, torch.clamp(r, b.c_low[0], b.c_high[0]) * adv)
        return (-s * w * m).sum() / m.sum(), {}
    ref, ref_grad, _ = loss_and_grad(ref_fn, old, logp)
    torch.testing.assert_close((loss, grad), (ref, ref_grad), rtol=1e-6, atol=1e-9)


# (c) mode bapo_authors = BAPO.authors_code() ---------------------------------------------------------

@pytest.mark.parametrize("mode", VERL_AGGREGATIONS)
def test_bapo_authors_mode_equals_authors_code(mode):
    old, logp, adv, mask = batch(5)
    fn = core_algos.get_policy_loss_fn("bapo_authors")
    cfg = actor_config(loss_mode="bapo_authors", bapo_rho0=0.3)         # bapo_* keys are not read here
    loss, grad, metrics = loss_and_grad(fn, old, logp, adv, mask, mode, cfg, None)
    agg, factor = toy_rl_equivalent(mode, mask)
    ref, ref_grad, stats = loss_and_grad(
        lambda o, lp: policy_loss(lp, o, adv, mask, BAPO.authors_code(), agg=agg, dual_clip=3.0), old, logp)
    torch.testing.assert_close((loss, grad), (ref * factor, ref_grad * factor), rtol=1e-6, atol=1e-9)
    for key in ("c_low", "c_high", "rho"):
        assert metrics[f"bapo/{key}"] == pytest.approx(stats[key], rel=1e-9)
    assert metrics["actor/pg_clipfrac_lower"] == pytest.approx(stats["dual_clip_frac"], rel=1e-6)
    assert plugin.authors_settings(cfg) == (BAPO.authors_code(), 3.0)


# (d) fixed rules through our path = verl's vanilla loss ------------------------------------------------

GLOBAL_INFO = {"dp_size": 2, "batch_num_tokens": 300, "global_batch_size": 20, "loss_scale_factor": 7}


@pytest.mark.parametrize("mode", VERL_AGGREGATIONS)
@pytest.mark.parametrize("rule_name", ["symmetric", "clip-higher"])
@pytest.mark.parametrize("extras", ["plain", "is-weights", "global-batch-info"])
def test_fixed_rules_equal_verl_vanilla(mode, rule_name, extras):
    old, logp, adv, mask = batch(6, empty_row=True, spread=0.7)
    cfg = actor_config()                                      # clip_ratio 0.2, clip_ratio_high 0.28, clip_ratio_c 3
    rule = Symmetric(0.2) if rule_name == "symmetric" else ClipHigher(0.2, 0.28)
    if rule_name == "symmetric":
        cfg = FSDPActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1)
    w = torch.rand(mask.shape, generator=torch.Generator().manual_seed(6), dtype=F64) + 0.5 if extras == "is-weights" else None
    if extras == "global-batch-info":
        cfg.global_batch_info.update(GLOBAL_INFO)
    ours = loss_and_grad(plugin.compute_policy_loss_rule, old, logp, adv, mask, mode, cfg, w, rule=rule,
                         dual_clip=cfg.clip_ratio_c)
    theirs = loss_and_grad(core_algos.compute_policy_loss_vanilla, old, logp, adv, mask, mode, cfg, w)
    torch.testing.assert_close(ours[:2], theirs[:2], rtol=1e-6, atol=1e-9)
    for key, value in theirs[2].items():
        assert ours[2][key] == pytest.approx(value, rel=1e-6, abs=1e-12), key
    assert theirs[2]["actor/pg_clipfrac"] > 0 and theirs[2]["actor/pg_clipfrac_lower"] > 0   # both clips bind
    assert (ours[2]["bapo/c_low"], ours[2]["bapo/c_high"]) == pytest.approx((rule.c_low, rule.c_high))


# (e) two processes: every rank picks the bounds of the concatenated batch --------------------------------

def _concat(case):
    import _verl_gloo_worker as w
    shards = [w.shard(case, r) for r in range(w.WORLD)]
    return {k: torch.cat([s[k] for s in shards]) for k in shards[0]}


def test_two_gloo_ranks_pick_the_bounds_of_the_whole_batch(tmp_path):
    import torch.multiprocessing as mp

    import _verl_gloo_worker as w
    ctx = mp.spawn(w.run, args=(str(tmp_path / "store"), str(tmp_path)), nprocs=w.WORLD, join=False)
    deadline = time.monotonic() + 120
    while not ctx.join(timeout=1):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.terminate()
            pytest.fail("the gloo ranks did not finish in 120 s")
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(w.WORLD)]

    for case in ("bapo-token-mean", "bapo-seq-mean", "authors", "empty-rank"):
        rule, mode, dual_clip = w.CASES[case]
        agg = "seq-mean-token-mean" if mode == "seq-mean-token-mean" else "token-mean"
        b = _concat(case)
        loss, stats = policy_loss(b["log_prob"], b["old_log_prob"], b["advantages"], b["response_mask"], rule,
                                  agg=agg, dual_clip=dual_clip)
        for r, got in enumerate(ranks):
            assert "error" not in got[case], (case, r, got[case])
            assert (got[case]["bapo/c_low"], got[case]["bapo/c_high"]) == (stats["c_low"], stats["c_high"]), (case, r)
            assert got[case]["bapo/rho"] == pytest.approx(stats["rho"], rel=1e-9), (case, r)
        if mode == "token-mean":          # verl's data-parallel token-mean: the ranks' losses average to the batch's
            assert sum(g[case]["loss"] for g in ranks) / w.WORLD == pytest.approx(float(loss), rel=1e-9)

    # neither rank's own bounds are the batch's: without the all-reduce each would pick its own
    for case, agg in (("bapo-token-mean", "token-mean"), ("bapo-seq-mean", "seq-mean-token-mean")):
        for r in range(w.WORLD):
            s = w.shard(case, r)
            own = policy_loss(s["log_prob"], s["old_log_prob"], s["advantages"], s["response_mask"], BAPO(), agg=agg)[1]
            assert (own["c_low"], own["c_high"]) != (ranks[r][case]["bapo/c_low"], ranks[r][case]["bapo/c_high"]), (case, r)

    for r, got in enumerate(ranks):       # bad input on one rank: a ValueError on every rank, no hang
        assert got["nan-rank"]["error"].startswith("logp contains NaN or inf (on at least one of the 2"), got
        assert got["all-empty"]["error"].startswith("mask is all zero on all 2 data-parallel ranks"), got


# (f) bad input -----------------------------------------------------------------------------------------

def test_bad_input_gives_clear_errors():
    old, logp, adv, mask = batch(7)
    fn, cfg = plugin.compute_policy_loss_bapo, actor_config(loss_mode="bapo")
    nan = logp.clone()
    nan[1, 1] = float("nan")
    with pytest.raises(ValueError, match="^logp contains NaN or inf$"):
        fn(old, nan, adv, mask, "token-mean", cfg, None)
    with pytest.raises(ValueError, match="^old_logp contains NaN or inf$"):
        fn(nan, logp, adv, mask, "token-mean", cfg, None)
    with pytest.raises(ValueError, match="^mask is all zero: no token to train on$"):
        fn(old, logp, adv, torch.zeros_like(mask), "seq-mean-token-mean", cfg, None)
    bad_w = torch.ones_like(logp)
    bad_w[0, 0] = float("inf")
    with pytest.raises(ValueError, match="rollout_is_weights contain NaN or inf"):
        fn(old, logp, adv, mask, "token-mean", cfg, bad_w)
    with pytest.raises(ValueError, match="rollout_is_weights must be a tensor shaped like log_prob"):
        fn(old, logp, adv, mask, "token-mean", cfg, bad_w[:, :3])
    with pytest.raises(ValueError, match="loss_agg_mode must be one of verl's"):
        fn(old, logp, adv, mask, "seq-sum", cfg, None)
    with pytest.raises(ValueError, match="old_logp requires grad"):
        fn(old.requires_grad_(True), logp, adv, mask, "token-mean", cfg, None)
    with pytest.raises(ValueError, match="rho0 must lie in"):
        fn(old.detach(), logp, adv, mask, "token-mean", actor_config(loss_mode="bapo", bapo_rho0=2.0), None)


def test_float32_and_bool_mask_as_verl_passes_them():
    old, logp, adv, mask = batch(8, dtype=torch.float32)
    loss, grad, metrics = loss_and_grad(plugin.compute_policy_loss_bapo, old, logp, adv, mask, "token-mean",
                                        actor_config(loss_mode="bapo"), None)
    ref, ref_grad, stats = loss_and_grad(lambda o, lp: policy_loss(lp, o, adv, mask, BAPO()), old, logp)
    assert loss.dtype == torch.float32 and grad.dtype == torch.float32
    torch.testing.assert_close((loss, grad), (ref, ref_grad), rtol=1e-6, atol=1e-7)
    assert (metrics["bapo/c_low"], metrics["bapo/c_high"]) == (stats["c_low"], stats["c_high"])


def test_bapo_keys_survive_verls_config_instantiation():
    """The way verl builds the actor config (Hydra's instantiate of the yaml, docs/scaling_out.md):
    with the policy-loss node's _target_ pointed at BAPOPolicyLossConfig, extra bapo_* keys arrive."""
    pytest.importorskip("hydra", reason="hydra-core is not installed")
    from importlib.resources import files

    from omegaconf import open_dict
    from verl.utils.config import omega_conf_to_dataclass

    yaml = files("verl.trainer.config").joinpath("_generated_ppo_trainer.yaml")
    cfg = OmegaConf.merge(OmegaConf.load(str(yaml)), OmegaConf.from_dotlist([
        "actor_rollout_ref.actor.strategy=fsdp", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.actor.policy_loss.loss_mode=bapo",
        "actor_rollout_ref.actor.policy_loss._target_=toy_rl.integrations.verl.BAPOPolicyLossConfig"]))
    OmegaConf.set_struct(cfg, True)
    with open_dict(cfg):                                       # what Hydra's +key=value overrides do
        cfg.actor_rollout_ref.actor.policy_loss.bapo_rho0 = 0.5
        cfg.actor_rollout_ref.actor.policy_loss.bapo_high_range = [1.2, 2.0]
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    assert isinstance(actor.policy_loss, plugin.BAPOPolicyLossConfig)
    assert actor.policy_loss.loss_mode == "bapo"
    assert plugin.bapo_settings(actor) == (BAPO(rho0=0.5, high_range=(1.2, 2.0)), None)
