"""Faithfulness metrics for self-explainable GNNs, including EST (P9, arXiv 2601.20815).

Every function takes a ``model`` and a list of PyG graphs (``Data``; a ``Batch`` is split). The model
maps a batch to ``(probs [G, C], scores [N])`` and, for the metrics that hold the explanation fixed,
has ``classify(batch, scores) -> probs`` (the classifier alone; see :class:`iclr26.graphs.segnn.SEGNN`).
A single-column output is read as ``p(class 1)`` and widened to two classes. The explanation of graph
``G`` is ``R = {v : s_v >= threshold}`` unless ``masks`` gives it; ``ŷ`` is the model's prediction.

* :func:`est` — the paper's test: keep every node of R, keep each other node with probability
  ``1 - p_node``, take the induced subgraph, drop each remaining undirected edge not inside R with
  probability ``p_edge`` (both directions together), run the **full** model (extractor included) on
  each of K such graphs, score ``max_k |p(ŷ|G) - p(ŷ|G'_k)|`` and reject when some ``argmax`` changes
  (binary tasks: or the perturbed ``p(class 1)`` falls in ``binary_band``). All K perturbations of a
  group of graphs go through the model as one ``Batch``. ``frozen=True`` is the ablation that copies
  the node scores from G instead of re-running the extractor.
* :func:`fidelity` — Fid− (keep only R) and Fid+ (remove R), GraphFramEx-style; ``kind="acc"`` with
  ``removal="zero"`` is exactly ``torch_geometric.explain.metric.fidelity`` for model explanations.
* :func:`robust_fidelity` — RFid± (Zheng et al., ICLR 2024): remove each node of R with probability
  ``alpha_plus`` (RFid+), or each node outside R with probability ``alpha_minus`` (RFid−).
* :func:`cf_fidelity` — CF-Fid (arXiv 2406.07955): node logits redrawn from ``N(mean, std)`` of the
  graph's own logits, squashed by a sigmoid and fed to the classifier.
* :func:`suff_nec` — interventional sufficiency / necessity: R joined to the complement of another
  graph (Suff), or the complement joined to another graph's R (Nec).

All but EST hold the explanation fixed (the extractor is not re-run). Lower Fid−, RFid−, Suff mean
"more faithful"; higher Fid+, RFid+, CF-Fid, Nec mean "more faithful"; higher EST means less faithful.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from iclr26.core.errors import UserError

DISTANCES = ("abs", "tv")
KINDS = ("prob", "acc")
REMOVALS = ("subgraph", "zero")


# ---------------------------------------------------------------------------- input handling
def as_graph_list(graphs) -> list:
    """A list of PyG ``Data`` from a ``Data``, a ``Batch`` or a list; one-line error otherwise."""
    from torch_geometric.data import Batch, Data

    if isinstance(graphs, Batch):
        graphs = graphs.to_data_list()
    elif isinstance(graphs, Data):
        graphs = [graphs]
    if not isinstance(graphs, (list, tuple)) or not graphs:
        raise UserError("graphs must be a non-empty list of torch_geometric Data, a Data or a Batch")
    keys0 = set(graphs[0].keys()) if hasattr(graphs[0], "keys") else set()
    for i, g in enumerate(graphs):
        if hasattr(g, "keys") and set(g.keys()) != keys0:
            raise UserError(f"graph {i} has attributes {sorted(g.keys())} but graph 0 has {sorted(keys0)}; give "
                            "every graph the same attributes (pos, edge_attr, ...)")
        x, ei = getattr(g, "x", None), getattr(g, "edge_index", None)
        if not isinstance(x, torch.Tensor) or x.dim() != 2:
            raise UserError(f"graph {i}: x must be a 2-D tensor [N, d]")
        if not isinstance(ei, torch.Tensor) or ei.dim() != 2 or ei.shape[0] != 2:
            raise UserError(f"graph {i}: edge_index must be a [2, E] tensor")
        if ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= x.shape[0]):
            raise UserError(f"graph {i}: edge_index refers to nodes outside 0..{x.shape[0] - 1}")
    return list(graphs)


def _prob(p: torch.Tensor) -> torch.Tensor:
    """``[G, C]`` probabilities; a single column (or a vector) is ``p(class 1)``."""
    if p.dim() == 1:
        p = p[:, None]
    if p.shape[1] == 1:
        p = torch.cat([1 - p, p], dim=1)
    return p


def _call(model, batch) -> tuple[torch.Tensor, torch.Tensor]:
    out = model(batch)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise UserError("model(batch) must return (class probabilities [G, C], node scores [N])")
    return _prob(out[0]), out[1].reshape(-1)


def _classify(model, batch, scores) -> torch.Tensor:
    if not callable(getattr(model, "classify", None)):
        raise UserError("this metric holds the explanation fixed: the model needs classify(batch, scores) -> probs")
    return _prob(model.classify(batch, scores))


_NOT_CARRIED = ("x", "edge_index", "batch", "ptr")


def _graph_attrs(g) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The node-level and edge-level tensors of ``g`` besides ``x`` / ``edge_index`` (``pos``, ``edge_attr``,
    ``edge_weight``, ...): perturbed and induced graphs carry them, sliced like the nodes and edges they
    keep. Graph-level attributes (``y``) are not carried: the metrics compare predictions, not labels."""
    node, edge = {}, {}
    for k in g.keys():
        v = g[k]
        if k in _NOT_CARRIED or not torch.is_tensor(v) or v.dim() == 0:
            continue
        if g.is_edge_attr(k) and v.shape[0] == g.edge_index.shape[1]:
            edge[k] = v
        elif g.is_node_attr(k) and v.shape[0] == g.x.shape[0]:
            node[k] = v
    return node, edge


def _cat_attrs(extras: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    if not extras or not extras[0]:
        return {}
    keys = set(extras[0])
    if any(set(e) != keys for e in extras):
        raise UserError("graphs carry different node/edge attributes (e.g. some have pos or edge_attr, others "
                        "not); give every graph the same attributes")
    return {k: torch.cat([e[k] for e in extras]) for k in keys}


def _make_batch(xs, eis, n_graphs: int, sizes, extras: list | None = None):
    """One ``Batch`` from per-graph node features, (local) edge indices and carried node/edge attributes."""
    from torch_geometric.data import Batch

    offs = np.cumsum([0] + list(sizes[:-1]))
    x = torch.cat(xs) if xs else torch.zeros(0)
    ei = torch.cat([e + int(o) for e, o in zip(eis, offs, strict=True)], dim=1)
    b = torch.repeat_interleave(torch.arange(n_graphs, device=x.device),
                                torch.as_tensor(sizes, dtype=torch.long, device=x.device))
    out = Batch(x=x, edge_index=ei, batch=b, **_cat_attrs(extras or []))
    out._num_graphs = n_graphs
    return out


def _induced(g, keep: torch.Tensor):
    """Induced subgraph of ``g`` on the bool node mask ``keep``: (x, relabelled edge_index, carried attributes)."""
    from torch_geometric.utils import subgraph

    keep = keep.to(g.x.device)
    ei, _, emask = subgraph(keep, g.edge_index, relabel_nodes=True, num_nodes=g.x.shape[0], return_edge_mask=True)
    node, edge = _graph_attrs(g)
    return g.x[keep], ei, {**{k: v[keep] for k, v in node.items()}, **{k: v[emask] for k, v in edge.items()}}


@torch.no_grad()
def explain(model, graphs, *, threshold: float = 0.5, batch_size: int = 256):
    """``(probs [G, C], per-graph scores, per-graph bool masks R)`` of the full model."""
    from torch_geometric.data import Batch

    _check_unit("threshold", threshold)
    graphs = as_graph_list(graphs)
    probs, scores = [], []
    for i in range(0, len(graphs), batch_size):
        chunk = graphs[i : i + batch_size]
        p, s = _call(model, Batch.from_data_list(chunk))
        probs.append(p)
        scores.extend(torch.split(s, [g.x.shape[0] for g in chunk]))
    return torch.cat(probs), scores, [s >= threshold for s in scores]


def _check_unit(name: str, v: float, *, closed_low: bool = False) -> None:
    ok = (0.0 <= v < 1.0) if closed_low else (0.0 < v < 1.0)
    if not ok:
        raise UserError(f"{name}={v}: must lie in {'[0, 1)' if closed_low else '(0, 1)'}")


def _masks_or_explain(model, graphs, masks, threshold):
    probs, scores, own = explain(model, graphs, threshold=threshold)
    if masks is None:
        return probs, scores, own
    if len(masks) != len(graphs):
        raise UserError(f"masks has {len(masks)} entries for {len(graphs)} graphs; give one bool mask per graph")
    out = []
    for i, (m, g) in enumerate(zip(masks, graphs, strict=True)):
        m = torch.as_tensor(m).reshape(-1)
        if m.numel() != g.x.shape[0]:
            raise UserError(f"mask {i} has {m.numel()} entries for a graph of {g.x.shape[0]} nodes")
        out.append(m.bool())
    return probs, scores, out


# ---------------------------------------------------------------------------- EST
@dataclass
class ESTResult:
    """Per-graph EST outcome. ``changes``/``flipped`` are ``[G, K]`` (rows of skipped graphs are 0)."""

    score: torch.Tensor  # [G] max_k change (nan where skipped)
    rejected: torch.Tensor  # [G] bool
    changes: torch.Tensor  # [G, K]
    flipped: torch.Tensor  # [G, K] bool
    skipped: torch.Tensor  # [G] bool: empty explanation
    pred: torch.Tensor  # [G] predicted class on G
    info: dict = field(default_factory=dict)

    def rejection_rate(self, K: int | None = None) -> float:
        """Mean rejection over non-skipped graphs, using the first ``K`` perturbations (all by default)."""
        k = self.changes.shape[1] if K is None else K
        if not 1 <= k <= self.changes.shape[1]:
            raise UserError(f"K={K}: must lie in 1..{self.changes.shape[1]}")
        ok = ~self.skipped
        return float(self.flipped[ok, :k].any(1).float().mean()) if ok.any() else float("nan")

    def mean_score(self, K: int | None = None) -> float:
        k = self.changes.shape[1] if K is None else K
        ok = ~self.skipped
        return float(self.changes[ok, :k].max(1).values.mean()) if ok.any() else float("nan")

    @property
    def skip_rate(self) -> float:
        return float(self.skipped.float().mean())

    def per_class(self) -> dict[int, float]:
        """Rejection rate per predicted class."""
        ok = ~self.skipped
        return {int(c): float(self.rejected[ok & (self.pred == c)].float().mean())
                for c in torch.unique(self.pred[ok])}  # fmt: skip


def perturbation_draws(g, R: torch.Tensor, K: int, p_node: float, p_edge: float, gen: torch.Generator):
    """EST's K random perturbations of one graph: ``(node_keep [K, n], edge_keep [K, E])`` (bool).

    Nodes of R are always kept; others survive with probability ``1 - p_node``. An edge survives when
    both ends do and, unless both ends lie in R, its undirected pair's draw beats ``p_edge`` — one draw
    per unordered pair, so ``(u, v)`` and ``(v, u)`` go together.
    """
    n = g.x.shape[0]
    u, v = g.edge_index
    node_keep = R[None, :] | (torch.rand(K, n, generator=gen) >= p_node)  # [K, n]
    key = torch.minimum(u, v) * n + torch.maximum(u, v)
    _, inv = torch.unique(key, return_inverse=True)
    n_pairs = int(inv.max()) + 1 if inv.numel() else 0
    edge_r = torch.rand(K, n_pairs, generator=gen)[:, inv]  # [K, E]
    inside = R[u] & R[v]
    edge_keep = node_keep[:, u] & node_keep[:, v] & (inside[None, :] | (edge_r >= p_edge))
    return node_keep, edge_keep


def _perturbed_pieces(g, node_keep, edge_keep, scores):
    """The K perturbed copies of ``g`` as (x, local edge_index, node count, copied scores, carried attributes),
    on ``g``'s device (the draws come from a CPU generator)."""
    dev = g.x.device
    node_keep, edge_keep = node_keep.to(dev), edge_keep.to(dev)
    K, n = node_keep.shape
    new_id = torch.cumsum(node_keep.reshape(-1).long(), 0) - 1  # [K*n] index among all kept nodes
    flat_keep = node_keep.reshape(-1)
    xs = g.x.repeat(K, *([1] * (g.x.dim() - 1)))[flat_keep]
    off = (torch.arange(K, device=dev) * n)[:, None]  # [K, 1]
    src = (g.edge_index[0][None, :] + off)[edge_keep]
    dst = (g.edge_index[1][None, :] + off)[edge_keep]
    ei = torch.stack([new_id[src], new_id[dst]])
    sizes = node_keep.sum(1)
    sc = scores.to(dev).repeat(K)[flat_keep] if scores is not None else None
    node, edge = _graph_attrs(g)
    flat_edge = edge_keep.reshape(-1)
    extra = {k: v.repeat(K, *([1] * (v.dim() - 1)))[flat_keep] for k, v in node.items()}
    extra.update({k: v.repeat(K, *([1] * (v.dim() - 1)))[flat_edge] for k, v in edge.items()})
    return xs, ei, sizes, sc, extra


@torch.no_grad()
def est(model, graphs, *, K: int = 50, p_node: float = 0.5, p_edge: float = 0.5, threshold: float = 0.5,
        distance: str = "abs", binary_band: tuple[float, float] | None = (0.4, 0.6), frozen: bool = False,
        masks: list | None = None, seed: int = 0, graphs_per_step: int = 32, batched: bool = True) -> ESTResult:  # fmt: skip
    """EST over ``graphs`` (see the module docstring). Graph ``i`` draws its perturbations from seed ``seed + i``.

    ``graphs_per_step`` graphs, each with its K perturbations, form one ``Batch`` per forward pass;
    ``batched=False`` runs every perturbed graph alone (same draws, same result; the slow reference).
    """
    from torch_geometric.data import Batch

    if not isinstance(K, int) or K < 1:
        raise UserError(f"K={K}: the number of perturbations must be an integer >= 1")
    _check_unit("p_node", p_node, closed_low=True)
    _check_unit("p_edge", p_edge, closed_low=True)
    if distance not in DISTANCES:
        raise UserError(f"distance={distance!r}; allowed: {', '.join(DISTANCES)}")
    if binary_band is not None and not (0.0 <= binary_band[0] <= binary_band[1] <= 1.0):
        raise UserError(f"binary_band={binary_band}: need 0 <= low <= high <= 1, or None")
    if graphs_per_step < 1:
        raise UserError(f"graphs_per_step={graphs_per_step}: must be >= 1")
    graphs = as_graph_list(graphs)
    probs, scores, Rs = _masks_or_explain(model, graphs, masks, threshold)
    G, C = probs.shape
    pred = probs.argmax(1)
    skipped = torch.tensor([not bool(R.any()) for R in Rs])
    changes = torch.zeros(G, K)
    flipped = torch.zeros(G, K, dtype=torch.bool)
    todo = [i for i in range(G) if not skipped[i]]

    def run(batch, sc):
        if frozen:
            hard = (sc >= threshold).to(batch.x.dtype) if masks is None else sc
            return _classify(model, batch, hard)
        return _call(model, batch)[0]

    n_forward = 0
    for c0 in range(0, len(todo), graphs_per_step if batched else 1):
        idx = todo[c0 : c0 + (graphs_per_step if batched else 1)]
        pieces = []
        for i in idx:
            gen = torch.Generator().manual_seed(int(seed) + i)
            nk, ek = perturbation_draws(graphs[i], Rs[i], K, p_node, p_edge, gen)
            carried = Rs[i].float() if (frozen and masks is not None) else scores[i]
            pieces.append(_perturbed_pieces(graphs[i], nk, ek, carried))
        if batched:
            # each graph's K copies already index its own block of nodes: offset the blocks, one Batch
            sizes = torch.cat([p[2] for p in pieces])
            block = np.cumsum([0] + [int(p[2].sum()) for p in pieces[:-1]])
            ei = torch.cat([p[1] + int(o) for p, o in zip(pieces, block, strict=True)], dim=1)
            batch = Batch(x=torch.cat([p[0] for p in pieces]), edge_index=ei,
                          batch=torch.repeat_interleave(torch.arange(len(sizes), device=sizes.device), sizes),
                          **_cat_attrs([p[4] for p in pieces]))
            batch._num_graphs = len(sizes)
            sc = torch.cat([p[3] for p in pieces])
            out = run(batch, sc).reshape(len(idx), K, C)
            n_forward += 1
        else:
            xg, eg, sz, scg, extra = pieces[0]
            node_keys, _ = _graph_attrs(graphs[idx[0]])
            starts = torch.cumsum(torch.cat([torch.zeros(1, dtype=torch.long, device=sz.device), sz[:-1]]), 0)
            rows = []
            for k in range(K):
                a, b = int(starts[k]), int(starts[k] + sz[k])
                sel = (eg[0] >= a) & (eg[0] < b)
                carried = {key: (v[a:b] if key in node_keys else v[sel]) for key, v in extra.items()}
                one = Batch(x=xg[a:b], edge_index=eg[:, sel] - a,
                            batch=torch.zeros(b - a, dtype=torch.long, device=xg.device), **carried)
                one._num_graphs = 1
                rows.append(run(one, scg[a:b]))
                n_forward += 1
            out = torch.cat(rows)[None]
        for j, i in enumerate(idx):
            p0, pk = probs[i], out[j]  # [C], [K, C]
            if distance == "abs":
                changes[i] = (p0[pred[i]] - pk[:, pred[i]]).abs()
            else:
                changes[i] = 0.5 * (p0[None] - pk).abs().sum(1)
            fl = pk.argmax(1) != pred[i]
            if C == 2 and binary_band is not None:
                fl |= (pk[:, 1] >= binary_band[0]) & (pk[:, 1] <= binary_band[1])
            flipped[i] = fl
    score = torch.where(skipped, torch.full((G,), float("nan")), changes.max(1).values)
    rejected = flipped.any(1) & ~skipped
    return ESTResult(score=score, rejected=rejected, changes=changes, flipped=flipped, skipped=skipped, pred=pred,
                     info={"n_forward": n_forward, "frozen": frozen, "K": K})  # fmt: skip


# ---------------------------------------------------------------------------- fixed-explanation metrics
def _change(p0: torch.Tensor, p1: torch.Tensor, kind: str) -> torch.Tensor:
    """Per-graph change of the prediction: ``|Δ p(ŷ)|`` or ``1[argmax changes]``."""
    y = p0.argmax(1)
    if kind == "acc":
        return (p1.argmax(1) != y).float()
    return (p0.gather(1, y[:, None]) - p1.gather(1, y[:, None])).abs().squeeze(1)


@torch.no_grad()
def _fixed_eval(model, graphs, keeps, carried):
    """Classifier probabilities on induced subgraphs ``keeps[i]`` with the given per-node scores."""
    xs, eis, sizes, sc, extras = [], [], [], [], []
    for g, k, s in zip(graphs, keeps, carried, strict=True):
        x, ei, extra = _induced(g, k)
        xs.append(x)
        eis.append(ei)
        extras.append(extra)
        sizes.append(int(k.sum()))
        sc.append(s.to(x.device)[k.to(x.device)])
    return _classify(model, _make_batch(xs, eis, len(graphs), sizes, extras), torch.cat(sc))


@torch.no_grad()
def fidelity(model, graphs, *, threshold: float = 0.5, kind: str = "prob", removal: str = "subgraph",
             masks: list | None = None, per_graph: bool = False) -> dict:  # fmt: skip
    """Fid− (keep only R) and Fid+ (remove R) with the explanation held fixed.

    ``removal="subgraph"`` takes the induced subgraph; ``"zero"`` zeroes the features of the removed nodes
    and keeps every edge (PyG's ``get_masked_prediction``). ``kind="prob"`` averages ``|Δ p(ŷ)|``,
    ``"acc"`` the share of changed predictions. Returns ``{"fid_minus", "fid_plus"}`` (means over graphs;
    ``per_graph=True``: the per-graph values as ``[G]`` tensors instead).
    """
    if kind not in KINDS:
        raise UserError(f"kind={kind!r}; allowed: {', '.join(KINDS)}")
    if removal not in REMOVALS:
        raise UserError(f"removal={removal!r}; allowed: {', '.join(REMOVALS)}")
    graphs = as_graph_list(graphs)
    probs, _, Rs = _masks_or_explain(model, graphs, masks, threshold)
    hard = [R.float() for R in Rs]
    p_full = probs  # the full model's prediction on G
    if removal == "subgraph":
        p_keep = _fixed_eval(model, graphs, Rs, hard)
        p_drop = _fixed_eval(model, graphs, [~R for R in Rs], hard)
    else:
        from torch_geometric.data import Batch

        def zeroed(keep_fn):
            gs = [g.clone() for g in graphs]
            for g, R in zip(gs, Rs, strict=True):
                g.x = g.x * keep_fn(R).to(g.x.dtype)[:, None]
            return _classify(model, Batch.from_data_list(gs), torch.cat(hard))

        p_keep, p_drop = zeroed(lambda R: R), zeroed(lambda R: ~R)
    out = {"fid_minus": _change(p_full, p_keep, kind), "fid_plus": _change(p_full, p_drop, kind)}
    return out if per_graph else {k: float(v.mean()) for k, v in out.items()}


@torch.no_grad()
def robust_fidelity(model, graphs, *, alpha_plus: float = 0.1, alpha_minus: float = 0.9, samples: int = 10,
                    threshold: float = 0.5, masks: list | None = None, seed: int = 0,
                    per_graph: bool = False) -> dict:  # fmt: skip
    """RFid+ (each node of R removed with probability ``alpha_plus``) and RFid− (each node outside R
    removed with probability ``alpha_minus``), ``|Δ p(ŷ)|`` averaged over ``samples`` draws, mask fixed
    (``per_graph=True``: ``[G]`` tensors of the per-graph averages instead of the means)."""
    _check_unit("alpha_plus", alpha_plus)
    _check_unit("alpha_minus", alpha_minus)
    if samples < 1:
        raise UserError(f"samples={samples}: must be >= 1")
    graphs = as_graph_list(graphs)
    p_full, _, Rs = _masks_or_explain(model, graphs, masks, threshold)
    hard = [R.float() for R in Rs]
    gen = torch.Generator().manual_seed(seed)
    plus, minus = [], []
    for _ in range(samples):
        r = [torch.rand(R.shape, generator=gen) for R in Rs]
        keep_p = [~(R & (u < alpha_plus)) for R, u in zip(Rs, r, strict=True)]
        keep_m = [R | (u >= alpha_minus) for R, u in zip(Rs, r, strict=True)]
        plus.append(_change(p_full, _fixed_eval(model, graphs, keep_p, hard), "prob"))
        minus.append(_change(p_full, _fixed_eval(model, graphs, keep_m, hard), "prob"))
    out = {"rfid_plus": torch.stack(plus).mean(0), "rfid_minus": torch.stack(minus).mean(0)}
    return out if per_graph else {k: float(v.mean()) for k, v in out.items()}


@torch.no_grad()
def cf_fidelity(model, graphs, *, samples: int = 10, threshold: float = 0.5, seed: int = 0,
                masks: list | None = None, per_graph: bool = False):
    """CF-Fid: mean ``|Δ p(ŷ)|`` when each graph's node logits are redrawn from ``N(mean, std)`` of its own
    logits (``logit(s_v)``) and the classifier runs on their sigmoid. Higher = the prediction depends on
    which nodes the explanation picked. ``masks`` replaces the node scores by given hard explanations (1 in
    R, 0 outside); ``per_graph=True`` returns the ``[G]`` per-graph values instead of their mean."""
    from torch_geometric.data import Batch

    if samples < 1:
        raise UserError(f"samples={samples}: must be >= 1")
    graphs = as_graph_list(graphs)
    probs, scores, Rs = _masks_or_explain(model, graphs, masks, threshold)
    if masks is not None:
        scores = [R.float() for R in Rs]
    batch = Batch.from_data_list(graphs)
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(samples):
        new = []
        for s in scores:
            lg = torch.logit(s.clamp(1e-6, 1 - 1e-6))
            sd = lg.std(unbiased=False) if lg.numel() > 1 else torch.tensor(0.0)
            new.append(torch.sigmoid(lg.mean() + sd * torch.randn(lg.shape, generator=gen)))
        out.append(_change(probs, _classify(model, batch, torch.cat(new)), "prob"))
    pg = torch.stack(out).mean(0)
    return pg if per_graph else float(pg.mean())


@torch.no_grad()
def suff_nec(model, graphs, *, samples: int = 5, threshold: float = 0.5, masks: list | None = None,
             seed: int = 0, per_graph: bool = False) -> dict:  # fmt: skip
    """Interventional Suff (R of G plus the complement of a random other graph; lower = sufficient) and Nec
    (the complement of G plus the R of a random other graph; higher = necessary), ``|Δ p(ŷ)|``, mask fixed
    (1 on the R part, 0 on the rest), ``samples`` partners per graph (``per_graph=True``: ``[G]`` tensors)."""
    if samples < 1:
        raise UserError(f"samples={samples}: must be >= 1")
    graphs = as_graph_list(graphs)
    if len(graphs) < 2:
        raise UserError("suff_nec needs at least 2 graphs (it swaps parts between graphs)")
    probs, _, Rs = _masks_or_explain(model, graphs, masks, threshold)
    rng = np.random.default_rng(seed)
    G = len(graphs)
    suff, nec = [], []
    for _ in range(samples):
        partner = (np.arange(G) + rng.integers(1, G, size=G)) % G  # never the graph itself
        for name, acc in (("suff", suff), ("nec", nec)):
            xs, eis, sizes, sc, extras = [], [], [], [], []
            for i, j in enumerate(partner):
                keep_own = Rs[i] if name == "suff" else ~Rs[i]
                keep_other = ~Rs[j] if name == "suff" else Rs[j]
                xa, ea, fa = _induced(graphs[i], keep_own)
                xb, eb, fb = _induced(graphs[j], keep_other)
                xs.append(torch.cat([xa, xb]))
                eis.append(torch.cat([ea, eb + xa.shape[0]], dim=1))
                extras.append(_cat_attrs([fa, fb]))
                sizes.append(xa.shape[0] + xb.shape[0])
                ma = torch.full((xa.shape[0],), 1.0 if name == "suff" else 0.0, device=xa.device)
                mb = torch.full((xb.shape[0],), 0.0 if name == "suff" else 1.0, device=xa.device)
                sc.append(torch.cat([ma, mb]))
            p = _classify(model, _make_batch(xs, eis, G, sizes, extras), torch.cat(sc))
            acc.append(_change(probs, p, "prob"))
    out = {"suff": torch.stack(suff).mean(0), "nec": torch.stack(nec).mean(0)}
    return out if per_graph else {k: float(v.mean()) for k, v in out.items()}


def plausibility_auroc(scores: list, truth: list) -> float:
    """AUROC of the pooled node scores against the pooled ground-truth node mask."""
    from sklearn.metrics import roc_auc_score

    s = torch.cat([torch.as_tensor(v).reshape(-1) for v in scores]).numpy()
    t = torch.cat([torch.as_tensor(v).reshape(-1) for v in truth]).numpy().astype(int)
    if s.shape != t.shape:
        raise UserError(f"{s.shape[0]} scores for {t.shape[0]} ground-truth entries")
    if t.min() == t.max():
        raise UserError("ground truth has a single class; AUROC is undefined")
    return float(roc_auc_score(t, s))


__all__ = ["est", "ESTResult", "perturbation_draws", "fidelity", "robust_fidelity", "cf_fidelity", "suff_nec",
           "explain", "as_graph_list", "plausibility_auroc"]  # fmt: skip
