"""iclr26.rl (P14): GRPO / AMPO advantages against hand-computed groups and a per-group transcription of the
authors' verl code, the reply-format parser, the reward, the negotiation environment and the mode policy."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import numpy as np
import pytest
import torch

from iclr26.core.errors import UserError
from iclr26.rl import (
    NegotiationEnv,
    ampo_advantages,
    evaluate_policy,
    format_reply,
    grpo_advantages,
    mode_advantages,
    parse_mode,
    sotopia_style_reward,
    split_reply,
    train_mode_policy,
)
from iclr26.rl.mode_policy import _shuffle_within_groups
from iclr26.rl.reward import answer_length_factor, scaled_gain

EPS = 1e-6


# ---------------------------------------------------------------------------- reference oracle
def _official_like(rewards, lengths, levels, index):
    """Per-group loop written from the authors' compute_ampo_outcome_advantage / compute_mode_adv."""
    scores = torch.as_tensor(rewards, dtype=torch.float32).clone()
    by = defaultdict(list)
    for i, g in enumerate(index):
        by[g].append(i)
    out = torch.zeros_like(scores)
    for ids in by.values():
        r = scores[ids]
        if len(ids) == 1:
            mean, std = torch.tensor(0.0), torch.tensor(1.0)
        else:
            mean, std = torch.mean(r), torch.std(r)
        term = {}
        lv = [levels[i] for i in ids]
        if len(ids) > 1 and -1 not in lv and len(set(lv)) == 4 and all(lv.count(k) >= 2 for k in set(lv)):
            order = list(dict.fromkeys(lv))
            Rm = [torch.mean(torch.tensor([float(scores[i]) for i in ids if levels[i] == k])) for k in order]
            Lm = [torch.mean(torch.tensor([float(lengths[i]) for i in ids if levels[i] == k])) for k in order]
            mr, sr = torch.mean(torch.tensor(Rm)), torch.std(torch.tensor(Rm))
            ml, sl = torch.mean(torch.tensor(Lm)), torch.std(torch.tensor(Lm))
            tie = all(x == mr for x in Rm)
            for j, k in enumerate(order):
                term[k] = torch.tanh(-(Lm[j] - ml) / (sl + EPS)) if tie else (Rm[j] - mr) / (sr + EPS)
        for i in ids:
            out[i] = (scores[i] - mean) / (std + EPS) + (term[levels[i]] if term else 0.0)
    return out


# ---------------------------------------------------------------------------- GRPO by hand
def test_grpo_hand_group_unbiased_std():
    a = grpo_advantages([1.0, 0.0, 0.0, 1.0], [0, 0, 0, 0])
    expect = 0.5 / (math.sqrt(1 / 3) + EPS)  # unbiased std of {0, 0, 1, 1} is sqrt(1/3)
    assert torch.allclose(a, torch.tensor([expect, -expect, -expect, expect]), atol=1e-6)
    assert a.dtype == torch.float32


def test_grpo_group_of_one_and_zero_variance():
    a = grpo_advantages([0.7, 0.5, 0.5, 0.5], [9, 3, 3, 3])
    assert a[0].item() == pytest.approx(0.7 / (1 + EPS))  # group of one: mean 0, std 1
    assert torch.equal(a[1:], torch.zeros(3))  # zero variance: 0


def test_grpo_format_penalty_inflates_std():
    a = grpo_advantages([1.0, 0.0, 1.0, 0.0], [0] * 4)
    b = grpo_advantages([1.0, 0.0, 1.0, -2.0], [0] * 4)
    assert b[0] < a[0]  # the -2 inflates the group std and shrinks the others' advantages


# ---------------------------------------------------------------------------- AMPO by hand
MODES8 = [1, 1, 2, 2, 3, 3, 4, 4]


def test_ampo_all_modes_tie_uses_tanh_length_term():
    L = [10, 10, 20, 20, 30, 30, 40, 40]
    a = ampo_advantages([0.5] * 8, L, MODES8, [0] * 8)
    s_L = math.sqrt((15**2 + 5**2 + 5**2 + 15**2) / 3)
    want = [math.tanh(-(lm - 25) / (s_L + EPS)) for lm in (10, 20, 30, 40)]
    assert torch.allclose(a, torch.tensor([w for w in want for _ in (0, 1)]), atol=1e-6)
    assert a[0] > a[2] > 0 > a[4] > a[6]  # shorter modes win the tie
    t = mode_advantages([0.5] * 8, L, MODES8, [0] * 8)
    assert bool(t.tie[0]) and bool(t.gate_on[0])


def test_ampo_reward_term_by_hand():
    r = [0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    a = ampo_advantages(r, [5] * 8, MODES8, [0] * 8)
    Rm = [0.0, 0.5, 1.0, 1.0]
    mu = sum(Rm) / 4
    s = math.sqrt(sum((x - mu) ** 2 for x in Rm) / 3)
    g_mean, g_std = 5 / 8, math.sqrt((3 * (5 / 8) ** 2 + 5 * (3 / 8) ** 2) / 7)
    want = [(x - g_mean) / (g_std + EPS) + (Rm[m - 1] - mu) / (s + EPS) for x, m in zip(r, MODES8, strict=True)]
    assert torch.allclose(a, torch.tensor(want), atol=1e-5)


@pytest.mark.parametrize("modes", [
    [1, 2, 2, 3, 3, 4, 4, 4],  # mode 1 only once: gate closed
    [1, 1, 2, 2, 3, 3, 4, -1],  # a format failure in the group
    [1, 1, 2, 2, 3, 3, 3, 3],  # mode 4 absent
])  # fmt: skip
def test_ampo_equals_grpo_when_gate_closed(modes):
    r = [0.3, 0.9, 0.1, 0.6, 0.6, 0.2, 0.8, -2.0 if -1 in modes else 0.4]
    assert torch.equal(ampo_advantages(r, list(range(8)), modes, [0] * 8), grpo_advantages(r, [0] * 8))
    assert not bool(mode_advantages(r, list(range(8)), modes, [0] * 8).gate_on[0])


def test_ampo_gate_off_is_grpo_everywhere():
    rng = np.random.default_rng(0)
    r, L, m, g = rng.random(64), rng.integers(1, 500, 64), rng.integers(1, 5, 64), np.repeat(np.arange(8), 8)
    assert torch.equal(ampo_advantages(r, L, m, g, gate="off"), grpo_advantages(r, g))


def test_tie_break_off_and_relaxed_gate():
    L = [10, 10, 20, 20, 30, 30, 40, 40]
    assert torch.equal(ampo_advantages([0.5] * 8, L, MODES8, [0] * 8, tie_break=False), torch.zeros(8))
    # relaxed: modes 1 and 2 occur twice, 3 once -> computed over {1, 2}; mode 3 gets 0
    r = [0.0, 0.0, 1.0, 1.0, 0.5]
    t = mode_advantages(r, [1] * 5, [1, 1, 2, 2, 3], [0] * 5, gate="relaxed")
    s = math.sqrt(0.5)  # unbiased std of {0, 1}
    assert torch.allclose(t.per_sample, torch.tensor([-0.5 / s, -0.5 / s, 0.5 / s, 0.5 / s, 0.0]), atol=1e-5)
    assert not bool(mode_advantages(r, [1] * 5, [1, 1, 2, 2, 3], [0] * 5).gate_on[0])


@pytest.mark.parametrize("discrete", [True, False])
def test_matches_official_transcription_on_random_batches(discrete):
    rng = np.random.default_rng(1)
    n_groups, k = 40, 16
    g = np.repeat(rng.permutation(1000)[:n_groups], k)  # arbitrary ids
    if discrete:  # exactly representable rewards, as the reward's discrete values often are: ties happen
        r = rng.choice([0.25, 0.5, 0.75], size=n_groups * k, p=[0.05, 0.05, 0.9]).astype(np.float32)
    else:
        r = rng.random(n_groups * k).astype(np.float32)
    m = rng.integers(1, 5, n_groups * k)
    m[rng.random(n_groups * k) < 0.01] = -1
    L = rng.integers(1, 600, n_groups * k)
    got = ampo_advantages(r, L, m, g)
    want = _official_like(r, L, m.tolist(), g.tolist())
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-6)  # within float32 rounding (per-mode sums)
    gate = mode_advantages(r, L, m, g).gate_on
    assert gate.any() and not gate.all()
    if discrete:
        assert torch.equal(got, want)  # bit for bit on exactly representable rewards
        assert mode_advantages(r, L, m, g).tie.any()


def test_unequal_group_sizes_match_transcription():
    rng = np.random.default_rng(2)
    g = np.r_[np.zeros(9), np.ones(12), np.full(1, 2), np.full(8, 3)].astype(int)
    r = rng.random(g.size).astype(np.float32)
    m = np.r_[[1, 1, 2, 2, 3, 3, 4, 4, 4], rng.integers(1, 5, 12), [2], [1, 1, 2, 2, 3, 3, 4, 4]]
    L = rng.integers(1, 300, g.size)
    assert torch.allclose(ampo_advantages(r, L, m, g), _official_like(r, L, m.tolist(), g.tolist()), atol=1e-6)


def test_advantage_input_errors():
    with pytest.raises(UserError, match="group_ids"):
        grpo_advantages([1.0, 2.0], [0])
    with pytest.raises(UserError, match="modes must be"):
        ampo_advantages([1.0, 2.0], [1, 1], [0, 5], [0, 0])
    with pytest.raises(UserError, match="finite"):
        grpo_advantages([float("nan")], [0])
    with pytest.raises(UserError, match="gate"):
        mode_advantages([1.0], [1], [1], [0], gate="sometimes")
    with pytest.raises(UserError, match="1-D"):
        grpo_advantages([[1.0]], [[0]])


# ---------------------------------------------------------------------------- reward and format
def test_reward_shaping_by_hand():
    assert scaled_gain(4, 6) == pytest.approx(2 / 6)
    assert scaled_gain(4, 3) == pytest.approx(-1 / 4)
    assert scaled_gain(4, 4) == 0.0
    assert answer_length_factor([100, 175, 250, 325, 400]).tolist() == pytest.approx([1, 1, 0.5, 0, 0])
    assert sotopia_style_reward(4, 6, 250) == pytest.approx((2 / 6 + 1) / 2 * 0.5)
    with pytest.raises(UserError):
        sotopia_style_reward(11, 6, 10)


@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_parse_mode_well_formed(level):
    text = format_reply(level, "I can do 40 dollars.", {"Intent": "close the deal"})
    assert parse_mode(text) == level
    think, answer = split_reply(text)
    assert answer == '"I can do 40 dollars."'
    assert (think == "") == (level == 1)


def test_parse_mode_format_failures():
    ok = format_reply(3, "Deal.")
    assert parse_mode(ok) == 3
    assert parse_mode("Sure, deal.") == -1  # no level header
    assert parse_mode(ok.replace('"Deal."', "Deal.")) == -1  # answer not quoted
    assert parse_mode(ok.replace("\n\nAssess:\n", "\n\nStrategy:\n", 1)) == -1  # section duplicated / missing
    swapped = ok.replace("History:", "TMP:").replace("\n\nGoal:\n", "\n\nHistory:\n").replace("TMP:", "Goal:")
    assert parse_mode(swapped) == -1  # sections out of order
    assert parse_mode(ok + "\n<|end_of_answer|>") == -1  # a tag twice
    l2 = format_reply(2, "Hi.")
    assert parse_mode(l2.replace("Thinking Level: 2", "Thinking Level: 3")) == -1  # L3 header, L2 sections


# ---------------------------------------------------------------------------- environment
def test_env_expected_reward_matches_monte_carlo():
    env = NegotiationEnv()
    rng = np.random.default_rng(0)
    st = env.sample_states(6, rng)
    er = env.expected_reward(st)
    n = 40_000
    for i in range(len(st)):
        sub = type(st)(**{k: np.repeat(v[i : i + 1], n) for k, v in vars(st).items()})
        for m in (1, 4):
            roll = env.step(sub, np.full(n, m), rng)
            assert roll.rewards.mean() == pytest.approx(er[i, m - 1], abs=4 * roll.rewards.std() / np.sqrt(n))


def test_env_difficulty_oracle_and_balance():
    env = NegotiationEnv()
    st = env.sample_states(30_000, np.random.default_rng(1))
    d = st.difficulty
    assert np.allclose(np.bincount(d) / len(d), 1 / 3, atol=0.02)
    best = env.best_modes(st)
    assert set(best[d == 0]) == {1} and set(best[d == 1]) == {3} and set(best[d == 2]) == {4}
    easy = (st.opponent == 0) & (st.gap < 0.4)
    assert np.array_equal(d == 0, easy)
    un = NegotiationEnv(balanced=False).sample_states(30_000, np.random.default_rng(1)).difficulty
    assert (un == 1).mean() == pytest.approx(1 - 2 * 0.4 / 3, abs=0.02)


def test_env_format_failures_and_thinking_tokens():
    env = NegotiationEnv(format_failure=0.5)
    st = env.sample_states(4000, np.random.default_rng(2))
    roll = env.step(st, np.full(4000, 2), np.random.default_rng(3))
    fail = roll.modes == -1
    assert 0.45 < fail.mean() < 0.55 and np.all(roll.rewards[fail] == -2.0)
    assert roll.think_tokens.mean() == pytest.approx(60, abs=2)
    assert np.all(NegotiationEnv().step(st, np.ones(4000, int), np.random.default_rng(3)).think_tokens == 0)


# ---------------------------------------------------------------------------- policy
def test_shuffle_within_groups_keeps_each_group():
    x = torch.arange(12)
    y = _shuffle_within_groups(x, 3, torch.Generator().manual_seed(0))
    assert not torch.equal(x, y)
    for g in range(3):
        assert sorted(y[4 * g : 4 * g + 4].tolist()) == list(range(4 * g, 4 * g + 4))


def test_training_is_deterministic_and_learns():
    env = NegotiationEnv()
    ev = env.sample_states(500, np.random.default_rng(5))
    p1, t1 = train_mode_policy(env, estimator="ampo", steps=40, seed=3, eval_states=ev)
    p2, t2 = train_mode_policy(env, estimator="ampo", steps=40, seed=3, eval_states=ev)
    assert torch.equal(p1.W, p2.W) and t1.reward == t2.reward
    uniform = env.expected_reward(ev).mean()
    assert evaluate_policy(p1, env, ev)["reward"] > uniform + 0.01
    assert t1.gate_on[0] > 0  # the mode term acts while the policy still covers all modes
    assert t1.eval_steps[0] == 0 and t1.eval_steps[-1] == 40


def test_think_penalty_cuts_tokens():
    env = NegotiationEnv()
    ev = env.sample_states(500, np.random.default_rng(5))
    base, _ = train_mode_policy(env, estimator="grpo", steps=60, seed=1)
    pen, _ = train_mode_policy(env, estimator="grpo", steps=60, seed=1, think_penalty=0.5)
    assert evaluate_policy(pen, env, ev)["think"] < evaluate_policy(base, env, ev)["think"] - 50


def test_policy_errors():
    with pytest.raises(UserError, match="estimator"):
        train_mode_policy(NegotiationEnv(), estimator="ppo")
    with pytest.raises(UserError):
        NegotiationEnv(success=[[0.5] * 4])


# ---------------------------------------------------------------------------- TRL integration
@pytest.mark.optional
@pytest.mark.parametrize("gate", ["strict", "relaxed"])
def test_trl_trainer_uses_ampo_advantages(tmp_path, gate):
    pytest.importorskip("trl")
    from datasets import Dataset
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from trl import GRPOConfig

    from iclr26.lm.organism import WordTokenizer
    from iclr26.rl.trl_ampo import AMPOGRPOTrainer

    words = [f"w{i}" for i in range(40)]
    tok = WordTokenizer(words + ["Thinking", "Level:", "<|begin_of_answer|>", "<|end_of_answer|>"])
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                         max_position_embeddings=64, pad_token_id=tok.pad_token_id,
                                         eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id))  # fmt: skip
    model.save_pretrained(tmp_path / "policy")  # TRL rebuilds the reference model from the policy's path
    tok.save_pretrained(tmp_path / "policy")
    seen = []

    def reward(prompts, completions, **kw):
        r = [float(c.split().count("w1") + c.split().count("w2")) / 4 for c in completions]
        seen.append((list(completions), r))
        return r

    # random words never pass parse_mode, so the test parses modes itself. Relaxed gate: modes spread over 1..4 by
    # the text (the gate opens often in groups of 8). Strict gate (the paper's): each group of 8 gets modes
    # 1,1,2,2,3,3,4,4 in parse order, so every mode occurs twice and the gate is on in every group
    if gate == "relaxed":
        parser = lambda text: 1 + sum(map(ord, text)) % 4  # noqa: E731
    else:
        order = itertools.cycle([1, 1, 2, 2, 3, 3, 4, 4])
        parser = lambda text: next(order)  # noqa: E731
    args = GRPOConfig(output_dir=str(tmp_path / "out"), max_steps=2, per_device_train_batch_size=32, num_generations=8,
                      max_completion_length=12, beta=0.001, scale_rewards="group", learning_rate=1e-3,
                      report_to="none", use_cpu=True, save_strategy="no", logging_steps=1, seed=0,
                      temperature=1.0, dataloader_num_workers=0)  # fmt: skip
    ds = Dataset.from_dict({"prompt": [" ".join(words[i : i + 3]) for i in range(0, 12, 3)]})  # 4 prompts
    trainer = AMPOGRPOTrainer(model=str(tmp_path / "policy"), reward_funcs=reward, args=args, train_dataset=ds, processing_class=tok,
                              mode_parser=parser, ampo_gate=gate)  # fmt: skip
    trainer.train()
    last = trainer.last_ampo
    comps, r = seen[-1]
    groups = torch.arange(len(r)) // 8  # TRL's groups: 8 consecutive completions of one prompt
    if gate == "relaxed":
        modes = torch.tensor([parser(c) for c in comps])
        assert torch.equal(last["modes"], modes)
    else:
        modes = last["modes"]
        for g in range(len(r) // 8):  # every mode twice in every group: the strict gate is on everywhere
            assert torch.equal(torch.bincount(modes[groups == g], minlength=5)[1:], torch.full((4,), 2))
    assert torch.allclose(last["rewards"], torch.tensor(r))
    want = ampo_advantages(torch.tensor(r), last["lengths"], modes, groups, gate=gate)
    assert torch.equal(last["advantages"], want)
    assert not torch.equal(want, grpo_advantages(torch.tensor(r), groups))  # the mode term acted
    assert len(seen) == 2 and len(r) == 32
    logged = [h for h in trainer.state.log_history if "ampo/gate_on" in h]
    assert logged and all(0 <= h["ampo/gate_on"] <= 1 for h in logged)
    if gate == "strict":
        assert all(h["ampo/gate_on"] == 1.0 for h in logged)


@pytest.mark.optional
def test_trl_trainer_refuses_batch_scaling(tmp_path):
    pytest.importorskip("trl")
    from trl import GRPOConfig

    from iclr26.rl.trl_ampo import AMPOGRPOTrainer, completion_text

    assert completion_text([{"role": "assistant", "content": "hi"}]) == "hi"
    args = GRPOConfig(output_dir=str(tmp_path), scale_rewards="batch", report_to="none", use_cpu=True,
                      per_device_train_batch_size=4, num_generations=4)  # fmt: skip
    with pytest.raises((UserError, Exception)):
        AMPOGRPOTrainer(model=None, reward_funcs=lambda **k: [0.0], args=args)


def test_constant_group_exactly_zero_and_robust_ties():
    x = 5 / 6  # eight float32 copies do not average back to x exactly
    a = grpo_advantages([x] * 8, [0] * 8)
    assert torch.equal(a, torch.zeros(8))
    xs = torch.tensor([x] * 8, dtype=torch.float32)
    assert float(xs.mean()) != float(xs[0])  # the residue the authors' code divides by (std + eps)
    r = [2 / 3] * 10
    modes, L = [1, 1, 2, 2, 3, 3, 4, 4, 4, 4], [0, 0, 60, 60, 180, 180, 400, 400, 400, 400]
    exact = mode_advantages(r, L, modes, [0] * 10)
    robust = mode_advantages(r, L, modes, [0] * 10, exact_ties=False)
    assert bool(robust.tie[0]) and robust.per_sample[0] > 0 > robust.per_sample[-1]
    if not bool(exact.tie[0]):  # float32 rounding split the tie: the authors' rule sees tiny reward gaps
        assert not torch.equal(exact.per_sample, robust.per_sample)
