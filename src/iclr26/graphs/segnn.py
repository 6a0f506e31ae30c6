"""A GSAT-style self-explainable GNN (SE-GNN) on torch-geometric, and its three training recipes.

An SE-GNN is ``f = g ∘ e``: the extractor ``e`` scores every node, ``s_v = σ(MLP(h_v))`` with ``h`` from
an ACR-GNN (aggregate-combine-readout: ``h'_v = ReLU(W_s h_v + W_n Σ_{u∈N(v)} h_u + W_r Σ_{u∈G} h_u)``;
the readout term is what lets an isolated node's score depend on the whole graph), and the classifier
``g`` predicts from the selected part: ``"linear"`` is ``Linear(Σ_v s_v x_v)``, ``"gnn"`` a GraphConv
network on the node features weighted by ``s`` (edge weights ``s_u s_v``). At evaluation the
explanation is hard: ``R = {v : s_v >= threshold}``, and the classifier sees the 0/1 mask.

Protocol used by :mod:`iclr26.graphs.faithfulness`: ``model(batch) -> (probs [G, C], scores [N])`` runs
extractor and classifier; ``model.classify(batch, scores) -> probs`` runs the classifier alone on
given node scores (the explanation held fixed).

Training: :func:`pretrain_extractor` supervises the node scores with any per-node target (the
red/blue nodes plant a sufficient explanation, the green-iff-y=1 / violet-iff-y=0 rule a degenerate
one), :func:`train_classifier` then fits the classifier on the frozen hard selection, and
:func:`train_gsat` trains end to end with a concrete relaxation and ``KL(Bern(s) || Bern(r))``.
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F
from torch import nn

from iclr26.core.errors import UserError

log = logging.getLogger(__name__)

CLASSIFIERS = ("linear", "gnn")


def n_graphs_of(batch) -> int:
    """Number of graphs in a PyG batch (``_num_graphs``/``ptr`` when set, else from ``batch``)."""
    if getattr(batch, "_num_graphs", None) is not None:
        return int(batch._num_graphs)
    if getattr(batch, "ptr", None) is not None:
        return int(batch.ptr.numel() - 1)
    b = getattr(batch, "batch", None)
    return int(b.max()) + 1 if b is not None and b.numel() else 1


def batch_vector(batch) -> torch.Tensor:
    b = getattr(batch, "batch", None)
    return b if b is not None else torch.zeros(batch.x.shape[0], dtype=torch.long, device=batch.x.device)


class ACRLayer(nn.Module):
    """``ReLU(W_s h_v + W_n Σ_{u∈N(v)} h_u + W_r Σ_{u∈G} h_u)``: PyG ``GraphConv`` (sum) plus a readout."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        from torch_geometric.nn import GraphConv

        self.conv = GraphConv(d_in, d_out, aggr="add")  # W_s h_v (lin_root) + W_n Σ_N h_u (lin_rel)
        self.readout = nn.Linear(d_in, d_out, bias=False)

    def forward(self, h, edge_index, batch, n_graphs, edge_weight=None):
        from torch_geometric.nn import global_add_pool

        g = global_add_pool(h, batch, size=n_graphs)  # [G, d_in]
        return F.relu(self.conv(h, edge_index, edge_weight) + self.readout(g)[batch])


class SEGNN(nn.Module):
    """Extractor (ACR-GNN -> node score) + classifier on the selection; see the module docstring."""

    def __init__(self, d_in: int, n_classes: int = 2, *, hidden: int = 32, layers: int = 2,
                 classifier: str = "linear", threshold: float = 0.5):  # fmt: skip
        super().__init__()
        if classifier not in CLASSIFIERS:
            raise UserError(f"classifier={classifier!r}; allowed: {', '.join(CLASSIFIERS)}")
        if d_in < 1 or n_classes < 2 or hidden < 1 or layers < 1:
            raise UserError(f"d_in={d_in}, n_classes={n_classes}, hidden={hidden}, layers={layers}: "
                            "need d_in, hidden, layers >= 1 and n_classes >= 2")  # fmt: skip
        if not 0.0 < threshold < 1.0:
            raise UserError(f"threshold={threshold}: must lie in (0, 1)")
        self.d_in, self.n_classes, self.threshold, self.classifier_kind = d_in, n_classes, threshold, classifier
        dims = [d_in] + [hidden] * layers
        self.ext_layers = nn.ModuleList(ACRLayer(a, b) for a, b in zip(dims[:-1], dims[1:], strict=True))
        self.ext_head = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        if classifier == "linear":
            self.cls_head = nn.Linear(d_in, n_classes)
        else:
            from torch_geometric.nn import GraphConv

            self.cls_convs = nn.ModuleList([GraphConv(d_in, hidden), GraphConv(hidden, hidden)])
            self.cls_head = nn.Linear(hidden, n_classes)

    # ---- extractor
    def extract_logits(self, batch) -> torch.Tensor:
        """Node logits ``[N]`` of the extractor."""
        _check_batch(batch, self.d_in)
        b, G = batch_vector(batch), n_graphs_of(batch)
        h = batch.x
        for layer in self.ext_layers:
            h = layer(h, batch.edge_index, b, G)
        return self.ext_head(h).squeeze(-1)

    def extract(self, batch) -> torch.Tensor:
        """Node scores ``s_v in [0, 1]``, ``[N]``."""
        return torch.sigmoid(self.extract_logits(batch))

    # ---- classifier
    def classify_logits(self, batch, scores: torch.Tensor) -> torch.Tensor:
        from torch_geometric.nn import global_add_pool

        b, G = batch_vector(batch), n_graphs_of(batch)
        w = scores.reshape(-1, 1).to(batch.x.dtype)
        if self.classifier_kind == "linear":
            return self.cls_head(global_add_pool(w * batch.x, b, size=G))
        ei = batch.edge_index
        ew = (w[ei[0], 0] * w[ei[1], 0]) if ei.numel() else None
        h = w * batch.x
        for conv in self.cls_convs:
            h = F.relu(conv(h, ei, ew))
        return self.cls_head(global_add_pool(h * w, b, size=G))

    def classify(self, batch, scores: torch.Tensor) -> torch.Tensor:
        """Class probabilities ``[G, C]`` from the classifier alone, on the given node scores / mask."""
        return torch.softmax(self.classify_logits(batch, scores), dim=-1)

    def hard(self, scores: torch.Tensor) -> torch.Tensor:
        return (scores >= self.threshold).to(scores.dtype)

    def forward(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        """``(probs [G, C], scores [N])``: the full model, classifying on the hard selection."""
        s = self.extract(batch)
        return self.classify(batch, self.hard(s)), s


def _check_batch(batch, d_in: int) -> None:
    x, ei = getattr(batch, "x", None), getattr(batch, "edge_index", None)
    if x is None or ei is None:
        raise UserError("graph input needs .x [N, d] and .edge_index [2, E] (a torch_geometric Data or Batch)")
    if x.dim() != 2 or x.shape[1] != d_in:
        raise UserError(f"x has shape {tuple(x.shape)}; the model expects [N, {d_in}]")
    if ei.dim() != 2 or ei.shape[0] != 2:
        raise UserError(f"edge_index has shape {tuple(ei.shape)}; expected [2, E]")


class GraphBatch:
    """A mini-batch of graphs as the training loops read it: ``x``, ``edge_index``, ``batch``, ``ptr`` and every
    other tensor attribute (``b.y``, ``b["relevant"]``), concatenated as torch-geometric's ``Batch`` does."""

    def __init__(self, tensors: dict[str, torch.Tensor], num_graphs: int):
        self.__dict__["_tensors"] = tensors
        self.__dict__["_num_graphs"] = num_graphs

    def __getattr__(self, key: str):
        try:
            return self.__dict__["_tensors"][key]
        except KeyError:
            raise AttributeError(key) from None

    def __getitem__(self, key: str) -> torch.Tensor:
        return self._tensors[key]

    @property
    def num_graphs(self) -> int:
        return self._num_graphs


def _plain_tensor_graphs(graphs: list) -> list[str] | None:
    """The attribute names to batch by hand, or None where torch-geometric's collate is needed (a key it treats
    specially, a non-tensor attribute, graphs with different keys or without ``x``)."""
    keys = sorted(graphs[0].keys())
    if "x" not in keys or "edge_index" not in keys:
        return None
    for g in graphs:
        if sorted(g.keys()) != keys:
            return None
        for k in keys:
            v = g[k]
            if not isinstance(v, torch.Tensor) or v.dim() == 0:
                return None
            if k != "edge_index" and ("index" in k or "face" in k or "adj" in k or k in ("batch", "ptr")):
                return None
    return keys


class _Batches:
    """The batches of ``torch_geometric.loader.DataLoader(graphs, batch_size, shuffle, generator)`` in the same
    order and with equal tensors, concatenated directly: its generic collate was a third of the
    degenerate-explanations default's time (23,500 batches). Iterating draws the order anew, as the loader does."""

    def __init__(self, graphs: list, keys: list[str], batch_size: int, seed: int, shuffle: bool):
        self.graphs, self.keys, self.batch_size, self.seed, self.shuffle = graphs, keys, batch_size, seed, shuffle

    def __len__(self) -> int:
        return -(-len(self.graphs) // self.batch_size)

    def __iter__(self):
        n = len(self.graphs)
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed)
            torch.empty((), dtype=torch.int64).random_(generator=g)  # the loader's iterator draws its base seed first
            order = torch.randperm(n, generator=g).tolist()
        else:
            order = list(range(n))
        for i in range(0, n, self.batch_size):
            yield self._collate([self.graphs[j] for j in order[i : i + self.batch_size]])

    def _collate(self, part: list) -> GraphBatch:
        sizes = [int(g.x.shape[0]) for g in part]
        offsets = torch.tensor([0] + sizes[:-1], dtype=torch.long).cumsum(0)
        out = {}
        for k in self.keys:
            if k == "edge_index":
                out[k] = torch.cat([g.edge_index + o for g, o in zip(part, offsets.tolist(), strict=True)], dim=1)
            else:
                out[k] = torch.cat([g[k] for g in part], dim=0)
        dev = part[0].x.device  # batch and ptr live where the graphs do, as in torch-geometric's Batch
        counts = torch.tensor(sizes, dtype=torch.long, device=dev)
        out["batch"] = torch.repeat_interleave(torch.arange(len(part), device=dev), counts)
        out["ptr"] = torch.cat([torch.zeros(1, dtype=torch.long, device=dev), counts.cumsum(0)])
        return GraphBatch(out, len(part))


_CHECK = object()


def _loader(graphs: list, batch_size: int, seed: int, shuffle: bool = True, keys: list[str] | None | object = _CHECK):
    """One epoch's batches. ``keys``: :func:`_plain_tensor_graphs` of ``graphs`` when the caller has it (the
    training loops check the graphs once, not every epoch)."""
    if not graphs:
        raise UserError("no training graphs given")
    if batch_size < 1:
        raise UserError(f"batch_size={batch_size}: must be >= 1")
    if keys is _CHECK:
        keys = _plain_tensor_graphs(graphs)
    if keys is not None:
        return _Batches(graphs, keys, batch_size, seed, shuffle)
    from torch_geometric.loader import DataLoader

    g = torch.Generator().manual_seed(seed)
    return DataLoader(graphs, batch_size=batch_size, shuffle=shuffle, generator=g)


def pretrain_extractor(model: SEGNN, graphs: list, target: str, *, epochs: int = 40, lr: float = 1e-3,
                       batch_size: int = 64, seed: int = 0) -> list[float]:  # fmt: skip
    """Supervise the extractor's node scores with the per-node 0/1 attribute ``target`` (BCE); returns losses."""
    if not hasattr(graphs[0], target):
        raise UserError(f"graphs have no node attribute {target!r} to use as the extractor target")
    params = list(model.ext_layers.parameters()) + list(model.ext_head.parameters())
    opt = torch.optim.Adam(params, lr=lr, foreach=True)
    keys = _plain_tensor_graphs(graphs)
    losses = []
    model.train()
    for _ in range(epochs):
        tot = 0.0
        for b in _loader(graphs, batch_size, seed + len(losses), keys=keys):
            loss = F.binary_cross_entropy_with_logits(model.extract_logits(b), b[target].float())
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += loss.item()
        losses.append(tot)
    model.eval()
    return losses


def _classifier_params(model: SEGNN) -> list:
    ps = list(model.cls_head.parameters())
    if model.classifier_kind == "gnn":
        ps += list(model.cls_convs.parameters())
    return ps


def train_classifier(model: SEGNN, graphs: list, *, epochs: int = 40, lr: float = 1e-3, batch_size: int = 64,
                     seed: int = 0) -> list[float]:  # fmt: skip
    """Fit the classifier on the frozen extractor's hard selection (cross-entropy); returns losses."""
    opt = torch.optim.Adam(_classifier_params(model), lr=lr, foreach=True)
    keys = _plain_tensor_graphs(graphs) if graphs else None
    losses = []
    for _ in range(epochs):
        tot = 0.0
        for b in _loader(graphs, batch_size, seed + 1000 + len(losses), keys=keys):
            with torch.no_grad():
                mask = model.hard(model.extract(b))
            loss = F.cross_entropy(model.classify_logits(b, mask), b.y.view(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += loss.item()
        losses.append(tot)
    model.eval()
    return losses


def train_gsat(model: SEGNN, graphs: list, *, r: float = 0.7, beta: float = 1.0, temperature: float = 1.0,
               epochs: int = 40, lr: float = 1e-3, batch_size: int = 64, seed: int = 0) -> list[float]:  # fmt: skip
    """End-to-end GSAT training: CE on concrete-relaxed scores + ``beta * KL(Bern(s) || Bern(r))`` per node."""
    if not 0.0 < r < 1.0:
        raise UserError(f"r={r}: the Bernoulli prior must lie in (0, 1)")
    if temperature <= 0:
        raise UserError(f"temperature={temperature}: must be > 0")
    opt = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    gen = torch.Generator().manual_seed(seed + 77)
    keys = _plain_tensor_graphs(graphs) if graphs else None
    losses = []
    model.train()
    for _ in range(epochs):
        tot = 0.0
        for b in _loader(graphs, batch_size, seed + 2000 + len(losses), keys=keys):
            logit = model.extract_logits(b)
            u = torch.rand(logit.shape, generator=gen).clamp(1e-6, 1 - 1e-6)
            s_relaxed = torch.sigmoid((logit + torch.log(u) - torch.log1p(-u)) / temperature)
            s = torch.sigmoid(logit).clamp(1e-6, 1 - 1e-6)
            kl = s * torch.log(s / r) + (1 - s) * torch.log((1 - s) / (1 - r))
            loss = F.cross_entropy(model.classify_logits(b, s_relaxed), b.y.view(-1)) + beta * kl.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += loss.item()
        losses.append(tot)
    model.eval()
    return losses


@torch.no_grad()
def predict(model, graphs: list, batch_size: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """``(probs [G, C], scores [N_total])`` of ``model`` over ``graphs`` (in order)."""
    from torch_geometric.data import Batch

    probs, scores = [], []
    for i in range(0, len(graphs), batch_size):
        p, s = model(Batch.from_data_list(graphs[i : i + batch_size]))
        probs.append(p)
        scores.append(s)
    return torch.cat(probs), torch.cat(scores)


__all__ = ["SEGNN", "ACRLayer", "CLASSIFIERS", "pretrain_extractor", "train_classifier", "train_gsat", "predict",
           "n_graphs_of"]  # fmt: skip
