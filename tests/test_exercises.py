"""The self-checking exercises: every checker accepts its reference solution, rejects plausible wrong answers
with a hint, reports an unfilled stub as not attempted, never shows the solution's code; the reference solutions
agree with the library code they mirror; and the notebooks' exercise cells are wired up."""
import inspect
import math
import sys
import types
from pathlib import Path

import nbformat
import pytest
import torch

from toy_rl import exercises as exr
from toy_rl.exercises import Case, Exercise, Mistake, check, close, solution

ROOT = Path(__file__).resolve().parents[1]
ALL = [ex.name for ex in exr.exercises()]
EXPECTED = {"entropy_change_prediction", "clip_mask", "group_advantages", "data_age", "grad_rho", "bapo_step",
            "token_logprobs_from_logits", "masked_token_mean", "group_token_ages", "staleness_stats", "lora_forward",
            "answer_reward"}


def run(capsys, name, answer):
    ok = check(name, answer)
    return ok, capsys.readouterr().out


def test_the_exercises_are_registered_at_least_two_per_notebook():
    assert EXPECTED <= set(ALL)
    for nb in ("01", "02", "03", "04", "05", "06"):
        assert len(exr.exercises(nb)) >= 2
    assert len(exr.exercises("07")) >= 6            # one per practitioners' question


# ----------------------------------------------------------------------------------------- the checkers

@pytest.mark.parametrize("name", ALL)
def test_reference_solution_is_right(capsys, name):
    ok, out = run(capsys, name, solution(name))
    assert ok is True
    assert out.startswith("✓ right")
    assert "✗" not in out


@pytest.mark.parametrize("name,i", [(ex.name, i) for ex in exr.exercises() for i in range(len(ex.mistakes))])
def test_each_known_mistake_is_caught_with_its_own_hint(capsys, name, i):
    mistake = exr.get(name).mistakes[i]
    ok, out = run(capsys, name, mistake.fn)
    assert ok is False
    assert out.startswith("✗ wrong")
    assert "expected" in out and "inputs:" in out
    assert f"hint: {mistake.hint}" in out


def _raises(*args):
    raise NotImplementedError


def _ellipsis(*args):
    ...


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("stub", [_raises, _ellipsis, None], ids=["raise NotImplementedError", "...", "None"])
def test_unfilled_stub_is_not_attempted(capsys, name, stub):
    ok, out = run(capsys, name, stub)
    assert ok is False
    assert "not attempted yet" in out
    assert "✗" not in out


# plausible wrong answers that are not in the exercises' mistake lists: the general nudge must answer them
HANDWRITTEN = {
    "entropy_change_prediction": lambda z, dz: -(torch.softmax(z, -1) * torch.log_softmax(z, -1)).sum(),  # H itself
    "clip_mask": lambda r, a, lo, hi: torch.ones_like(r, dtype=torch.bool),
    "group_advantages": lambda rewards, kind="grpo": rewards - 0.5,
    "data_age": lambda t, k, mode: (t, t),
    "grad_rho": lambda r, a, lo, hi: 0.4,
    "bapo_step": lambda rho, lo, hi, *rest: (hi, lo),
    "token_logprobs_from_logits": lambda logits, ids, start, t=1.0: torch.full_like(logits[:, start:, 0], -1.0),
    "masked_token_mean": lambda values, mask, agg="token-mean": (values * mask).sum(),
    "group_token_ages": lambda lengths, budget: (len(lengths) / budget, len(lengths)),
    "staleness_stats": lambda versions, mask, current: (1.0, 1, 0.5),
    "lora_forward": lambda x, W, A, B, alpha, r: x @ W.T + (alpha / r) * (x @ A.T @ B.T) ** 2,
    "answer_reward": lambda completion, answer: 1.0,
}


@pytest.mark.parametrize("name", sorted(HANDWRITTEN))
def test_other_wrong_answers_get_the_nudge(capsys, name):
    ok, out = run(capsys, name, HANDWRITTEN[name])
    assert ok is False
    assert out.startswith("✗ wrong")
    assert f"hint: {exr.get(name).nudge}" in out


def test_an_answer_that_raises_is_reported_not_raised(capsys):
    ok, out = run(capsys, "grad_rho", lambda r, a, lo, hi: 1 / 0)
    assert ok is False
    assert "raised ZeroDivisionError" in out and "inputs:" in out
    ok, out = run(capsys, "clip_mask", lambda r, a: r)               # wrong signature
    assert ok is False and "keep the stub's signature" in out
    ok, out = run(capsys, "clip_mask", 42)                          # not a function
    assert ok is False and "expected a function" in out


def test_a_student_function_may_change_its_inputs(capsys):
    def in_place(rewards, kind="grpo"):
        rewards -= rewards.mean(-1, keepdim=True)       # mutates the checker's copy only
        return rewards if kind == "drgrpo" else rewards / (rewards.std(-1, keepdim=True) + 1e-6)
    ok, out = run(capsys, "group_advantages", in_place)
    assert ok, out


def test_numpy_and_float_answers_are_accepted(capsys):
    ref = solution("grad_rho")
    ok, out = run(capsys, "grad_rho", lambda *a: torch.tensor(ref(*a)))          # a 0-d tensor
    assert ok, out
    ga = solution("group_advantages")
    ok, out = run(capsys, "group_advantages", lambda r, k="grpo": ga(r, k).numpy().tolist())   # nested lists
    assert ok, out


def _code_lines(fn):
    """The solution's code lines (no docstring, no comments), long enough to be recognisable."""
    src = inspect.getsource(fn)
    doc = fn.__doc__ or ""
    lines = []
    for line in src.splitlines()[1:]:
        code = line.split("#")[0].strip()
        if len(code) >= 12 and code.strip('"') not in doc and not code.startswith('"""'):
            lines.append(code)
    return lines


@pytest.mark.parametrize("name", ALL)
def test_output_never_shows_the_solution_code(capsys, name):
    ex = exr.get(name)
    outputs = [run(capsys, name, solution(name))[1]]
    outputs += [run(capsys, name, m.fn)[1] for m in ex.mistakes]
    text = "\n".join(outputs)
    assert f"def {name}" not in text
    for line in _code_lines(solution(name)):
        assert line not in text, line


def test_unknown_names_and_duplicates_are_errors():
    with pytest.raises(ValueError, match="no exercise named 'nope'.*grad_rho"):
        check("nope", lambda: 0)
    twin = Exercise(name="grad_rho", notebook="99_other", title="", solution="x:y")
    with pytest.raises(ValueError, match="already registered"):
        exr.register(twin)


def test_new_exercises_plug_in_including_value_answers(capsys):
    """What a new notebook does: register an exercise whose reference lives in some module."""
    mod = types.ModuleType("toy_rl_test_answers")
    mod.POS_NEG_OF_SHARE_04 = 0.4 / 0.6
    mod.double = lambda x: 2 * x
    sys.modules[mod.__name__] = mod
    exr.register(
        Exercise(name="pos_neg_of_share", notebook="99_test", title="pos/neg for a share of 0.4",
                 solution="toy_rl_test_answers:POS_NEG_OF_SHARE_04", value=True, compare=close(rtol=1e-2),
                 mistakes=(Mistake(0.4 / 1.4, "that is share/(1 + share); pos/neg = share/(1 − share)"),),
                 nudge="pos/neg = share / (1 − share)"),
        Exercise(name="double", notebook="99_test", title="2x", solution="toy_rl_test_answers:double",
                 cases=lambda: [Case("one", (1.0,)), Case("minus", (-3.0,), note="negative numbers too")],
                 mistakes=(Mistake(lambda x: abs(2 * x), "no abs"),)),
    )
    try:
        assert [ex.name for ex in exr.exercises("99")] == ["pos_neg_of_share", "double"]
        assert run(capsys, "pos_neg_of_share", 0.667)[0] is True
        ok, out = run(capsys, "pos_neg_of_share", 0.2857)
        assert ok is False and "share/(1 + share)" in out
        ok, out = run(capsys, "pos_neg_of_share", 5.0)
        assert ok is False and "hint: pos/neg = share / (1 − share)" in out
        ok, out = run(capsys, "pos_neg_of_share", ...)
        assert ok is False and "not attempted yet" in out
        assert run(capsys, "double", lambda x: x + x)[0] is True
        ok, out = run(capsys, "double", lambda x: abs(2 * x))
        assert ok is False and "case 'minus'" in out and "note: negative numbers too" in out and "hint: no abs" in out
    finally:
        exr.unregister("pos_neg_of_share")
        exr.unregister("double")
        del sys.modules[mod.__name__]


def test_list_exercises_prints_one_line_each(capsys):
    exr.list_exercises()
    out = capsys.readouterr().out
    for name in EXPECTED:
        assert name in out


# ----------------------------------------------------------------------------------------- solutions vs the library

def test_entropy_prediction_is_the_library_covariance_and_first_order_exact():
    from toy_rl.bandit.entropy_rule import cov
    from toy_rl.bandit.policy import entropy, log_probs
    f = solution("entropy_change_prediction")
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        z = 2 * torch.randn(12, generator=g, dtype=torch.float64)
        d = torch.randn(12, generator=g, dtype=torch.float64)
        assert float(f(z, d)) == pytest.approx(-float(cov(log_probs(z), d)), rel=1e-9, abs=1e-12)
        errs = [abs(float(entropy(z + eta * d) - entropy(z)) - float(f(z, eta * d))) for eta in (1e-2, 1e-3)]
        assert errs[1] < errs[0] / 50                      # O(η²): a decade in η, two in the error


def test_clip_mask_is_where_policy_loss_sends_a_gradient():
    from toy_rl.clipping import ClipHigher, policy_loss
    f = solution("clip_mask")
    g = torch.Generator().manual_seed(1)
    for eps_low, eps_high in ((0.2, 0.2), (0.2, 0.28), (0.4, 1.0)):
        old = torch.randn(4, 50, generator=g, dtype=torch.float64)
        logp = (old + 0.4 * torch.randn(4, 50, generator=g, dtype=torch.float64)).requires_grad_(True)
        adv = torch.randn(4, 50, generator=g, dtype=torch.float64)
        loss, _ = policy_loss(logp, old, adv, torch.ones_like(old), ClipHigher(eps_low, eps_high))
        loss.backward()
        ratio = torch.exp(logp.detach() - old)
        assert torch.equal(f(ratio, adv, 1 - eps_low, 1 + eps_high), logp.grad != 0)


@pytest.mark.parametrize("kind", ["grpo", "drgrpo"])
def test_group_advantages_is_the_library_one(kind):
    from toy_rl.advantages import group_advantages
    g = torch.Generator().manual_seed(2)
    rewards = (torch.rand(16, 8, generator=g, dtype=torch.float64) < 0.3).to(torch.float64)
    assert torch.allclose(solution("group_advantages")(rewards, kind), group_advantages(rewards, kind))


@pytest.mark.parametrize("mode", ["reuse", "lag"])
@pytest.mark.parametrize("staleness", [0, 3])
def test_data_age_is_what_the_simulator_records(mode, staleness):
    from toy_rl.bandit import BanditConfig, simulate
    run = simulate(BanditConfig(steps=13, staleness=staleness, mode=mode), "symmetric", seeds=[0])
    f = solution("data_age")
    got = [f(t, staleness, mode) for t in range(13)]
    assert [a for a, _ in got] == run.metrics["staleness"][0].astype(int).tolist()
    assert [b for _, b in got] == run.metrics["rollout"][0].astype(int).tolist()


def test_grad_rho_is_the_library_gradient_carrying_share():
    from toy_rl.clipping.balance import balance_of, masses
    f = solution("grad_rho")
    g = torch.Generator().manual_seed(3)
    for c_low, c_high in ((0.8, 1.2), (0.6, 1.28), (0.9, 2.5)):
        ratio = torch.exp(0.5 * torch.randn(1, 200, generator=g, dtype=torch.float64))
        adv = torch.randn(1, 200, generator=g, dtype=torch.float64)
        pos, neg = masses(ratio, adv, torch.ones_like(ratio), c_low, c_high, "grad")
        assert f(ratio[0], adv[0], c_low, c_high) == pytest.approx(float(balance_of(pos, neg, "share")[0]), rel=1e-12)


def test_bapo_step_walks_exactly_the_path_of_bapo():
    """With ρ kept below target the loop visits every point of BAPO().path(), in order, and stops at its end."""
    from toy_rl.clipping import BAPO
    for rule in (BAPO(), BAPO(low_range=(0.7, 0.8), high_range=(1.2, 2.0), low_step=0.05, high_step=0.1, rho0=0.45)):
        step = solution("bapo_step")
        point = (rule.low_range[0], rule.high_range[0])
        visited = [point]
        for _ in range(1000):
            nxt = step(0.0, *point, rule.rho0, rule.low_range[1], rule.high_range[1], rule.low_step, rule.high_step)
            nxt = (round(nxt[0], 10), round(nxt[1], 10))
            if nxt == point:
                break
            visited.append(point := nxt)
        assert visited == rule.path()
        assert step(rule.rho0, *visited[0], rule.rho0) == visited[0]          # target met: no step


def test_token_logprobs_from_logits_is_the_scoring_pass():
    """On a GPT's logits (left-padded prompts) the solution equals toy_rl.arithmetic.model.scoring.token_logprobs, and the
    sampler's recorded log-probs of the same tokens (the on-policy ratio is 1)."""
    from toy_rl.arithmetic.model import GPT, ModelConfig, encode, left_pad, sample, token_logprobs
    f = solution("token_logprobs_from_logits")
    torch.manual_seed(4)
    model = GPT(ModelConfig(n_layer=1, n_head=2, d_model=32, block_size=32)).eval()
    ids, mask = left_pad([encode("12+34="), encode("7-3="), encode("9+1=")])
    for temperature in (1.0, 0.7):
        s = sample(model, ids, mask, 5, temperature, generator=torch.Generator().manual_seed(0))
        full_ids, full_mask = torch.cat([ids, s.tokens], 1), torch.cat([mask, s.mask.long()], 1)
        with torch.no_grad():
            mine = f(model(full_ids, full_mask).double(), full_ids, ids.shape[1], temperature)
            lib = token_logprobs(model, full_ids, full_mask, ids.shape[1], temperature=temperature)
        assert torch.allclose(mine.float(), lib, atol=1e-5)
        m = s.mask.bool()
        assert torch.allclose(mine.float()[m], s.logp[m], atol=1e-4)


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_masked_token_mean_is_the_library_aggregate(agg):
    from toy_rl.clipping.loss import aggregate
    f = solution("masked_token_mean")
    g = torch.Generator().manual_seed(5)
    for _ in range(10):
        values = torch.randn(7, 11, generator=g, dtype=torch.float64)
        mask = (torch.arange(11)[None] < torch.randint(0, 12, (7, 1), generator=g)).to(torch.float64)
        mask[0, 0] = 1.0                                     # not all empty
        assert float(f(values, mask, agg)) == pytest.approx(float(aggregate(values[None], mask[None], agg)[0]),
                                                            rel=1e-12)


@pytest.mark.parametrize("lengths,budget", [([38, 40, 41, 43], 8), ([5, 5], 8), ([16, 3, 24], 8), ([7, 9], 1),
                                            ([43, 43, 12], 4)])
def test_group_token_ages_is_what_the_loop_logs_for_one_group(lengths, budget):
    """One group written by RolloutPool, laid out by make_batch, measured by the loop's own batch_metrics."""
    from toy_rl.exercises.nb05_partial import _Scripted
    from toy_rl.rl.loop import batch_metrics
    from toy_rl.rl.rollout import Answer, Group, RolloutPool, make_batch
    pool = RolloutPool(len(lengths), max(lengths), budget)
    pool.groups.append(Group(None, [Answer([n]) for n in lengths]))
    start = 3                                                # the group enters at version 3
    for version in range(start, start + 100):
        pool.generate(_Scripted(), version)
        done = pool.pop_finished()
        if done:
            break
    batch = make_batch(done, lambda p, t: 0.0, lambda ids: "", 0)
    logged = batch_metrics(batch, version)
    mean, oldest = solution("group_token_ages")(lengths, budget)
    assert mean == pytest.approx(logged["staleness_mean"], rel=1e-6)
    assert oldest == logged["staleness_max"]


def test_staleness_stats_is_what_the_loop_logs():
    """A stream of groups through RolloutPool at budget 8 (the pool refilled every step, as BatchSource does)."""
    from toy_rl.exercises.nb05_partial import _Scripted
    from toy_rl.rl.loop import batch_metrics
    from toy_rl.rl.rollout import Answer, Group, RolloutPool, make_batch
    f = solution("staleness_stats")
    g = torch.Generator().manual_seed(6)
    pool, batches = RolloutPool(4, 43, 8), 0
    for version in range(30):
        while len(pool.groups) < 5:
            pool.groups.append(Group(None, [Answer([int(n)]) for n in torch.randint(1, 44, (4,), generator=g)]))
        pool.generate(_Scripted(), version)
        done = pool.pop_finished()
        if done:
            batch = make_batch(done, lambda p, t: 0.0, lambda ids: "", 0)
            logged = batch_metrics(batch, version)
            mean, oldest, mixed = f(batch.version, batch.response_mask, version)
            assert mean == pytest.approx(logged["staleness_mean"], rel=1e-6)
            assert oldest == logged["staleness_max"]
            assert mixed == pytest.approx(logged["mixed_versions"], rel=1e-12)
            batches += 1
    assert batches >= 10


def test_lora_forward_is_peft_lora_linear():
    peft = pytest.importorskip("peft")
    f = solution("lora_forward")

    class OneLayer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(10, 6, bias=False)

        def forward(self, x):
            return self.proj(x)

    torch.manual_seed(7)
    model = peft.get_peft_model(OneLayer().double(), peft.LoraConfig(r=4, lora_alpha=8, target_modules=["proj"]))
    layer = model.base_model.model.proj
    with torch.no_grad():
        layer.lora_B["default"].weight.normal_()            # peft starts B at 0: make the update visible
        x = torch.randn(3, 5, 10, dtype=torch.float64)
        expected = model.eval()(x)
    W, A, B = (m.weight.detach() for m in (layer.base_layer, layer.lora_A["default"], layer.lora_B["default"]))
    assert torch.allclose(f(x, W, A, B, 8, 4), expected, atol=1e-12)


def test_lora_check_says_so_when_peft_is_missing(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "peft", None)           # import peft -> ImportError
    ok, out = run(capsys, "lora_forward", solution("lora_forward"))
    assert ok is True and "peft is not installed" in out


def test_answer_reward_is_the_task_reward():
    from toy_rl.lm.prompts import int_reward
    from toy_rl.lm.tasks import ArithmeticTask
    from toy_rl.arithmetic.tasks.base import Problem
    f = solution("answer_reward")
    task = ArithmeticTask()
    texts = [" 85\n", " 85\n1 + 2 = 3", "47 + 38 = 85", " 850", " -85", "\n85", "<|im_end|>85", " 85<|im_end|>",
             " eighty-five", "", " 8 5", "85 apples", " 085"]
    for text in texts:
        for answer in ("85", "-85"):
            assert f(text, answer) == task.reward(Problem("47 + 38 =", answer), text) == int_reward(text, int(answer))


# ----------------------------------------------------------------------------------------- the notebooks

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
WITH_EXERCISES = [p for p in NOTEBOOKS
                  if any("exercise-check" in c.metadata.get("tags", []) for c in nbformat.read(p, as_version=4).cells)]


def _exercise_cells(path):
    nb = nbformat.read(path, as_version=4)
    return [(i, c) for i, c in enumerate(nb.cells) if any(t.startswith("exercise-") for t in c.metadata.get("tags", []))]


def test_notebooks_01_to_07_have_exercises():
    names = {p.stem[:2] for p in WITH_EXERCISES}
    assert {"01", "02", "03", "04", "05", "06", "07"} <= names


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=[p.name for p in WITH_EXERCISES])
def test_exercise_cells_come_as_task_stub_check(path):
    cells = _exercise_cells(path)
    tags = [c.metadata["tags"][0] for _, c in cells]
    assert tags == ["exercise-task", "exercise-stub", "exercise-check"] * (len(tags) // 3)
    for k in range(0, len(cells), 3):
        (i, task), (j, stub), (l, chk) = cells[k:k + 3]
        assert (j, l) == (i + 1, i + 2) and task.cell_type == "markdown" and task.source.startswith("### Exercise")
        assert "raise NotImplementedError" in stub.source and "TODO" in stub.source
        name = chk.source.split('check("')[1].split('"')[0]
        assert f"def {name}(" in stub.source
        assert exr.get(name).notebook == path.stem
        ref = inspect.signature(solution(name))
        ns = {}
        exec(stub.source, ns)
        assert inspect.signature(ns[name]) == ref, "the stub's signature must match the reference's"
    nb = nbformat.read(path, as_version=4)
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assert "SOLUTIONS = False" in params.source


@pytest.mark.parametrize("solutions", [False, True], ids=["students", "instructors"])
@pytest.mark.parametrize("path", WITH_EXERCISES, ids=[p.name for p in WITH_EXERCISES])
def test_exercise_cells_run_on_their_own(capsys, path, solutions):
    """The stub and check cells, executed alone: unfilled stubs say "not attempted yet", SOLUTIONS = True passes."""
    ns = {"SOLUTIONS": solutions}
    checks = 0
    for _, cell in _exercise_cells(path):
        if cell.cell_type == "code":
            exec(cell.source, ns)
            checks += "exercise-check" in cell.metadata["tags"]
    out = capsys.readouterr().out
    verdict = "✓ right" if solutions else "not attempted yet"
    assert out.count(verdict) == checks and "✗" not in out


def test_every_registered_exercise_is_in_its_notebook():
    present = {p.stem: p for p in NOTEBOOKS}
    for ex in exr.exercises():
        if ex.notebook.startswith("99"):
            continue
        assert ex.notebook in present, f"{ex.name}: notebook {ex.notebook} not found"
        text = present[ex.notebook].read_text()
        assert f'check(\\"{ex.name}\\"' in text, f"{ex.name} has no check cell in {ex.notebook}"


def test_no_nan_in_fixed_case_references():
    for ex in exr.exercises():
        for case in ex.cases():
            out = exr.framework.as_array(ex.reference()(*case.args)).astype(float)
            assert not any(math.isnan(v) for v in out.reshape(-1)), (ex.name, case.label)


def test_the_course_guide_lists_every_exercise():
    guide = (ROOT / "notebooks" / "README.md").read_text()
    for ex in exr.exercises():
        if not ex.notebook.startswith("99"):
            assert f"`{ex.name}`" in guide, f"notebooks/README.md does not list exercise {ex.name}"
