"""Graph data sets with a known ground truth, as PyG ``Data`` objects (generated offline, seeded).

* :func:`color_count_graphs` — the red/blue counting task of *GNN Explanations that do not Explain*
  (P9, "BAColorGVIsolated"): a Barabási–Albert graph on red and blue nodes plus one isolated green
  and one isolated violet node; the label is 1 iff there are more blue than red nodes. The relevant
  nodes (the honest explanation) are the red and blue ones.
* :func:`ba_motif_graphs` — graph classification on PyG's local motif generator
  (``ExplainerDataset`` with ``BAGraph`` and ``HouseMotif`` / ``CycleMotif``, no download): class 1 has
  a house attached to a BA graph, class 0 a 5-cycle; the motif nodes are the ground truth.
* :func:`ba_shapes` — the node-classification BA-Shapes graph from the same generator.
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


def _explainer_graphs(motif: str, n_graphs: int, n_base: int, seed: int, ba_edges: int) -> list:
    from torch_geometric.datasets import ExplainerDataset
    from torch_geometric.datasets.graph_generator import BAGraph
    from torch_geometric.datasets.motif_generator import CycleMotif, HouseMotif

    motif = HouseMotif() if motif == "house" else CycleMotif(5)
    # PyG's generators draw from torch's global RNG: fork it so the caller's state is untouched
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        ds = ExplainerDataset(graph_generator=BAGraph(num_nodes=n_base, num_edges=ba_edges),
                              motif_generator=motif, num_motifs=1, num_graphs=n_graphs)  # fmt: skip
        return [ds[i] for i in range(len(ds))]


def ba_motif_graphs(n_graphs: int, *, n_base: int = 20, ba_edges: int = 1, seed: int = 0) -> list:
    """BA graphs with one house (label 1) or one 5-cycle (label 0) attached, half each, shuffled.

    Built with PyG's local ``ExplainerDataset`` (no download). Node features are ``[1, degree / 4]``;
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
    """The BA-Shapes node-classification graph (BA base, ``n_motifs`` houses) from PyG's generator."""
    if n_base < 2 or n_motifs < 1:
        raise UserError(f"n_base={n_base}, n_motifs={n_motifs}: need n_base >= 2 and n_motifs >= 1")
    from torch_geometric.datasets import ExplainerDataset
    from torch_geometric.datasets.graph_generator import BAGraph

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        ds = ExplainerDataset(graph_generator=BAGraph(num_nodes=n_base, num_edges=5),
                              motif_generator="house", num_motifs=n_motifs)  # fmt: skip
        return ds[0]


__all__ = ["COLORS", "color_count_graphs", "split_indices", "ba_motif_graphs", "ba_shapes"]
