"""iclr26.interp.planning: transcoder training, planning-latent selection, random baselines and the
all-effects / direct interventions, each against a hand-computed oracle on tiny models."""

import pytest
import torch

from helpers_hooks import assert_no_hooks
from iclr26.core.errors import UserError
from iclr26.data.planning import AN_ITEMS, PlanningGrammar, an_article, an_prompt
from iclr26.interp.capture import capture
from iclr26.interp.interventions import patch, steer
from iclr26.interp.planning import (
    article_prob,
    context_hits,
    edited_logits,
    last_position_latents,
    lens_top_tokens,
    masks_to_mult,
    mlp_pairs,
    random_latents,
    select_planning_latents,
    train_transcoder,
)
from iclr26.interp.sae import SparseDictionary
from iclr26.lm import tiny_lm


def _random_tc(d: int, n: int, layer: int, seed: int, k: int = 6) -> SparseDictionary:
    g = torch.Generator().manual_seed(seed)
    tc = SparseDictionary(d, n, activation="topk", k=k, apply_b_dec_to_input=False,
                          input_site=f"layers.{layer}.mlp.in", output_site=f"layers.{layer}.mlp.out")
    with torch.no_grad():
        tc.W_enc_T.copy_(torch.randn(n, d, generator=g))
        tc.b_enc.copy_(torch.rand(n, generator=g))  # most latents active, so edits have something to act on
        tc.W_dec.copy_(0.3 * torch.randn(n, d, generator=g))
        tc.b_dec.copy_(0.1 * torch.randn(d, generator=g))
    return tc


@pytest.fixture(scope="module")
def setup():
    model = tiny_lm("llama", d=32, layers=2, vocab=40, seed=3)
    tcs = {0: _random_tc(32, 48, 0, 1), 1: _random_tc(32, 48, 1, 2)}
    ids = torch.randint(4, 40, (5, 6), generator=torch.Generator().manual_seed(0))
    return model, tcs, ids


def _plain(model, ids, am=None):
    # the same LM-head call as edited_logits (logits of the last position only): an [B*T, d] and a [B, d]
    # head matmul may round differently on another machine's BLAS, which made an identity edit look inexact there
    import inspect

    kw = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=am, **kw).logits[:, -1].float()


def _clean_site(model, ids, site):
    return capture(model, ids, site)[site].reshape(ids.shape[0], ids.shape[1], -1)


# ---------------------------------------------------------------------------------------------- transcoders
def test_train_transcoder_recovers_a_sparse_map():
    # X and Y share sparse codes through different dictionaries: a transcoder can explain Y from X
    g = torch.Generator().manual_seed(0)
    n_true, d = 24, 16
    codes = torch.rand(4000, n_true, generator=g) * (torch.rand(4000, n_true, generator=g) < 0.12)
    A, B = torch.randn(n_true, d, generator=g), torch.randn(n_true, d, generator=g)
    X, Y = codes @ A, codes @ B + 0.01 * torch.randn(4000, d, generator=g)
    tc, st = train_transcoder(X, Y, 64, 6, steps=600, batch_size=256, lr=3e-3, seed=0)
    assert st["fvu"] < 0.15, st
    assert st["l0"] <= 6
    torch.testing.assert_close(tc.W_dec.norm(dim=1), torch.ones(64), atol=1e-5, rtol=0)
    assert not tc.apply_b_dec_to_input and tc.d_out == d
    # a permuted target (same marginals, no relation to X) cannot be explained: the fit is about the map
    _, st_perm = train_transcoder(X, Y[torch.randperm(4000, generator=g)], 64, 6, steps=600, batch_size=256,
                                  lr=3e-3, seed=0)
    assert st_perm["fvu"] > 0.8
    # deterministic
    tc2, st2 = train_transcoder(X, Y, 64, 6, steps=600, batch_size=256, lr=3e-3, seed=0)
    assert torch.equal(tc.W_dec, tc2.W_dec) and st == st2


def test_train_transcoder_rejects_bad_input():
    X = torch.randn(10, 4)
    with pytest.raises(UserError, match="same N"):
        train_transcoder(X, torch.randn(9, 4), 8, 2)
    with pytest.raises(UserError, match="k <= n_latents"):
        train_transcoder(X, X, 8, 9)
    with pytest.raises(UserError, match="positive"):
        train_transcoder(X, X, 8, 2, lr=0.0)


def test_mlp_pairs_match_the_modules(setup):
    model, _, ids = setup
    pairs = mlp_pairs(model, ids, [1])
    X, Y = pairs[1]
    mlp = model.model.layers[1].mlp
    with torch.no_grad():
        torch.testing.assert_close(mlp(X), Y, atol=1e-5, rtol=1e-5)  # mlp.out = mlp(mlp.in)
    assert X.shape == (ids.numel(), 32)


# ---------------------------------------------------------------------------------------------- selection
def test_last_position_latents_with_left_padding(setup):
    model, tcs, ids = setup
    lat = last_position_latents(model, tcs, ids)
    x_in = _clean_site(model, ids, "layers.1.mlp.in")[:, -1]
    torch.testing.assert_close(lat[1], tcs[1].encode(x_in))
    # a left-padded row gives the same latents as the unpadded prompt alone (up to float noise)
    short = ids[:1, 2:]
    padded = torch.cat([torch.zeros(1, 2, dtype=torch.long), short], 1)
    am = torch.cat([torch.zeros(1, 2, dtype=torch.long), torch.ones(1, 4, dtype=torch.long)], 1)
    a = last_position_latents(model, tcs, short)
    b = last_position_latents(model, tcs, padded, am)
    torch.testing.assert_close(a[0], b[0], atol=1e-4, rtol=1e-4)
    with pytest.raises(UserError, match="left padding"):
        last_position_latents(model, tcs, padded.flip(1), am.flip(1))


def test_lens_top_tokens_by_hand():
    tc = SparseDictionary(2, 3, d_out=2, activation="relu", apply_b_dec_to_input=False)
    with torch.no_grad():
        tc.W_dec.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, -1.0]]))
    W_U = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 2.0]])
    # logits per latent: l0 -> [1, 0, 1, -1]; l1 -> [0, 1, 1, 2]; l2 -> [1, -1, 0, -3]
    top = lens_top_tokens(tc, W_U, top=2)
    assert set(top[0].tolist()) == {0, 2}
    assert top[1, 0] == 3 and int(top[1, 1]) in (1, 2)  # tokens 1 and 2 tie
    assert top[2].tolist() == [0, 2]
    assert lens_top_tokens(tc, W_U, top=1, sign="neg")[:, 0].tolist() == [3, 0, 3]
    # candidates restrict the ranking; a final-norm weight rescales coordinates first
    assert lens_top_tokens(tc, W_U, top=1, candidates=[1, 3])[:, 0].tolist() == [1, 3, 1]
    norm = torch.nn.LayerNorm(2)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([1.0, 0.0]))
    assert lens_top_tokens(tc, W_U, top=1, candidates=[1, 3], final_norm=norm)[:, 0].tolist() == [1, 1, 1]
    with pytest.raises(UserError, match="unembed"):
        lens_top_tokens(tc, torch.zeros(4, 3))


def test_select_planning_latents_by_hand():
    lat = {0: torch.tensor([[1.0, 0.0, 2.0], [0.5, 0.5, 0.0]])}
    tops = {0: torch.tensor([[7, 8], [7, 9], [9, 9]])}  # latent j promotes these tokens
    sel = select_planning_latents(lat, tops, [7, 9])
    # row 0 plans 7: latents 0 (active) and 1 (inactive) promote it -> only 0; row 1 plans 9: latent 1 (active)
    assert sel[0].tolist() == [[True, False, False], [False, True, False]]
    extra = {0: torch.tensor([[False, False, True], [False, False, True]])}
    sel = select_planning_latents(lat, tops, [7, 9], extra=extra)
    assert sel[0].tolist() == [[True, False, True], [False, True, False]]  # extra only where active


def test_context_hits_by_hand():
    tokens = torch.tensor([[5, 6, 7, 8, 9], [1, 1, 1, 1, 6]])
    F = torch.zeros(2, 5, 2)
    F[0, 0, 0], F[1, 2, 0] = 3.0, 2.0  # latent 0 peaks at token 5 (row 0) and in the middle of row 1
    F[1, 4, 1] = 1.0  # latent 1 peaks at the last token of row 1
    hits = context_hits(F, tokens, [6, 9], top=2, window=1)
    # latent 0: contexts [5, 6] and [1, 1, 1]; latent 1: context [1, 6] (its second "top" has value 0: ignored)
    assert hits.tolist() == [[1, 0], [1, 0]]
    assert context_hits(F, tokens, [9], top=2, window=4).tolist() == [[1], [0]]


def test_random_latents_match_counts_and_pool():
    g = torch.Generator().manual_seed(1)
    lat = {0: torch.relu(torch.randn(6, 20, generator=g)), 1: torch.relu(torch.randn(6, 10, generator=g))}
    chosen = {i: (f > 0) & (torch.rand(f.shape, generator=g) < 0.2) for i, f in lat.items()}
    draws = random_latents(lat, chosen, n_draws=5, seed=0)
    for dr in draws:
        for b in range(6):
            want = int(sum(chosen[i][b].sum() for i in lat))
            pool = int(sum(((lat[i][b] > 0) & ~chosen[i][b]).sum() for i in lat))
            assert int(sum(dr[i][b].sum() for i in lat)) == min(want, pool)
        for i in lat:
            assert not (dr[i] & ~(lat[i] > 0)).any() and not (dr[i] & chosen[i]).any()
    again = random_latents(lat, chosen, n_draws=5, seed=0)
    assert all(torch.equal(a[i], b[i]) for a, b in zip(draws, again, strict=True) for i in lat)
    assert any(not torch.equal(a[0], b[0]) for a, b in zip(draws, random_latents(lat, chosen, n_draws=5, seed=1),
                                                           strict=True))


# ---------------------------------------------------------------------------------------------- interventions
@pytest.mark.parametrize("mode", ["all", "direct"])
def test_identity_edit_is_bit_exact(setup, mode):
    model, tcs, ids = setup
    one = {i: torch.ones(ids.shape[0], 48) for i in tcs}
    out = edited_logits(model, tcs, ids, mult=one, add={0: torch.zeros(ids.shape[0], 48)}, mode=mode)
    assert torch.equal(out, _plain(model, ids))
    assert_no_hooks(model)


def test_all_mode_equals_hand_steering(setup):
    """Zeroing latents S at layer 0 = adding -sum_j f_j W_dec[j] to mlp.out at the last position (steer oracle)."""
    model, tcs, ids = setup
    B, T = ids.shape
    f = tcs[0].encode(_clean_site(model, ids, "layers.0.mlp.in")[:, -1])  # [B, n]
    S = torch.zeros(B, 48, dtype=torch.bool)
    S[:, :10] = True
    out = edited_logits(model, tcs, ids, mult=masks_to_mult({0: S}, 0.0), mode="all")
    for b in range(B):
        vec = -((f[b] * S[b])[:, None] * tcs[0].W_dec).sum(0).detach()
        with steer(model, "layers.0.mlp.out", vec, alpha=1.0, positions=[T - 1]):
            want = _plain(model, ids[b: b + 1])
        torch.testing.assert_close(out[b: b + 1], want, atol=1e-5, rtol=1e-5)
    assert (out - _plain(model, ids)).abs().max() > 1e-3  # the edit did something


def test_direct_mode_freezes_downstream_mlps(setup):
    """direct = layer-0 edit added to mlp.out while layer 1's mlp.out stays at its clean value (patch oracle)."""
    model, tcs, ids = setup
    B, T = ids.shape
    f = tcs[0].encode(_clean_site(model, ids, "layers.0.mlp.in")[:, -1])
    add = torch.zeros(B, 48)
    add[:, 3] = 4.0
    clean1 = _clean_site(model, ids, "layers.1.mlp.out")
    out = edited_logits(model, tcs, ids, add={0: add}, mode="direct")
    allm = edited_logits(model, tcs, ids, add={0: add}, mode="all")
    for b in range(B):
        dec = tcs[0].decode
        vec = (dec(f[b: b + 1] + add[b: b + 1]) - dec(f[b: b + 1]))[0].detach()
        with steer(model, "layers.0.mlp.out", vec, alpha=1.0, positions=[T - 1]), \
                patch(model, "layers.1.mlp.out", clean1[b: b + 1], positions=[T - 1]):
            want = _plain(model, ids[b: b + 1])
        torch.testing.assert_close(out[b: b + 1], want, atol=1e-5, rtol=1e-5)
    assert (out - allm).abs().max() > 1e-4  # layer 1's MLP does respond in the all-effects mode


def test_edits_on_gemma3_post_norm_site():
    # Gemma 3: mlp.out is after the post-FFN norm; identity stays exact and direct mode still runs
    model = tiny_lm("gemma3", d=32, layers=2, vocab=40, seed=0)
    tcs = {1: _random_tc(32, 16, 1, 0, k=4)}
    ids = torch.randint(4, 40, (3, 5), generator=torch.Generator().manual_seed(2))
    for mode in ("all", "direct"):
        assert torch.equal(edited_logits(model, tcs, ids, mult={1: torch.ones(3, 16)}, mode=mode), _plain(model, ids))
        assert not torch.equal(edited_logits(model, tcs, ids, mult={1: torch.zeros(3, 16)}, mode=mode),
                               _plain(model, ids))
    assert_no_hooks(model)


def test_batching_does_not_change_results(setup):
    model, tcs, ids = setup
    mult = {0: torch.rand(ids.shape[0], 48, generator=torch.Generator().manual_seed(5)) * 3}
    for mode in ("all", "direct"):
        a = edited_logits(model, tcs, ids, mult=mult, mode=mode, batch_size=2)
        b = edited_logits(model, tcs, ids, mult=mult, mode=mode, batch_size=64)
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_edited_logits_rejects_bad_input(setup):
    model, tcs, ids = setup
    with pytest.raises(UserError, match="mode"):
        edited_logits(model, tcs, ids, mode="indirect")
    with pytest.raises(UserError, match="expected"):
        edited_logits(model, tcs, ids, mult={0: torch.ones(2, 48)})
    with pytest.raises(UserError, match="no transcoder"):
        edited_logits(model, {0: tcs[0]}, ids, mult={1: torch.ones(5, 48)})
    with pytest.raises(UserError, match="not in 0..1"):
        edited_logits(model, {5: tcs[0]}, ids)
    with pytest.raises(UserError, match=r"\[B, T\]"):
        edited_logits(model, tcs, ids[0])
    assert_no_hooks(model)


def test_article_prob():
    logits = torch.tensor([[0.0, 0.0], [10.0, 0.0]])
    torch.testing.assert_close(article_prob(logits, [1, 0]), torch.tensor([0.5, 1 / (1 + torch.e ** -10)]))


# ---------------------------------------------------------------------------------------------- data
def test_grammar_facts():
    g = PlanningGrammar(n_nouns=20, n_defs=8, n_heldout=6, seed=3)
    cls = g.article_class
    assert cls[g.trained].sum() == 7 and cls[g.heldout].sum() == 3  # balanced classes in both sets
    defs = {tuple(g.definition(n)) for n in range(20)}
    assert len(defs) == 20  # definitions are unique
    import numpy as np

    rng = np.random.default_rng(0)
    held = {f"N{i}" for i in g.heldout}
    for _ in range(300):
        s = g.sentence(rng)
        assert s[0] == "<bos>" and s[-1] == "<eos>"
        if "is" in s:  # the a/an task never shows a held-out noun
            assert not held & set(s)
            i = s.index("is")
            assert s[i + 1] == g.article(int(s[i + 2][1:]))
    for words, q, ex in g.query_items(g.heldout, seed=1):
        assert words[-1] == "is" and words[-3:-1] == g.definition(q) and ex in g.trained and ex != q
    with pytest.raises(UserError, match="ordered pairs"):
        PlanningGrammar(n_nouns=20, n_defs=4, n_heldout=2)


def test_an_items():
    assert len(AN_ITEMS) >= 100 and len({w for w, _ in AN_ITEMS}) == len(AN_ITEMS)
    arts = [an_article(w) for w, _ in AN_ITEMS]
    assert arts[:60] == ["an"] * 60 and arts[60:] == ["a"] * 60
    assert an_prompt("A person who flies airplanes") == ("A machine that burns rubbish is an incinerator. "
                                                        "A person who flies airplanes is")


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_one_prompt_many_variants_uses_the_cache_exactly(family):
    """[1, T] with R edit rows (prefix once, last token R times) = the same prompt repeated R times."""
    model = tiny_lm(family, d=32, layers=2, vocab=40, seed=4)
    tcs = {0: _random_tc(32, 16, 0, 7, k=4), 1: _random_tc(32, 16, 1, 8, k=4)}
    ids = torch.randint(4, 40, (1, 7), generator=torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(9)
    mult = {0: (torch.rand(6, 16, generator=g) > 0.3).float() * 5}
    add = {1: torch.rand(6, 16, generator=g)}
    for mode in ("all", "direct"):
        a = edited_logits(model, tcs, ids, mult=mult, add=add, mode=mode, batch_size=4)
        b = edited_logits(model, tcs, ids.expand(6, -1), mult=mult, add=add, mode=mode)
        assert a.shape == (6, 40)
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert_no_hooks(model)
