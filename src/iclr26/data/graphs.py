"""Graph data sets with a known ground truth, as PyG ``Data`` objects (generated offline, seeded).

* :func:`color_count_graphs` — the red/blue counting task of *GNN Explanations that do not Explain*
  (P9, "BAColorGVIsolated"): a Barabási–Albert graph on red and blue nodes plus one isolated green
  and one isolated violet node; the label is 1 iff there are more blue than red nodes. The relevant
  nodes (the honest explanation) are the red and blue ones.
* :func:`ba_motif_graphs` — graph classification with PyG's motifs (``HouseMotif`` / ``CycleMotif``)
  attached to a Barabási–Albert graph the way PyG's ``ExplainerDataset`` does it, but drawn from a
  seeded generator (PyG's ``BAGraph`` reads numpy's global state): class 1 has a house attached, class 0
  a 5-cycle; the motif nodes are the ground truth.
* :func:`ba_shapes` — the node-classification BA-Shapes graph built the same way.
"""

from __future__ import annotations

import numpy as np
import torch

from iclr26.core.errors import UserError

#: colour channels of the one-hot node features of :func:`color_count_graphs`
COLORS = ("red", "blue", "green", "violet")
RED, BLUE, GREEN, VIOLET = range(4)


def _ba_edges(n: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """Undirected Barabási–Albert edges on ``n`` nodes (each new node attaches to ``m`` old ones by degree)."""
    if n <= 1:
        return np.zeros((0, 2), dtype=np.int64)
    m0 = min(m, n - 1)
    edges = [(i, j) for i in range(m0 + 1) for j in range(i)]  # a small clique to start from
    targets: list[int] = [v for e in edges for v in e]
    for v in range(m0 + 1, n):
        chosen: set[int] = set()
        while len(chosen) < min(m, v):
            chosen.add(int(targets[rng.integers(len(targets))]))
        for u in chosen:
            edges.append((v, u))
            targets += [v, u]
    return np.asarray(edges, dtype=np.int64)


def color_count_graphs(n_graphs: int, *, n_min: int = 3, n_max: int = 15, m: int = 2, seed: int = 0) -> list:
    """``n_graphs`` red/blue counting graphs with isolated green and violet marker nodes.

    Each graph draws ``n_R, n_B ~ U{n_min..n_max}``, joins the ``n_R + n_B`` coloured nodes (colours in a
    random order) by a BA graph with ``m`` edges per new node, and appends one isolated green and one
    isolated violet node (the last two nodes). Node features ``x`` are one-hot colours (R, B, G, V).
    Attributes: ``y`` (1 iff n_B > n_R, ties 0), ``relevant`` (bool, red or blue), ``degenerate_target``
    (float: the green node if y = 1, else the violet node), ``n_red``, ``n_blue``.
    """
    from torch_geometric.data import Data
    from torch_geometric.utils import to_undirected

    if n_graphs < 1:
        raise UserError(f"n_graphs={n_graphs}: need at least 1 graph")
    if not 1 <= n_min <= n_max:
        raise UserError(f"n_min={n_min}, n_max={n_max}: need 1 <= n_min <= n_max")
    if m < 1:
        raise UserError(f"m={m}: BA attachment needs m >= 1")
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_graphs):
        n_r, n_b = (int(v) for v in rng.integers(n_min, n_max + 1, size=2))
        n = n_r + n_b
        colours = np.r_[np.full(n_r, RED), np.full(n_b, BLUE)]
        rng.shuffle(colours)
        colours = np.r_[colours, GREEN, VIOLET]
        e = torch.as_tensor(_ba_edges(n, m, rng).T)
        edge_index = to_undirected(e, num_nodes=n + 2) if e.numel() else torch.zeros(2, 0, dtype=torch.long)
        x = torch.nn.functional.one_hot(torch.as_tensor(colours), 4).float()
        y = int(n_b > n_r)
        target = torch.zeros(n + 2)
        target[n if y == 1 else n + 1] = 1.0
        out.append(Data(x=x, edge_index=edge_index, y=torch.tensor([y]), relevant=torch.as_tensor(colours < GREEN),
                        degenerate_target=target, n_red=torch.tensor([n_r]), n_blue=torch.tensor([n_b])))  # fmt: skip
    return out


def split_indices(n: int, n_train: int, n_val: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A seeded random split of ``range(n)`` into train / validation / test index arrays."""
    if n_train < 1 or n_val < 0 or n_train + n_val >= n:
        raise UserError(f"n_train={n_train}, n_val={n_val}: need n_train >= 1, n_val >= 0 and n_train + n_val < {n}")
    perm = np.random.default_rng(seed).permutation(n)
    return perm[:n_train], perm[n_train : n_train + n_val], perm[n_train + n_val :]


def _pyg_ba_edges(n: int, m: int, rng: np.random.Generator) -> torch.Tensor:
    """PyG's ``barabasi_albert_graph`` algorithm drawn from ``rng`` (PyG's own draws from numpy's and torch's
    global generators, so its graphs depended on whatever state a run started with)."""
    from torch_geometric.utils import remove_self_loops, to_undirected

    if not 0 < m < n:
        raise UserError(f"BA graph: need 0 < edges per node ({m}) < nodes ({n})")
    row, col = np.arange(m), rng.permutation(m)
    for i in range(m, n):
        row = np.r_[row, np.full(m, i)]
        col = np.r_[col, rng.choice(np.r_[row, col], m)]
    ei = torch.as_tensor(np.stack([row, col]), dtype=torch.long)
    ei, _ = remove_self_loops(ei)
    return to_undirected(ei, num_nodes=n)


def _attach_motifs(n_base: int, ba_edges: int, motif, n_motifs: int, rng: np.random.Generator):
    """PyG's ``ExplainerDataset.get_graph`` with a seeded generator: a BA base graph with ``n_motifs``
    copies of ``motif`` (a PyG motif generator), each joined by one edge from a random base node to a random
    motif node. Returns a ``Data`` with ``edge_index``, ``y`` (0 base, motif roles from 1), ``node_mask``
    and ``edge_mask`` (1 on motif nodes / edges)."""
    from torch_geometric.data import Data

    base = _pyg_ba_edges(n_base, ba_edges, rng)
    eis, ys = [base], [torch.zeros(n_base, dtype=torch.long)]
    node_masks, edge_masks = [torch.zeros(n_base)], [torch.zeros(base.shape[1])]
    n = n_base
    for i in rng.permutation(n_base)[:n_motifs].tolist():
        m = motif()
        eis.append(m.edge_index + n)
        node_masks.append(torch.ones(m.num_nodes))
        edge_masks.append(torch.ones(m.edge_index.shape[1]))
        j = int(rng.integers(m.num_nodes)) + n
        eis.append(torch.tensor([[i, j], [j, i]]))
        edge_masks.append(torch.zeros(2))
        y = getattr(m, "y", None)
        ys.append(y + 1 if isinstance(y, torch.Tensor) and int(y.min()) == 0 else
                  y if isinstance(y, torch.Tensor) else torch.ones(m.num_nodes, dtype=torch.long))
        n += m.num_nodes
    return Data(edge_index=torch.cat(eis, dim=1), y=torch.cat(ys), node_mask=torch.cat(node_masks),
                edge_mask=torch.cat(edge_masks), num_nodes=n)


def _explainer_graphs(motif: str, n_graphs: int, n_base: int, seed: int, ba_edges: int) -> list:
    from torch_geometric.datasets.motif_generator import CycleMotif, HouseMotif

    gen = HouseMotif() if motif == "house" else CycleMotif(5)
    rng = np.random.default_rng(seed)
    return [_attach_motifs(n_base, ba_edges, gen, 1, rng) for _ in range(n_graphs)]


def ba_motif_graphs(n_graphs: int, *, n_base: int = 20, ba_edges: int = 1, seed: int = 0) -> list:
    """BA graphs with one house (label 1) or one 5-cycle (label 0) attached, half each, shuffled.

    Built like PyG's ``ExplainerDataset`` (no download) from a seeded generator. Node features are ``[1, degree / 4]``;
    ``relevant`` marks the motif nodes (the ground-truth explanation); ``y`` is the graph label.
    """
    from torch_geometric.data import Data
    from torch_geometric.utils import degree

    if n_graphs < 2:
        raise UserError(f"n_graphs={n_graphs}: need at least 2 graphs (one per class)")
    if n_base < 2:
        raise UserError(f"n_base={n_base}: the BA base graph needs at least 2 nodes")
    n1 = n_graphs // 2
    graphs = []
    for label, motif, n in ((1, "house", n1), (0, "cycle", n_graphs - n1)):
        for g in _explainer_graphs(motif, n, n_base, seed + 7919 * label, ba_edges):
            deg = degree(g.edge_index[0], g.num_nodes)
            x = torch.stack([torch.ones(g.num_nodes), deg / 4.0], dim=1)
            graphs.append(Data(x=x, edge_index=g.edge_index, y=torch.tensor([label]), relevant=g.node_mask.bool()))
    order = np.random.default_rng(seed).permutation(len(graphs))
    return [graphs[i] for i in order]


def ba_shapes(*, n_base: int = 300, n_motifs: int = 80, seed: int = 0):
    """The BA-Shapes node-classification graph (BA base with 5 edges per node, ``n_motifs`` houses) built
    like PyG's ``ExplainerDataset`` but from a seeded generator."""
    if n_base < 2 or n_motifs < 1:
        raise UserError(f"n_base={n_base}, n_motifs={n_motifs}: need n_base >= 2 and n_motifs >= 1")
    from torch_geometric.datasets.motif_generator import HouseMotif

    return _attach_motifs(n_base, min(5, n_base - 1), HouseMotif(), n_motifs, np.random.default_rng(seed))


__all__ = ["COLORS", "color_count_graphs", "split_indices", "ba_motif_graphs", "ba_shapes"]
