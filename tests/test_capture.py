"""Capture: positions, reductions, padding, early stop, shards, budgets, hook hygiene (tiny random models)."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from helpers_hooks import assert_no_hooks
from iclr26.core import UserError
from iclr26.interp.capture import Capture, RunningMoments, capture, iter_batches, select_positions
from iclr26.lm import WordTokenizer, tiny_lm

SITE = "layers.1.resid_post"


@pytest.fixture(scope="module")
def llama():
    return tiny_lm("llama", d=32, layers=3, seed=0)


def _padded(left: bool):
    """Two rows of lengths 6 and 3 padded to 6 (pad id 0), left or right."""
    g = torch.Generator().manual_seed(5)
    a, b = torch.randint(4, 64, (6,), generator=g), torch.randint(4, 64, (3,), generator=g)
    ids = torch.zeros(2, 6, dtype=torch.long)
    am = torch.zeros(2, 6, dtype=torch.long)
    ids[0], am[0] = a, 1
    sl = slice(3, 6) if left else slice(0, 3)
    ids[1, sl], am[1, sl] = b, 1
    return {"input_ids": ids, "attention_mask": am}, a, b


def _alone(model, row, site=SITE):
    return capture(model, row[None], site)[site]  # [T, d]


@pytest.mark.parametrize("family", ["llama", "gpt2", "gemma3", "bert"])
@pytest.mark.parametrize("left", [True, False])
def test_padding_is_masked_and_rows_match_unpadded(family, left):
    model = tiny_lm(family, layers=2, seed=2)
    batch, a, b = _padded(left)
    cap = capture(model, batch, SITE)
    X = cap[SITE]
    assert X.shape == (9, 32)  # 6 + 3 real tokens, pads never enter
    assert cap.index.tolist()[:6] == [[0, t] for t in range(6)]
    assert cap.token_ids.tolist() == a.tolist() + b.tolist()
    torch.testing.assert_close(X[:6], _alone(model, a), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(X[6:], _alone(model, b), atol=1e-5, rtol=1e-4)
    assert_no_hooks(model)


def test_positions_last_ints_callable_mask(llama):
    for left in (True, False):
        batch, a, b = _padded(left)
        full_a, full_b = _alone(llama, a), _alone(llama, b)
        last = capture(llama, batch, SITE, positions="last")[SITE]
        torch.testing.assert_close(last, torch.stack([full_a[-1], full_b[-1]]), atol=1e-5, rtol=1e-4)
        ints = capture(llama, batch, SITE, positions=[0, -2])[SITE]
        want = torch.stack([full_a[0], full_a[-2], full_b[0], full_b[-2]])
        torch.testing.assert_close(ints, want, atol=1e-5, rtol=1e-4)

        def skip_first(ids, am):  # every real token except each row's first one
            return (am.cumsum(1) > 1) & am.bool()

        c = capture(llama, batch, SITE, positions=skip_first)
        torch.testing.assert_close(c[SITE], torch.cat([full_a[1:], full_b[1:]]), atol=1e-5, rtol=1e-4)
        mask = torch.zeros(2, 6, dtype=torch.bool)
        mask[:, 2] = True  # on the short left-padded row this is a pad position: must be dropped
        m = capture(llama, batch, SITE, positions=mask)
        n_real = int((batch["attention_mask"][:, 2] == 1).sum())
        assert m[SITE].shape[0] == n_real
        per_batch = capture(llama, [{**batch, "capture_mask": mask}], SITE)
        assert torch.equal(per_batch[SITE], m[SITE])
    with pytest.raises(UserError, match="out of range"):
        capture(llama, batch, SITE, positions=[5])
    with pytest.raises(UserError, match="positions"):
        capture(llama, batch, SITE, positions="first")


@pytest.mark.parametrize("how", ["mean", "sum", "max", "last"])
def test_reductions_match_manual(llama, how):
    batch, a, b = _padded(left=True)
    full = [_alone(llama, a), _alone(llama, b)]
    got = capture(llama, batch, [SITE, "layers.0.attn.head_out"], reduce=how)
    ref = {
        "mean": lambda x: x.mean(0),
        "sum": lambda x: x.sum(0),
        "max": lambda x: x.amax(0),
        "last": lambda x: x[-1],
    }[how]
    torch.testing.assert_close(got[SITE], torch.stack([ref(x) for x in full]), atol=1e-5, rtol=1e-4)
    assert got["layers.0.attn.head_out"].shape == (2, 4, 8)
    assert got.n_selected.tolist() == [6, 3]
    # a row with nothing selected gives NaN (0 for sum), never a value computed from pads
    empty = torch.zeros(2, 6, dtype=torch.bool)
    empty[0, 1] = True
    e = capture(llama, batch, SITE, positions=empty, reduce=how)[SITE]
    assert torch.isfinite(e[0]).all()
    assert (e[1] == 0).all() if how == "sum" else torch.isnan(e[1]).all()


def test_max_uses_minus_inf_not_zero(llama):
    """All-negative channels must keep their (negative) max: masking with 0 would give 0."""
    batch, a, b = _padded(left=False)
    x = capture(llama, batch, SITE, reduce="max")[SITE]
    full = _alone(llama, b)
    torch.testing.assert_close(x[1], full.amax(0), atol=1e-5, rtol=1e-4)
    assert (x < 0).any()


def test_early_stop_skips_later_layers_and_head(llama):
    calls = []
    handles = [
        m.register_forward_hook(lambda m, i, o, n=n: calls.append(n))
        for n, m in [
            ("l0", llama.model.layers[0]),
            ("l2", llama.model.layers[2]),
            ("norm", llama.model.norm),
            ("head", llama.lm_head),
        ]
    ]
    try:
        ids = torch.randint(4, 64, (2, 5))
        capture(llama, ids, "layers.0.mlp.out")
        assert calls == ["l0"]
        calls.clear()
        capture(llama, ids, "embed")  # stops before layer 0 runs
        assert calls == []
        capture(llama, ids, "final_norm")
        assert calls == ["l0", "l2", "norm"]
        calls.clear()
        capture(llama, ids, "layers.0.mlp.out", stop_after=False)
        assert calls == ["l0", "l2", "norm", "head"]
    finally:
        for h in handles:
            h.remove()
    assert_no_hooks(llama)
    # a stopped forward leaves the model usable, including transformers' own output recording
    with torch.no_grad():
        out = llama(ids, output_hidden_states=True)
    assert len(out.hidden_states) == 4


def test_hooks_removed_on_exceptions_and_interrupts(llama):
    ids = torch.randint(4, 64, (2, 5))

    def bad_sink(site, acts, meta):
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        capture(llama, ids, SITE, sink=bad_sink)
    assert_no_hooks(llama)

    def batches():
        yield {"input_ids": ids}
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        capture(llama, batches(), SITE)
    assert_no_hooks(llama)
    with pytest.raises(UserError, match="unknown site"):
        capture(llama, ids, [SITE, "layers.0.bogus"])
    assert_no_hooks(llama)
    llama.train()
    capture(llama, ids, "layers.0.attn.pattern")
    assert llama.training and llama.config._attn_implementation == "sdpa"  # both restored
    llama.eval()


def test_memory_budget_raises_and_shards_stream(llama, tmp_path):
    ids = torch.randint(4, 64, (4, 8))
    batches = [{"input_ids": ids[i : i + 1]} for i in range(4)]
    mem = capture(llama, batches, [SITE, "layers.0.mlp.act"])
    with pytest.raises(UserError, match="memory_budget_bytes"):
        capture(llama, batches, SITE, memory_budget_bytes=1000)
    sh = capture(
        llama, batches, [SITE, "layers.0.mlp.act"], memory_budget_bytes=1500, shard_dir=tmp_path / "s"
    )
    assert len(sh.manifest["shards"]) >= 3 and sh.manifest["complete"]
    again = Capture.load(tmp_path / "s")
    for c in (sh, again):
        assert torch.equal(c[SITE], mem[SITE])
        assert torch.equal(c["layers.0.mlp.act"], mem["layers.0.mlp.act"])
        assert torch.equal(c.index, mem.index) and torch.equal(c.token_ids, mem.token_ids)
    assert sum(x.shape[0] for x in again.iter_shards(SITE)) == 32
    half = capture(llama, batches, SITE, shard_dir=tmp_path / "h", store_dtype=torch.float16)
    torch.testing.assert_close(half[SITE], mem[SITE], atol=2e-3, rtol=2e-3)
    with pytest.raises(UserError, match="already holds"):
        capture(llama, batches, SITE, shard_dir=tmp_path / "s")


def test_running_moments_sink(llama):
    ids = torch.randint(4, 64, (6, 5))
    batches = [{"input_ids": ids[i : i + 2]} for i in range(0, 6, 2)]
    X = capture(llama, batches, SITE)[SITE].double()
    rm = RunningMoments()
    cap = capture(llama, batches, SITE, sink=rm)
    assert len(cap) == 1 and rm.count_[SITE] == 30
    torch.testing.assert_close(rm.mean_[SITE], X.mean(0))
    torch.testing.assert_close(rm.var(SITE, ddof=1), X.var(0))


def test_captured_tensors_are_not_kept_alive(llama):
    ids = torch.randint(4, 64, (2, 5))
    cap = capture(llama, ids, SITE)
    ref = weakref.ref(cap[SITE])
    del cap
    gc.collect()
    assert ref() is None


def test_iter_batches_left_padding_and_pad_fallback(llama):
    tok = WordTokenizer([f"w{i}" for i in range(60)])
    texts = ["w1 w2 w3", "w4", "w5 w6", "w7 w8 w9 w10 w11"]
    bs = list(iter_batches(tok, texts, batch_size=2, max_length=4))
    assert [b["input_ids"].shape for b in bs] == [(2, 3), (2, 4)]
    assert bs[0]["attention_mask"][1].tolist() == [0, 0, 1]  # left padding
    cap = capture(llama, iter_batches(tok, texts, batch_size=2, max_length=4), SITE, positions="last")
    assert cap[SITE].shape == (4, 32)
    tok.pad_token = None  # GPT-2 style: pads with EOS for the call, then restores
    assert next(iter_batches(tok, texts[:2], batch_size=2))["input_ids"][1, 0].item() == tok.eos_token_id
    assert tok.pad_token is None


def test_select_positions_last_with_left_and_right_padding():
    am = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 0]])
    sel = select_positions("last", torch.zeros_like(am), am)
    assert sel.nonzero().tolist() == [[0, 3], [1, 2]]
