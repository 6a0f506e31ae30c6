"""Unit tests for iclr26.merging: NUFILT invariants and the baselines against direct transcriptions."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from iclr26.core.errors import UserError
from iclr26.data.subspace_tasks import make_subspace_tasks, pca_whiten
from iclr26.merging import (
    ContinualMerger,
    continual_merge,
    continual_metrics,
    nufilt_merge,
    nufilt_step,
    null_space_projector,
    opcm_project,
    task_arithmetic,
    ties_merging,
    wudi_solve,
)


class Tiny(nn.Module):
    def __init__(self, d_in=6, h=5, d_out=4):
        super().__init__()
        self.attn = nn.Linear(d_in, h)
        self.fc1 = nn.Linear(h, h, bias=False)
        self.fc2 = nn.Linear(h, d_out)
        self.norm = nn.LayerNorm(d_out)

    def forward(self, x):
        return self.norm(self.fc2(torch.relu(self.fc1(torch.relu(self.attn(x))))))


def _tiny_family(n=3, seed=0, scale=0.1):
    g = torch.Generator().manual_seed(seed)
    base = Tiny()
    with torch.no_grad():
        for p in base.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    fts = []
    for _ in range(n):
        m = Tiny()
        m.load_state_dict(base.state_dict())
        with torch.no_grad():
            for p in m.parameters():
                p.add_(scale * torch.randn(p.shape, generator=g))
        fts.append(m)
    return base, fts


def _snapshot(m):
    return {k: v.clone() for k, v in m.state_dict().items()}


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


# ----------------------------------------------------------------------------------- NUFILT
def test_projector_annihilates_merged_directions():
    g = torch.Generator().manual_seed(0)
    M = torch.randn(7, 3, generator=g, dtype=torch.float64) @ torch.randn(
        3, 10, generator=g, dtype=torch.float64
    )
    P = null_space_projector(M, 3)
    _, _, vh = torch.linalg.svd(M)
    V_M = vh[:3].T
    assert (P @ V_M).norm() < 1e-10
    assert torch.allclose(P, P.T, atol=1e-12)
    assert torch.allclose(P @ P, P, atol=1e-12)
    assert (M @ P).norm() < 1e-10  # the whole (rank-3) row space is filtered
    # clamping: a rank larger than min(out, in) = 7 keeps 7 directions (faithful: extra ones are arbitrary)
    assert torch.linalg.matrix_rank(null_space_projector(M, 99)) == 10 - 7


def test_projector_is_identity_when_nothing_merged():
    Z = torch.zeros(4, 6)
    assert torch.equal(null_space_projector(Z, 3), torch.eye(6))
    # the official first-task behaviour deletes null_r directions even though nothing was merged
    P = null_space_projector(Z.double(), 3, faithful_first_task=True)
    assert torch.linalg.matrix_rank(P) == 3


def test_rank_tol_keeps_only_real_directions():
    g = torch.Generator().manual_seed(1)
    M = torch.randn(8, 2, generator=g, dtype=torch.float64) @ torch.randn(
        2, 8, generator=g, dtype=torch.float64
    )
    P = null_space_projector(M, 5, rank_tol=1e-6)
    assert torch.linalg.matrix_rank(P) == 6


def test_nufilt_first_task_copies_filtered_layers_only():
    base, fts = _tiny_family(1)
    b0, f0 = _snapshot(base), _snapshot(fts[0])
    merged = nufilt_merge(base, fts[0], layers=["attn", "fc1"], null_rank=2, lora_rank=2)
    sd = merged.state_dict()
    # P = I at t = 1: the filtered Linear weights become the fine-tuned ones
    for k in ("attn.weight", "fc1.weight"):
        assert torch.allclose(sd[k], f0[k], atol=1e-6)
    # everything else (biases, fc2, LayerNorm) is byte-identical to theta_0
    for k in ("attn.bias", "fc2.weight", "fc2.bias", "norm.weight", "norm.bias"):
        assert torch.equal(sd[k], b0[k]), k
    _assert_same(_snapshot(base), b0)  # inputs not mutated
    _assert_same(_snapshot(fts[0]), f0)


def test_nufilt_step_fuses_T_times_P_plus_BA():
    base, fts = _tiny_family(2, seed=3)
    b, f1, f2 = _snapshot(base), _snapshot(fts[0]), _snapshot(fts[1])
    keys = ["attn.weight", "fc1.weight"]
    m1, info1 = nufilt_step(b, b, f1, keys=keys, null_rank=2, grad_rank=2, lora_rank=3, steps=10, lr=1e-2)
    assert not info1["solved"] and info1["loss"] == []  # no solve at t = 1
    # B = 0 (no solve): the fused update is exactly T P
    m2p, _ = nufilt_step(b, m1, f2, keys=keys, null_rank=2, solve=False)
    for k in keys:
        T = (f2[k] - b[k]).double()
        P = null_space_projector((m1[k] - b[k]).double(), 2)
        assert torch.allclose(m2p[k].double(), m1[k].double() + T @ P, atol=1e-5)
    # with the solved adapter: W = W_merged + T (P + B A), and the surrogate loss falls
    m2, info = nufilt_step(b, m1, f2, keys=keys, null_rank=2, grad_rank=2, lora_rank=3, steps=30, lr=1e-2)
    assert info["solved"] and info["loss"][-1] < info["loss"][0]
    for k in keys:
        A, B = info["adapters"][k]
        T = (f2[k] - b[k]).double()
        P = null_space_projector((m1[k] - b[k]).double(), 2)
        want = m1[k].double() + T @ (P + B.double() @ A.double())
        assert torch.allclose(m2[k].double(), want, atol=1e-5)
    for k in b:
        if k not in keys:
            assert torch.equal(m2[k], b[k]), k


def test_nufilt_surrogate_transcription():
    """The loss at the first step equals the paper's surrogate computed directly with dense matrices."""
    g = torch.Generator().manual_seed(5)
    b = {"w": torch.randn(6, 8, generator=g, dtype=torch.float64)}
    m = {"w": b["w"] + 0.1 * torch.randn(6, 8, generator=g, dtype=torch.float64)}
    t = {"w": b["w"] + 0.1 * torch.randn(6, 8, generator=g, dtype=torch.float64)}
    _, info = nufilt_step(b, m, t, keys=["w"], null_rank=3, grad_rank=2, lora_rank=2, steps=1, seed=9)
    T, M = t["w"] - b["w"], m["w"] - b["w"]
    V_M = torch.linalg.svd(M)[2][:3].T
    V_T = torch.linalg.svd(T)[2][:2].T
    P = torch.eye(8, dtype=torch.float64) - V_M @ V_M.T
    G = P  # B = 0 at the first evaluation
    want = ((T @ V_T - (M + T @ G) @ V_T) ** 2).sum() + ((M @ V_M - (M + T @ G) @ V_M) ** 2).sum()
    assert abs(info["loss"][0] - float(want)) < 1e-8 * max(1.0, float(want))


def test_nufilt_no_null_space_ablation_adds_full_task_vector_without_solve():
    base, fts = _tiny_family(2, seed=4)
    out = continual_merge(base, fts, "nufilt", layers=["fc1"], null_space=False, solve=False)
    want = base.state_dict()["fc1.weight"] + sum(
        f.state_dict()["fc1.weight"] - base.state_dict()["fc1.weight"] for f in fts
    )
    assert torch.allclose(out.state_dict()["fc1.weight"], want, atol=1e-6)


def test_nufilt_handles_conv1d_by_transposing():
    from transformers.pytorch_utils import Conv1D

    class WithConv(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = Conv1D(5, 4)  # weight [in=4, out=5]

    class WithLin(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(4, 5)

    g = torch.Generator().manual_seed(2)
    conv = [WithConv() for _ in range(3)]
    lin = [WithLin() for _ in range(3)]
    for c, li in zip(conv, lin, strict=True):
        w = torch.randn(5, 4, generator=g)
        bias = torch.randn(5, generator=g)
        c.load_state_dict({"c_fc.weight": w.T.clone(), "c_fc.bias": bias})
        li.load_state_dict({"c_fc.weight": w, "c_fc.bias": bias})
    kw = {"null_rank": 2, "grad_rank": 1, "lora_rank": 2, "steps": 5}
    a = nufilt_merge(conv[0], conv[1:], **kw).state_dict()["c_fc.weight"]
    b = nufilt_merge(lin[0], lin[1:], **kw).state_dict()["c_fc.weight"]
    assert torch.allclose(a.T, b, atol=1e-5)


# ----------------------------------------------------------------------------------- baselines
def test_task_arithmetic_matches_transcription_and_filter():
    base, fts = _tiny_family(3)
    b = _snapshot(base)
    out = task_arithmetic(b, [_snapshot(f) for f in fts], scaling=0.3, layers=["fc"])
    for k, v in b.items():
        if "fc" in k:
            want = v + 0.3 * sum(f.state_dict()[k] - v for f in fts)
            assert torch.allclose(out[k], want, atol=1e-6)
        else:
            assert torch.equal(out[k], v)
    # the continual form gives the same result
    cont = continual_merge(base, fts, "task_arithmetic", layers=["fc"]).state_dict()
    for k in b:
        assert torch.allclose(cont[k], out[k], atol=1e-6)


def _ties_oracle(tvs: np.ndarray, density: float) -> np.ndarray:
    """TIES transcribed entry by entry (trim with FusionBench's rounding, elect, disjoint sum)."""
    n_t, n = tvs.shape
    trimmed = np.zeros_like(tvs)
    n_keep = int(n * density) + 1  # FusionBench keeps |v| >= the (n - int(n*density))-th smallest
    for i in range(n_t):
        order = np.argsort(-np.abs(tvs[i]), kind="stable")
        for j in order[:n_keep]:
            trimmed[i, j] = tvs[i, j]
    total = trimmed.sum()
    out = np.zeros(n)
    for j in range(n):
        s = np.sign(trimmed[:, j].sum())
        if s == 0:
            s = np.sign(total)
        out[j] = sum(v for v in trimmed[:, j] if np.sign(v) == s and v != 0)
    return out


def test_ties_matches_transcription():
    base, fts = _tiny_family(3, seed=7)
    b = _snapshot(base)
    out = ties_merging(b, [_snapshot(f) for f in fts], scaling=0.4, density=0.3)
    keys = sorted(b)
    flat = np.stack([np.concatenate([(f.state_dict()[k] - b[k]).numpy().ravel() for k in keys]) for f in fts])
    want = _ties_oracle(flat.astype(np.float64), 0.3)
    got = np.concatenate([((out[k] - b[k]) / 0.4).numpy().ravel() for k in keys])
    assert np.allclose(got, want, atol=1e-5)


def test_continual_ties_fusionbench_mode():
    base, fts = _tiny_family(2, seed=8)
    b, f1, f2 = _snapshot(base), _snapshot(fts[0]), _snapshot(fts[1])
    out = continual_merge(b, [f1, f2], "ties", scaling=0.5, density=0.2)
    keys = sorted(b)
    m1 = {k: b[k] + 0.5 * (f1[k] - b[k]) for k in keys}  # t = 1: no trimming
    flat = np.stack([np.concatenate([(d[k] - b[k]).numpy().ravel() for k in keys]) for d in (m1, f2)])
    tstar = _ties_oracle(flat.astype(np.float64), 0.2)
    got = np.concatenate([(out[k] - m1[k]).numpy().ravel() for k in keys]) / 0.5
    assert np.allclose(got, tstar, atol=1e-5)


def test_weight_average_is_the_running_mean():
    base, fts = _tiny_family(4, seed=9)
    out = continual_merge(base, fts, "weight_average").state_dict()
    for k in out:
        assert torch.allclose(out[k], torch.stack([f.state_dict()[k] for f in fts]).mean(0), atol=1e-6)


def _opcm_oracle(b, fs, alpha, linear):
    """OPCM transcribed from its description with numpy (full SVD, mean-norm rescaling)."""
    b = {k: v.double().numpy() for k, v in b.items()}
    fs = [{k: v.double().numpy() for k, v in f.items()} for f in fs]
    merged = {k: v.copy() for k, v in fs[0].items()}
    lam = 1.0
    norms = [np.sqrt(sum(((fs[0][k] - b[k]) ** 2).sum() for k in b))]
    for f in fs[1:]:
        norms.append(np.sqrt(sum(((f[k] - b[k]) ** 2).sum() for k in b)))
        new_tv = {}
        for k in b:
            tm, tt = merged[k] - b[k], f[k] - b[k]
            if k in linear:
                u, s, vh = np.linalg.svd(tm)  # full matrices
                split = int(np.argmax(np.cumsum(s) / s.sum() > alpha))
                pi = u.T @ tt @ vh.T
                np.fill_diagonal(pi, 0.0)
                pi[:split, :split] = 0.0
                tt = u @ pi @ vh
            new_tv[k] = lam * tm + tt
        norm = np.sqrt(sum((v**2).sum() for v in new_tv.values()))
        mean = np.mean(norms)
        lam = norm / mean  # lambda_t = ||lambda_{t-1} tau_m + delta|| / mean_i ||tau_i||
        merged = {k: b[k] + new_tv[k] * mean / norm for k in b}
    return merged, lam


def test_opcm_matches_transcription():
    base, fts = _tiny_family(3, seed=10)
    merger = ContinualMerger(base, "opcm", alpha=0.5)
    for f in fts:
        merger.add(f)
    want, lam = _opcm_oracle(
        _snapshot(base), [_snapshot(f) for f in fts], 0.5, {"attn.weight", "fc1.weight", "fc2.weight"}
    )
    got = merger.state_dict()
    for k in got:
        assert np.allclose(got[k].double().numpy(), want[k], atol=1e-5), k
    assert abs(merger.lambda_ - lam) < 1e-6


def test_opcm_project_removes_diagonal_and_top_block():
    g = torch.Generator().manual_seed(11)
    tm = torch.randn(5, 7, generator=g, dtype=torch.float64)
    tt = torch.randn(5, 7, generator=g, dtype=torch.float64)
    out = opcm_project(tm, tt, alpha=0.5)
    u, s, vh = torch.linalg.svd(tm)
    pi = u.T @ out @ vh.T
    assert pi.diagonal().abs().max() < 1e-10
    split = int((s.cumsum(0) / s.sum() > 0.5).double().argmax())
    assert pi[:split, :split].abs().max() < 1e-10


def test_wudi_loss_falls_and_orthogonal_sum_is_optimal():
    g = torch.Generator().manual_seed(12)
    tvs = torch.randn(2, 6, 8, generator=g)
    merged, losses = wudi_solve(tvs, iters=100, lr_relative=0.01)
    assert losses[-1] < 0.5 * losses[0]
    assert merged.shape == (6, 8)
    # task vectors with orthogonal row spaces: the sum already has zero interference
    ortho = torch.zeros(2, 4, 6)
    ortho[0, :, :3] = torch.randn(4, 3, generator=g)
    ortho[1, :, 3:] = torch.randn(4, 3, generator=g)
    merged, losses = wudi_solve(ortho, iters=5, lr=1e-3)
    assert losses[0] < 1e-10


def test_continual_merger_rejects_bad_input():
    base, fts = _tiny_family(1)
    with pytest.raises(UserError, match="unknown merging method"):
        ContinualMerger(base, "magic")
    with pytest.raises(UserError, match="unknown hyperparameters"):
        ContinualMerger(base, "nufilt", rank=3)
    with pytest.raises(UserError, match="matches no"):
        ContinualMerger(base, "nufilt", layers=["nothing"])
    other = nn.Linear(3, 3)
    with pytest.raises(UserError, match="parameter names differ"):
        ContinualMerger(base, "task_arithmetic").add(other)


@pytest.mark.parametrize("method", ["task_arithmetic", "ties", "weight_average", "opcm", "wudi", "nufilt"])
def test_every_method_keeps_inputs_and_unfiltered_params(method):
    base, fts = _tiny_family(3, seed=13)
    snaps = [_snapshot(m) for m in (base, *fts)]
    kw = (
        {"iters": 5}
        if method == "wudi"
        else {"null_rank": 2, "lora_rank": 2, "steps": 3}
        if method == "nufilt"
        else {}
    )
    merger = ContinualMerger(base, method, layers=["fc1"], **kw)
    for f in fts:
        merger.add(f)
    out = merger.model
    assert isinstance(out, Tiny) and out is not base
    for m, snap in zip((base, *fts), snaps, strict=True):
        _assert_same(_snapshot(m), snap)
    sd = out.state_dict()
    for k in sd:
        if not k.startswith("fc1"):
            assert torch.equal(sd[k], snaps[0][k]), (method, k)
    assert not torch.equal(sd["fc1.weight"], snaps[0]["fc1.weight"])


def test_continual_metrics():
    acc = np.array([[0.9, 0.8, 0.7], [np.nan, 0.9, 0.85], [np.nan, np.nan, 0.95]])
    m = continual_metrics(acc)
    assert abs(m["acc"] - np.mean([0.7, 0.85, 0.95])) < 1e-12
    assert abs(m["bwt"] - np.mean([0.7 - 0.9, 0.85 - 0.9])) < 1e-12


# ----------------------------------------------------------------------------------- synthetic tasks
def test_subspace_tasks_share_exactly_s_directions():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(200, 20, generator=g)
    y = torch.randint(0, 10, (200,), generator=g)
    ztr, zte = pca_whiten(X[:150], 6, X[150:])
    assert torch.allclose(ztr.T @ ztr / 149, torch.eye(6), atol=1e-4)  # whitened
    tasks = make_subspace_tasks(ztr, y[:150], zte, y[150:], n_tasks=3, dim=20, shared=2, noise=0.0, seed=1)
    for t in tasks:
        assert torch.allclose(t.basis.T @ t.basis, torch.eye(6), atol=1e-5)
    # principal angles between two tasks' bases: exactly 2 cosines of 1, the rest 0
    cos = torch.linalg.svdvals(tasks[0].basis.T @ tasks[1].basis)
    assert torch.allclose(cos, torch.tensor([1.0, 1.0, 0, 0, 0, 0]), atol=1e-5)
    # noise-free inputs live in the task's subspace; labels are a permutation
    x = tasks[0].X_train
    assert torch.allclose(x, x @ tasks[0].basis @ tasks[0].basis.T, atol=1e-4)
    assert torch.equal(tasks[0].y_train, tasks[0].perm[y[:150]])
    with pytest.raises(UserError, match="too small"):
        make_subspace_tasks(ztr, y[:150], zte, y[150:], n_tasks=5, dim=20, shared=0)
