"""SE-GNN faithfulness metrics (iclr26.graphs): EST and the fixed-explanation metrics, with oracles."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Batch, Data
from torch_geometric.utils import subgraph

from iclr26.core.errors import UserError
from iclr26.data.graphs import GREEN, VIOLET, ba_motif_graphs, ba_shapes, color_count_graphs, split_indices
from iclr26.graphs import faithfulness as F
from iclr26.graphs.segnn import SEGNN, n_graphs_of


def _counts(batch, values):
    """Per-graph sums of ``values`` [N] (and node counts when values are ones)."""
    G = n_graphs_of(batch)
    out = torch.zeros(G)
    return out.index_add_(0, batch.batch, values.float())


class CountModel:
    """p(class 1) = 0.9 when the graph has more than ``t`` nodes, else 0.1; R = nodes with x[:, 0] = 1."""

    def __init__(self, t):
        self.t = t

    def __call__(self, batch):
        n = _counts(batch, torch.ones(batch.x.shape[0]))
        p1 = torch.where(n > self.t, 0.9, 0.1)
        return torch.stack([1 - p1, p1], 1), batch.x[:, 0]

    def classify(self, batch, scores):
        return self(batch)[0]


class MarkerModel:
    """A degenerate SE-GNN in miniature: the 'extractor' selects node-flag x[:, 0] only while the graph keeps
    at least ``n0`` nodes (a graph-level readout); the classifier predicts class 1 iff something is selected."""

    def __init__(self, n0):
        self.n0 = n0

    def extract(self, batch):
        n = _counts(batch, torch.ones(batch.x.shape[0]))
        return batch.x[:, 0] * (n[batch.batch] >= self.n0).float()

    def classify(self, batch, scores):
        sel = _counts(batch, scores)
        p1 = torch.where(sel > 0, 0.95, 0.05)
        return torch.stack([1 - p1, p1], 1)

    def __call__(self, batch):
        s = self.extract(batch)
        return self.classify(batch, (s >= 0.5).float()), s


class LinearMock:
    """p1 = min(1, 0.15 * n_nodes + 0.5 * sum_v s_v x_v1); scores from x[:, 0]. Hand-computable."""

    def classify(self, batch, scores):
        n = _counts(batch, torch.ones(batch.x.shape[0]))
        p1 = (0.15 * n + 0.5 * _counts(batch, scores * batch.x[:, 1])).clamp(max=1.0)
        return torch.stack([1 - p1, p1], 1)

    def __call__(self, batch):
        s = batch.x[:, 0]
        return self.classify(batch, (s >= 0.5).float()), s


def _ring(n, r_nodes, seed=0):
    """A ring plus random chords on n nodes; x[:, 0] flags R, x[:, 1] = node id (to check relabelling)."""
    g = torch.Generator().manual_seed(seed)
    src = torch.arange(n)
    e = torch.stack([src, (src + 1) % n])
    chords = torch.randint(0, n, (2, n), generator=g)
    e = torch.cat([e, chords[:, chords[0] != chords[1]]], 1)
    e = torch.unique(torch.cat([e, e.flip(0)], 1), dim=1)
    x = torch.zeros(n, 2)
    x[list(r_nodes), 0] = 1
    x[:, 1] = torch.arange(n).float()
    return Data(x=x, edge_index=e)


# ---------------------------------------------------------------------------- EST
def test_perturbations_keep_R_and_R_edges_and_drop_pairs_together():
    g = _ring(12, [0, 1, 2, 7])
    R = g.x[:, 0].bool()
    nk, ek = F.perturbation_draws(g, R, 40, 0.5, 0.5, torch.Generator().manual_seed(3))
    assert nk[:, R].all()
    u, v = g.edge_index
    assert ek[:, R[u] & R[v]].all()  # edges inside R are never dropped
    assert (~nk).any() and (~ek[:, ~(R[u] & R[v])]).any()  # but others are
    for k in range(40):  # an undirected edge goes in both directions together
        kept = {(int(a), int(b)) for a, b in g.edge_index[:, ek[k]].t()}
        assert all((b, a) in kept for a, b in kept)
        assert all(nk[k, a] and nk[k, b] for a, b in kept)
    # relabelling keeps features aligned: the batched copies carry the original node ids in x[:, 1]
    xs, ei, sizes, sc, _ = F._perturbed_pieces(g, nk, ek, g.x[:, 0])
    orig = {(int(a), int(b)) for a, b in g.edge_index.t()}
    ids = xs[:, 1].long()
    assert all((int(ids[a]), int(ids[b])) in orig for a, b in ei.t())
    assert torch.equal(sc, g.x[ids, 0]) and int(sizes.sum()) == xs.shape[0]


def test_est_is_a_max_over_perturbations():
    g = _ring(10, [0, 1])
    R = g.x[:, 0].bool()
    K = 20
    for seed in range(50):  # find draws where the smallest perturbed graph is unique
        nk, _ = F.perturbation_draws(g, R, K, 0.5, 0.5, torch.Generator().manual_seed(seed))
        n = nk.sum(1)
        if (n == n.min()).sum() == 1:
            break
    model = CountModel(t=int(n.min()))  # only the smallest perturbed graph falls to <= t nodes
    res = F.est(model, [g], K=K, seed=seed)
    assert res.flipped[0].sum() == 1 and bool(res.rejected[0])
    assert res.score[0] == pytest.approx(0.8)  # the single change, not its mean 0.8 / K
    assert res.changes[0].mean() == pytest.approx(0.8 / K)


def test_est_reruns_the_extractor_frozen_does_not():
    gs = [_ring(14, [3]), _ring(11, [0], seed=1), _ring(9, [5], seed=2)]
    model = MarkerModel(n0=9)
    full = F.est(model, gs, K=30, seed=0)
    frozen = F.est(model, gs, K=30, seed=0, frozen=True)
    assert full.rejection_rate() == 1.0 and full.mean_score() == pytest.approx(0.9)
    assert frozen.rejection_rate() == 0.0 and frozen.mean_score() == 0.0


@torch.no_grad()
def _est_oracle(model, graphs, K, seed, threshold=0.5):
    """Direct transcription: per graph and draw, induced subgraph, drop non-R pairs, run the model alone."""
    out = []
    for i, g in enumerate(graphs):
        p0, s = model(Batch.from_data_list([g]))
        y = int(p0.argmax())
        R = s >= threshold
        nk, ek = F.perturbation_draws(g, R, K, 0.5, 0.5, torch.Generator().manual_seed(seed + i))
        best = 0.0
        for k in range(K):
            ei = g.edge_index[:, ek[k]]
            ei, _ = subgraph(nk[k], ei, relabel_nodes=True, num_nodes=g.x.shape[0])
            pk, _ = model(Batch.from_data_list([Data(x=g.x[nk[k]], edge_index=ei)]))
            best = max(best, abs(float(p0[0, y] - pk[0, y])))
        out.append(best)
    return torch.tensor(out)


def test_est_batched_matches_loop_and_oracle_on_a_segnn():
    graphs = color_count_graphs(12, n_min=3, n_max=6, seed=4)
    torch.manual_seed(0)
    for g in graphs:  # continuous features, so the untrained extractor's selection moves with the graph
        g.x = torch.randn(g.x.shape)
    model = SEGNN(4, hidden=8).eval()  # an untrained ACR extractor: its scores depend on the whole graph
    with torch.no_grad():
        thr = float(model(Batch.from_data_list(graphs))[1].median())  # select about half of the nodes
    a = F.est(model, graphs, K=7, seed=5, threshold=thr, graphs_per_step=5)
    b = F.est(model, graphs, K=7, seed=5, threshold=thr, batched=False)
    ok = ~a.skipped
    assert ok.sum() >= 6 and (a.score[ok] > 0).any()
    assert torch.allclose(a.changes, b.changes, atol=1e-6)
    assert torch.equal(a.flipped, b.flipped)
    assert torch.allclose(a.score[ok], _est_oracle(model, graphs, 7, 5, thr)[ok], atol=1e-6)
    assert a.info["n_forward"] < b.info["n_forward"]


def test_est_rejection_monotone_in_k_and_band():
    gs = [_ring(10, [0, 1], seed=s) for s in range(6)]
    res = F.est(CountModel(t=7), gs, K=30, seed=1)
    rates = [res.rejection_rate(k) for k in (1, 2, 5, 10, 30)]
    assert rates == sorted(rates)

    class Half(CountModel):
        def __call__(self, batch):
            p, s = super().__call__(batch)
            n = _counts(batch, torch.ones(batch.x.shape[0]))
            p1 = torch.where(n >= 10, 0.9, 0.55)  # never changes the argmax, but lands in [0.4, 0.6]
            return torch.stack([1 - p1, p1], 1), s

    assert F.est(Half(0), gs, K=10).rejection_rate() == 1.0
    assert F.est(Half(0), gs, K=10, binary_band=None).rejection_rate() == 0.0


def test_est_skips_empty_explanations_and_single_logit_models():
    g_empty = _ring(6, [])
    g = _ring(6, [0])

    class OneLogit(CountModel):
        def __call__(self, batch):
            p, s = super().__call__(batch)
            return p[:, 1:], s  # one column: p(class 1)

    res = F.est(OneLogit(t=5), [g_empty, g], K=10)
    assert res.skipped.tolist() == [True, False] and res.skip_rate == 0.5
    assert torch.isnan(res.score[0]) and not res.rejected[0]


# ---------------------------------------------------------------------------- fixed-explanation metrics
def _tiny_pair():
    a = Data(x=torch.tensor([[1.0, 0.2], [1.0, 0.4], [0.0, 0.6]]), edge_index=torch.tensor([[0, 1], [1, 0]]))
    b = Data(x=torch.tensor([[1.0, 0.1], [1.0, 0.1], [0.0, 0.3], [0.0, 0.3]]),
             edge_index=torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]]))  # fmt: skip
    return a, b


def test_fidelity_by_hand():
    a, _ = _tiny_pair()
    m = LinearMock()
    # full: 0.15*3 + 0.5*0.6 = 0.75 (class 1); keep R: 0.3 + 0.3 = 0.6; remove R: 0.15
    got = F.fidelity(m, [a])
    assert got["fid_minus"] == pytest.approx(0.15) and got["fid_plus"] == pytest.approx(0.60)
    acc = F.fidelity(m, [a], kind="acc")
    assert acc == {"fid_minus": 0.0, "fid_plus": 1.0}
    # RFid with removal probabilities near 1 removes all of R (RFid+) / all the rest (RFid-)
    r = F.robust_fidelity(m, [a], alpha_plus=0.999999, alpha_minus=0.999999, samples=3)
    assert r["rfid_plus"] == pytest.approx(0.60) and r["rfid_minus"] == pytest.approx(0.15)
    r0 = F.robust_fidelity(m, [a], alpha_plus=1e-9, alpha_minus=1e-9, samples=3)
    assert r0["rfid_plus"] == pytest.approx(0.0) and r0["rfid_minus"] == pytest.approx(0.0)


def test_suff_nec_by_hand():
    a, b = _tiny_pair()
    # full A 0.75, full B 0.15*4 + 0.5*0.2 = 0.70
    # Suff: R_A + comp_B -> 0.6 + 0.3 = 0.9 (|Δ| 0.15); R_B + comp_A -> 0.45 + 0.1 = 0.55 (0.15)
    # Nec: comp_A + R_B -> 0.45 + 0.1 = 0.55 (0.2); comp_B + R_A -> 0.6 + 0.3 = 0.9 (0.2)
    got = F.suff_nec(LinearMock(), [a, b], samples=2)
    assert got["suff"] == pytest.approx(0.15) and got["nec"] == pytest.approx(0.20)


def test_cf_fidelity_zero_for_constant_scores_positive_otherwise():
    class Soft(LinearMock):
        def __call__(self, batch):
            s = batch.x[:, 0]
            return self.classify(batch, s), s

    a = Data(x=torch.tensor([[0.5, 0.2], [0.5, 0.4], [0.5, 0.6]]), edge_index=torch.zeros(2, 0, dtype=torch.long))
    assert F.cf_fidelity(Soft(), [a], samples=4) == pytest.approx(0.0, abs=1e-6)
    b = Data(x=torch.tensor([[0.99, 0.9], [0.01, 0.0], [0.01, 0.0]]), edge_index=torch.zeros(2, 0, dtype=torch.long))
    assert F.cf_fidelity(Soft(), [b], samples=20) > 0.05


def test_fidelity_agrees_with_pyg():
    """kind="acc", removal="zero" is torch_geometric.explain.metric.fidelity for model explanations."""
    from torch_geometric.explain import Explainer
    from torch_geometric.explain.algorithm import DummyExplainer
    from torch_geometric.explain.metric import fidelity as pyg_fidelity
    from torch_geometric.nn import GCNConv, global_add_pool

    class GCN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.lin = GCNConv(3, 8), torch.nn.Linear(8, 3)

        def forward(self, x, edge_index, batch):
            h = torch.relu(self.conv(x, edge_index))
            return torch.softmax(self.lin(global_add_pool(h, batch)), -1)

    torch.manual_seed(0)
    gcn = GCN().eval()

    class Wrapped:  # our protocol around a plain GNN (its classifier ignores the scores)
        def classify(self, batch, scores):
            return gcn(batch.x, batch.edge_index, batch.batch)

        def __call__(self, batch):
            return self.classify(batch, None), torch.zeros(batch.x.shape[0])

    graphs = [_ring(n, []) for n in (6, 7, 8, 9, 10, 11, 12, 13)]
    for g in graphs:
        g.x = torch.randn(g.x.shape[0], 3)
    gen = torch.Generator().manual_seed(1)
    masks = [torch.rand(g.x.shape[0], generator=gen) < 0.5 for g in graphs]
    ours = F.fidelity(Wrapped(), graphs, kind="acc", removal="zero", masks=masks)
    batch = Batch.from_data_list(graphs)
    explainer = Explainer(gcn, DummyExplainer(), explanation_type="model", node_mask_type="object",
                          model_config=dict(mode="multiclass_classification", task_level="graph",
                                            return_type="probs"))  # fmt: skip
    explanation = explainer(batch.x, batch.edge_index, batch=batch.batch)
    explanation.node_mask = torch.cat(masks).float()[:, None]
    fid_pos, fid_neg = pyg_fidelity(explainer, explanation)
    assert ours["fid_plus"] == pytest.approx(fid_pos) and ours["fid_minus"] == pytest.approx(fid_neg)


def test_plausibility_auroc():
    assert F.plausibility_auroc([torch.tensor([0.9, 0.1, 0.8])], [torch.tensor([1, 0, 1])]) == 1.0
    with pytest.raises(UserError, match="single class"):
        F.plausibility_auroc([torch.tensor([0.9])], [torch.tensor([1])])


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kw, match", [
    (dict(K=0), "K=0"), (dict(p_node=1.0), "p_node"), (dict(p_edge=-0.1), "p_edge"),
    (dict(distance="l2"), "allowed: abs, tv"), (dict(threshold=1.5), "threshold"),
    (dict(binary_band=(0.7, 0.3)), "binary_band"), (dict(masks=[torch.ones(3)]), "masks has 1 entries"),
    (dict(graphs_per_step=0), "graphs_per_step"),
])  # fmt: skip
def test_est_bad_input(kw, match):
    gs = [_ring(5, [0]), _ring(6, [1])]
    with pytest.raises(UserError, match=match):
        F.est(CountModel(3), gs, **kw)


def test_bad_graphs_and_models():
    with pytest.raises(UserError, match="non-empty list"):
        F.est(CountModel(3), [])
    with pytest.raises(UserError, match="edge_index refers to nodes"):
        F.est(CountModel(3), [Data(x=torch.ones(2, 2), edge_index=torch.tensor([[0], [5]]))])
    with pytest.raises(UserError, match="x must be a 2-D"):
        F.fidelity(CountModel(3), [Data(x=torch.ones(3), edge_index=torch.zeros(2, 0, dtype=torch.long))])
    with pytest.raises(UserError, match=r"model\(batch\) must return"):
        F.est(lambda b: torch.ones(1, 2), [_ring(5, [0])])
    with pytest.raises(UserError, match="needs classify"):
        F.fidelity(lambda b: (torch.ones(1, 2) / 2, b.x[:, 0]), [_ring(5, [0])])
    with pytest.raises(UserError, match="kind="):
        F.fidelity(CountModel(3), [_ring(5, [0])], kind="roc")
    with pytest.raises(UserError, match="allowed: linear, gnn"):
        SEGNN(4, classifier="gat")
    with pytest.raises(UserError, match=r"expects \[N, 4\]"):
        SEGNN(4)(Batch.from_data_list([_ring(5, [0])]))
    with pytest.raises(UserError, match="at least 2 graphs"):
        F.suff_nec(LinearMock(), [_ring(5, [0])])


# ---------------------------------------------------------------------------- data
def test_color_count_graphs():
    gs = color_count_graphs(30, n_min=3, n_max=8, seed=1)
    assert [g.x.tolist() for g in gs] == [g.x.tolist() for g in color_count_graphs(30, n_min=3, n_max=8, seed=1)]
    for g in gs:
        c = g.x.argmax(1)
        n_r, n_b = int((c == 0).sum()), int((c == 1).sum())
        assert (n_r, n_b) == (int(g.n_red), int(g.n_blue)) and int(g.y) == int(n_b > n_r)
        assert c[-2] == GREEN and c[-1] == VIOLET
        n = g.x.shape[0]
        assert not ((g.edge_index == n - 1) | (g.edge_index == n - 2)).any()  # the markers are isolated
        assert g.relevant.sum() == n_r + n_b
        assert int(g.degenerate_target.argmax()) == (n - 2 if int(g.y) else n - 1)
    with pytest.raises(UserError, match="n_min"):
        color_count_graphs(3, n_min=5, n_max=2)
    tr, va, te = split_indices(10, 6, 2)
    assert sorted([*tr, *va, *te]) == list(range(10))
    with pytest.raises(UserError, match="n_train"):
        split_indices(10, 9, 2)


def test_ba_motif_graphs_and_ba_shapes():
    state = torch.random.get_rng_state()
    gs = ba_motif_graphs(10, n_base=8, seed=0)
    assert torch.equal(state, torch.random.get_rng_state())  # the caller's RNG is untouched
    assert sorted(int(g.y) for g in gs) == [0] * 5 + [1] * 5
    assert all(int(g.relevant.sum()) == 5 for g in gs)  # house and 5-cycle both have 5 nodes
    bs = ba_shapes(n_base=30, n_motifs=4)
    assert bs.num_nodes == 30 + 4 * 5 and int(bs.node_mask.sum()) == 20
    with pytest.raises(UserError, match="n_graphs"):
        ba_motif_graphs(1)


def _same_data(a, b) -> bool:
    """Two generated data sets (a Data or a list of Data) are identical in every tensor attribute."""
    a, b = (a if isinstance(a, list) else [a]), (b if isinstance(b, list) else [b])
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if set(x.keys()) != set(y.keys()):
            return False
        for k in x.keys():
            u, v = x[k], y[k]
            if torch.is_tensor(u) and not (u.shape == v.shape and torch.equal(u, v)):
                return False
    return True


_GENERATORS = {
    "color_count_graphs": lambda seed: color_count_graphs(12, n_min=3, n_max=9, seed=seed),
    "ba_motif_graphs": lambda seed: ba_motif_graphs(6, n_base=10, seed=seed),
    "ba_shapes": lambda seed: ba_shapes(n_base=40, n_motifs=5, seed=seed),
}


@pytest.mark.parametrize("name", sorted(_GENERATORS))
def test_generators_depend_on_their_seed_alone(name):
    """Every generator is a function of its own seed: numpy's and torch's global random states (set to two
    different values) change neither edge_index nor x nor y (PyG's BAGraph / barabasi_albert_graph read
    numpy's global state; these generators draw from their own np.random.Generator), and the global states
    are left as they were."""
    import random

    import numpy as np

    gen = _GENERATORS[name]
    outs = []
    for glob in (1, 2):
        np.random.seed(glob)
        torch.manual_seed(100 + glob)
        random.seed(200 + glob)
        np_state, t_state, py_state = np.random.get_state()[1].copy(), torch.random.get_rng_state(), random.getstate()
        outs.append(gen(3))
        assert np.array_equal(np_state, np.random.get_state()[1]), "numpy's global state was drawn from"
        assert torch.equal(t_state, torch.random.get_rng_state()), "torch's global state was drawn from"
        assert py_state == random.getstate(), "python's global state was drawn from"
    a, b = outs
    assert _same_data(a, b)
    for g in a if isinstance(a, list) else [a]:
        assert g.edge_index.numel() and g.y is not None and g.y.numel()
        assert g.x is not None or name == "ba_shapes"  # BA-Shapes has no features, only structure and roles
    assert not _same_data(a, gen(4))  # and the seed does matter


class AttrModel:
    """p1 depends on per-edge weights and node positions: sigmoid(sum edge_attr[:, 0] - sum pos[:, 0]) per graph.
    It checks that every edge attribute lines up with edge_index and every position with x (x[:, 1] = node id,
    pos[:, 1] = the same id, edge_attr[:, 1] = 100 * src id + dst id), so a batch that drops or misaligns them
    fails loudly."""

    def _check(self, batch):
        assert batch.edge_attr.shape[0] == batch.edge_index.shape[1], "edge_attr not carried with the edges"
        assert torch.equal(batch.pos[:, 1], batch.x[:, 1]), "pos not carried with the nodes"
        ids = batch.x[:, 1]
        assert torch.equal(batch.edge_attr[:, 1], 100 * ids[batch.edge_index[0]] + ids[batch.edge_index[1]])

    def classify(self, batch, scores):
        self._check(batch)
        G = n_graphs_of(batch)
        e = torch.zeros(G).index_add_(0, batch.batch[batch.edge_index[0]], batch.edge_attr[:, 0])
        p = torch.zeros(G).index_add_(0, batch.batch, batch.pos[:, 0])
        p1 = torch.sigmoid(e - p)
        return torch.stack([1 - p1, p1], 1)

    def __call__(self, batch):
        s = batch.x[:, 0]
        return self.classify(batch, (s >= 0.5).float()), s


def _attr_graph(n, r_nodes, seed):
    g = _ring(n, r_nodes, seed)
    gen = torch.Generator().manual_seed(seed + 100)
    ids = g.x[:, 1]
    g.edge_attr = torch.stack([torch.rand(g.edge_index.shape[1], generator=gen),
                               100 * ids[g.edge_index[0]] + ids[g.edge_index[1]]], 1)
    g.pos = torch.stack([torch.rand(n, generator=gen), ids], 1)
    return g


def test_perturbed_and_induced_graphs_carry_edge_attr_and_pos():
    """EST's perturbed batches (batched and one by one), fidelity's induced subgraphs and suff/nec's spliced
    graphs keep edge_attr and pos aligned with the edges and nodes they keep (they were dropped before)."""
    graphs = [_attr_graph(10, [0, 1, 4], seed=s) for s in range(5)]
    model = AttrModel()
    a = F.est(model, graphs, K=6, seed=2, graphs_per_step=3)
    b = F.est(model, graphs, K=6, seed=2, batched=False)
    assert torch.allclose(a.changes, b.changes, atol=1e-6) and (a.changes > 0).any()
    # the oracle: each perturbed copy as its own Data through PyG's own subgraph slicing
    for i, g in enumerate(graphs):
        p0 = model(Batch.from_data_list([g]))[0]
        R = g.x[:, 0] >= 0.5
        nk, ek = F.perturbation_draws(g, R, 6, 0.5, 0.5, torch.Generator().manual_seed(2 + i))
        for k in range(6):
            copy = g.edge_subgraph(ek[k]).subgraph(nk[k])
            pk = model(Batch.from_data_list([copy]))[0]
            assert abs(float(p0[0, p0.argmax()] - pk[0, p0.argmax()])) == pytest.approx(float(a.changes[i, k]),
                                                                                          abs=1e-6)
    fid = F.fidelity(model, graphs)
    assert set(fid) == {"fid_minus", "fid_plus"}
    F.suff_nec(model, graphs, samples=2)
    with pytest.raises(UserError, match="same attributes"):
        F.est(model, graphs + [_ring(10, [0, 1], seed=9)], K=2)


class LookupAttrModel(AttrModel):
    """AttrModel that also checks every value it is given against the original graphs: each edge's
    edge_attr row and each node's pos row must be the row of that edge / node in the graph it came from
    (pos[:, 2] tags the source graph), whatever perturbed, induced or spliced batch the metric built."""

    def __init__(self, graphs):
        self.edge, self.node, self.seen = {}, {}, 0
        for g in graphs:
            tag = g.pos[:, 2]
            for e in range(g.edge_index.shape[1]):
                u, v = g.edge_index[:, e].tolist()
                self.edge[(float(tag[u]), float(g.x[u, 1]), float(g.x[v, 1]))] = g.edge_attr[e].clone()
            for u in range(g.x.shape[0]):
                self.node[(float(tag[u]), float(g.x[u, 1]))] = g.pos[u].clone()

    def _check(self, batch):
        # nodes are identified by pos (x is zeroed outside the kept part by fidelity's removal="zero")
        assert batch.edge_attr.shape == (batch.edge_index.shape[1], 2), "edge_attr not carried with the edges"
        assert batch.pos.shape == (batch.x.shape[0], 3), "pos not carried with the nodes"
        tag, ids = batch.pos[:, 2], batch.pos[:, 1]
        zeroed = (batch.x == 0).all(1)
        assert torch.equal(ids[~zeroed], batch.x[~zeroed, 1]), "pos not aligned with x"
        for u in range(batch.x.shape[0]):
            assert torch.equal(batch.pos[u], self.node[(float(tag[u]), float(ids[u]))])
        src, dst = batch.edge_index
        for e in range(src.numel()):
            u, v = int(src[e]), int(dst[e])
            assert tag[u] == tag[v], "an edge joins nodes of two graphs"
            assert torch.equal(batch.edge_attr[e], self.edge[(float(tag[u]), float(ids[u]), float(ids[v]))])
        self.seen += 1


def test_metrics_on_a_pyg_batch_keep_edge_attr_and_pos():
    """A PyG Batch with edge_attr [E, 2] and pos [N, 3] goes through EST (batched, one by one, frozen), Fid±
    (both removals), RFid±, CF-Fid and Suff/Nec: every batch the model sees carries the attributes of exactly
    the edges and nodes it kept (values looked up in the source graphs), and the results equal those of the
    same graphs given as a list."""
    graphs = []
    for s in range(4):
        g = _attr_graph(9, [0, 2, 5], seed=s)
        g.pos = torch.cat([g.pos, torch.full((9, 1), float(s))], 1)
        graphs.append(g)
    batch = Batch.from_data_list(graphs)
    model = LookupAttrModel(graphs)
    runs = {
        "est": lambda gs: F.est(model, gs, K=5, seed=1).changes,
        "est_loop": lambda gs: F.est(model, gs, K=5, seed=1, batched=False).changes,
        "est_frozen": lambda gs: F.est(model, gs, K=5, seed=1, frozen=True).changes,
        "fid": lambda gs: torch.stack(list(F.fidelity(model, gs, per_graph=True).values())),
        "fid_zero": lambda gs: torch.stack(list(F.fidelity(model, gs, removal="zero", per_graph=True).values())),
        "rfid": lambda gs: torch.stack(list(F.robust_fidelity(model, gs, samples=3, per_graph=True).values())),
        "cf": lambda gs: F.cf_fidelity(model, gs, samples=3, per_graph=True),
        "suffnec": lambda gs: torch.stack(list(F.suff_nec(model, gs, samples=2, per_graph=True).values())),
    }
    for name, fn in runs.items():
        before = model.seen
        a, b = fn(batch), fn(graphs)
        assert model.seen > before, name
        assert a.shape == b.shape and torch.allclose(a, b, atol=1e-6), name
    # the model's output depends on edge_attr and pos, so dropping or shuffling them would show in EST
    assert (runs["est"](batch) > 0).any()


def test_training_batches_equal_torch_geometric_dataloader():
    """The hand-collated training batches (segnn._loader) are the DataLoader's: same order, equal tensors."""
    from torch_geometric.loader import DataLoader

    from iclr26.experiments.degenerate_explanations import add_distractors
    from iclr26.graphs.segnn import _Batches, _loader

    graphs = add_distractors(color_count_graphs(23, seed=3), d_min=0, d_max=3, seed=1)
    for seed, bs, shuffle in ((0, 5, True), (7, 64, True), (11, 4, False), (2, 1, True)):
        fast = _loader(graphs, bs, seed, shuffle)
        assert isinstance(fast, _Batches) and len(fast) == -(-len(graphs) // bs)
        ref = DataLoader(graphs, batch_size=bs, shuffle=shuffle, generator=torch.Generator().manual_seed(seed))
        got, want = list(fast), list(ref)
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            assert n_graphs_of(a) == n_graphs_of(b) == b.num_graphs
            for key in (*b.keys(), "batch", "ptr"):
                assert torch.equal(a[key], b[key]) and a[key].dtype == b[key].dtype, key
    # graphs torch-geometric collates specially (an extra *_index key, a non-tensor attribute) keep its DataLoader
    odd = [Data(x=g.x, edge_index=g.edge_index, y=g.y, name="g") for g in graphs[:4]]
    assert isinstance(_loader(odd, 2, 0), DataLoader)
