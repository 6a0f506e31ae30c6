"""Generators of symmetric positive-definite (SPD) matrices for learned linear algebra (P15, RangeFormer).

Training families (batched: ``fn(rng, batch, n) -> [batch, n, n]`` float64):

- ``wishart``: ``G Gᵀ / n + 0.1 I`` with G Gaussian (the "Charton-like" i.i.d. distribution);
- the structured mixture ``structured``: KMS ``ρ^|i-j|``, AR(2) Toeplitz covariances, banded diagonally
  dominant, low rank + diagonal, RBF kernels on random 1-D/2-D points plus noise, Laplacians of
  Erdős–Rényi / Barabási–Albert graphs plus a shift.

Out-of-distribution stand-ins for Matrix Market (:func:`ood_sets`): Hilbert + λI, Lehmer, min(i, j) and
Pascal matrices (scaled to unit diagonal), Matérn-1/2 kernels at length scales outside the training range,
and Laplacians of random connected induced subgraphs of small real networkx graphs.

Targets: :func:`normalise` divides by the mean diagonal ``s`` and :func:`logdet_target` returns
``y = log det(A/s) / n`` in float64, so ``log det A = n (y + log s)``. The families and their parameter
ranges are our reconstruction of the RangeFormer abstract (no paper details were available).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from iclr26.core.errors import UserError

Family = Callable[[np.random.Generator, int, int], np.ndarray]


def _check(batch: int, n: int) -> None:
    if int(batch) < 1 or int(n) < 2:
        raise UserError(f"SPD generators need batch >= 1 and n >= 2, got batch={batch}, n={n}")


def _sym(a: np.ndarray) -> np.ndarray:
    return 0.5 * (a + np.swapaxes(a, -1, -2))


def wishart(rng: np.random.Generator, batch: int, n: int) -> np.ndarray:
    """``G Gᵀ / n + 0.1 I`` with G an n×n standard Gaussian matrix (family W)."""
    _check(batch, n)
    g = rng.standard_normal((batch, n, n))
    return _sym(g @ np.swapaxes(g, 1, 2) / n) + 0.1 * np.eye(n)


def kms(rng: np.random.Generator, batch: int, n: int) -> np.ndarray:
    """Kac–Murdock–Szegő matrix, the symmetric Toeplitz matrix of ``ρ^|i-j|`` (``scipy.linalg.toeplitz``), ρ ~ U(-0.9, 0.9)."""
    from scipy.linalg import toeplitz

    _check(batch, n)
    rho = rng.uniform(-0.9, 0.9, size=batch)
    return np.stack([toeplitz(r ** np.arange(n)) for r in rho])


def ar2_toeplitz(rng: np.random.Generator, batch: int, n: int) -> np.ndarray:
    """Autocovariance Toeplitz matrix (``scipy.linalg.toeplitz``) of a stationary AR(2) process (roots drawn inside
    the unit circle)."""
    from scipy.linalg import toeplitz

    _check(batch, n)
    # characteristic roots r1, r2 (real pair or complex pair) with modulus <= 0.9 -> stationary
    out = np.empty((batch, n, n))
    for b in range(batch):
        if rng.random() < 0.5:
            r1, r2 = rng.uniform(-0.9, 0.9, size=2)
            p1, p2 = r1 + r2, -r1 * r2
        else:
            mod, ang = rng.uniform(0.1, 0.9), rng.uniform(0, np.pi)
            p1, p2 = 2 * mod * np.cos(ang), -(mod**2)
        # Yule-Walker: gamma0 = 1 (normalised), gamma1 = p1/(1-p2), gamma_k = p1 g_{k-1} + p2 g_{k-2}
        g = np.empty(n)
        g[0] = 1.0
        if n > 1:
            g[1] = p1 / (1 - p2)
        for k in range(2, n):
            g[k] = p1 * g[k - 1] + p2 * g[k - 2]
        out[b] = toeplitz(g)
    return out


def banded(rng: np.random.Generator, batch: int, n: int) -> np.ndarray:
    """Symmetric banded matrix (bandwidth 1..3), diagonally dominant by a margin U(0.1, 1)."""
    _check(batch, n)
    a = rng.uniform(-1, 1, size=(batch, n, n))
    bw = rng.integers(1, 4, size=(batch, 1, 1))
    dist = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    a = _sym(a) * ((dist >= 1) & (dist <= bw))
    diag = np.abs(a).sum(-1) + rng.uniform(0.1, 1.0, size=(batch, 1))
    return a + diag[:, :, None] * np.eye(n)


def lowrank_diag(rng: np.random.Generator, batch: int, n: int) -> np.ndarray:
    """``U Uᵀ + diag(d)`` with rank 1..3 and d ~ U(0.05, 1)."""
    _check(batch, n)
    out = np.empty((batch, n, n))
    for b in range(batch):
        r = int(rng.integers(1, 4))
        u = rng.standard_normal((n, r)) / np.sqrt(r)
        out[b] = u @ u.T + np.diag(rng.uniform(0.05, 1.0, size=n))
    return out


def _sqdist(x: np.ndarray) -> np.ndarray:
    return ((x[:, :, None, :] - x[:, None, :, :]) ** 2).sum(-1)  # [batch, n, n]


def rbf_kernel(rng: np.random.Generator, batch: int, n: int, *, lengthscale: tuple[float, float] = (0.2, 2.0),
               noise: tuple[float, float] = (1e-3, 1e-1)) -> np.ndarray:
    """RBF kernel ``exp(-|x-x'|²/2ℓ²) + σ²I`` on n uniform points in [0,1]^D, D ∈ {1, 2}, ℓ ~ U(lengthscale)."""
    _check(batch, n)
    dim = rng.integers(1, 3, size=batch)
    x = rng.uniform(size=(batch, n, 2)) * np.stack([np.ones(batch), dim - 1], 1)[:, None, :]
    ell = rng.uniform(*lengthscale, size=(batch, 1, 1))
    s2 = rng.uniform(*noise, size=(batch, 1, 1))
    return np.exp(-_sqdist(x) / (2 * ell**2)) + s2 * np.eye(n)


def matern12_kernel(rng: np.random.Generator, batch: int, n: int, *, lengthscale: float,
                    noise: tuple[float, float] = (1e-3, 1e-1)) -> np.ndarray:
    """Matérn-1/2 (exponential) kernel ``exp(-|x-x'|/ℓ) + σ²I`` on n uniform points in [0, 1]."""
    _check(batch, n)
    if not lengthscale > 0:
        raise UserError(f"matern12_kernel: lengthscale must be > 0, got {lengthscale}")
    x = rng.uniform(size=(batch, n, 1))
    s2 = rng.uniform(*noise, size=(batch, 1, 1))
    return np.exp(-np.sqrt(_sqdist(x)) / lengthscale) + s2 * np.eye(n)


def _ba_adjacency(rng: np.random.Generator, n: int, m: int) -> np.ndarray:
    """Barabási–Albert preferential attachment (m edges per new node), as an adjacency matrix."""
    a = np.zeros((n, n))
    for i in range(m + 1):  # a small clique to start
        for j in range(i):
            a[i, j] = a[j, i] = 1
    for v in range(m + 1, n):
        deg = a[:v, :v].sum(1)
        targets = rng.choice(v, size=m, replace=False, p=deg / deg.sum())
        a[v, targets] = a[targets, v] = 1
    return a


def graph_laplacian(rng: np.random.Generator, batch: int, n: int) -> np.ndarray:
    """Laplacian of an Erdős–Rényi (p ~ U(0.2, 0.6)) or Barabási–Albert (m ∈ {1, 2}) graph, plus σI, σ ~ U(0.05, 0.5)."""
    _check(batch, n)
    out = np.empty((batch, n, n))
    for b in range(batch):
        if rng.random() < 0.5:
            u = np.triu(rng.random((n, n)) < rng.uniform(0.2, 0.6), 1).astype(float)
            a = u + u.T
        else:
            a = _ba_adjacency(rng, n, int(rng.integers(1, 3)) if n > 2 else 1)
        out[b] = np.diag(a.sum(1)) - a + rng.uniform(0.05, 0.5) * np.eye(n)
    return out


STRUCTURED: dict[str, Family] = {
    "kms": kms,
    "ar2": ar2_toeplitz,
    "banded": banded,
    "lowrank_diag": lowrank_diag,
    "rbf": rbf_kernel,
    "laplacian": graph_laplacian,
}


def structured(rng: np.random.Generator, batch: int, n: int) -> np.ndarray:
    """The structured mixture S: each matrix from one of :data:`STRUCTURED`, equal weights."""
    _check(batch, n)
    names = list(STRUCTURED)
    pick = rng.integers(len(names), size=batch)
    out = np.empty((batch, n, n))
    for j, name in enumerate(names):
        idx = np.flatnonzero(pick == j)
        if len(idx):
            out[idx] = STRUCTURED[name](rng, len(idx), n)
    return out


TRAIN_FAMILIES: dict[str, Family] = {"wishart": wishart, "structured": structured, **STRUCTURED}


def family(name: str) -> Family:
    """A batched generator by name: ``wishart``, ``structured`` or one member of the structured mixture."""
    if name not in TRAIN_FAMILIES:
        raise UserError(f"unknown SPD family {name!r}; choose one of {', '.join(TRAIN_FAMILIES)}")
    return TRAIN_FAMILIES[name]


def normalise(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(A / s, s)`` with ``s`` the mean diagonal of each matrix (``a``: [..., n, n])."""
    s = np.diagonal(a, axis1=-2, axis2=-1).mean(-1)
    return a / s[..., None, None], s


def logdet_target(a: np.ndarray) -> np.ndarray:
    """``y = log det(A/s) / n`` in float64 (``a``: [..., n, n]); raises on a matrix that is not SPD."""
    a = np.asarray(a, dtype=np.float64)
    an, _ = normalise(a)
    sign, ld = np.linalg.slogdet(an)
    if np.any(sign <= 0):
        raise UserError("logdet_target: a matrix is not positive definite")
    return ld / a.shape[-1]


def sample(name: str, rng: np.random.Generator, batch: int, n: int, *, max_cond: float = 1e8
           ) -> tuple[np.ndarray, np.ndarray]:
    """``(A/s, y)`` for a batch of family ``name`` at size n, dropping matrices with cond > ``max_cond``."""
    a, _ = normalise(family(name)(rng, batch, n))
    ev = np.linalg.eigvalsh(a)  # [batch, n], ascending
    keep = (ev[:, 0] > 0) & (ev[:, -1] <= max_cond * ev[:, 0])
    a = a[keep]
    return a, np.log(ev[keep]).sum(-1) / n


# ---- out-of-distribution stand-ins ------------------------------------------------------------------------


def hilbert_shift(n: int, lam: float) -> np.ndarray:
    """Hilbert matrix ``1/(i+j+1)`` (``scipy.linalg.hilbert``) plus λI."""
    from scipy.linalg import hilbert

    return hilbert(n) + lam * np.eye(n)


def lehmer(n: int) -> np.ndarray:
    """Lehmer matrix ``min(i,j)/max(i,j)`` (1-based)."""
    i = np.arange(1, n + 1)
    return np.minimum(i[:, None], i[None, :]) / np.maximum(i[:, None], i[None, :])


def min_matrix(n: int) -> np.ndarray:
    """``min(i, j)`` (1-based): the covariance of Brownian motion at 1..n."""
    i = np.arange(1, n + 1)
    return np.minimum(i[:, None], i[None, :]).astype(float)


def pascal_unit(n: int) -> np.ndarray:
    """Symmetric Pascal matrix scaled to unit diagonal, ``D^-1/2 P D^-1/2``."""
    from scipy.linalg import pascal

    p = pascal(n, kind="symmetric").astype(float)
    d = 1 / np.sqrt(np.diag(p))
    return p * d[:, None] * d[None, :]


def _real_graphs() -> dict[str, np.ndarray]:
    import networkx as nx

    gs = {"karate": nx.karate_club_graph(), "les_miserables": nx.les_miserables_graph(),
          "florentine": nx.florentine_families_graph(), "davis": nx.davis_southern_women_graph()}
    return {k: nx.to_numpy_array(g, weight=None) for k, g in gs.items()}


def real_subgraph_laplacians(rng: np.random.Generator, count: int, sizes: tuple[int, int] = (6, 12),
                             shift: float = 0.1) -> list[np.ndarray]:
    """Laplacians + shift·I of random connected induced subgraphs of four small real networkx graphs."""
    graphs = list(_real_graphs().values())
    out = []
    while len(out) < count:
        a = graphs[int(rng.integers(len(graphs)))]
        k = int(rng.integers(sizes[0], sizes[1] + 1))
        nodes = [int(rng.integers(a.shape[0]))]  # grow a connected set by random frontier steps
        while len(nodes) < k:
            frontier = np.flatnonzero(a[nodes].sum(0) > 0)
            frontier = np.setdiff1d(frontier, nodes)
            if len(frontier) == 0:
                break
            nodes.append(int(rng.choice(frontier)))
        if len(nodes) < k:
            continue
        sub = a[np.ix_(nodes, nodes)]
        out.append(np.diag(sub.sum(1)) - sub + shift * np.eye(k))
    return out


def ood_sets(rng: np.random.Generator, *, count: int = 200, sizes: tuple[int, int] = (4, 8)
             ) -> dict[str, list[np.ndarray]]:
    """The four OOD stand-ins (lists of SPD matrices of varying size), built deterministically from ``rng``.

    Deterministic families have only a few distinct members at these sizes (Hilbert: 2 shifts per n;
    special: Lehmer, min(i,j), Pascal per n), so they hold those; the random ones hold ``count``. The
    real-graph subgraphs have min(6, hi)..hi nodes, so that this set tests the distribution, not the size.
    """
    lo, hi = sizes
    ns = range(lo, hi + 1)
    sets = {
        "hilbert": [hilbert_shift(n, lam) for n in ns for lam in (1e-2, 1e-1)],
        "special": [f(n) for n in ns for f in (lehmer, min_matrix, pascal_unit)],
        "matern_ood_ell": [matern12_kernel(rng, 1, int(rng.integers(lo, hi + 1)), lengthscale=ell)[0]
                           for ell in (0.05, 5.0) for _ in range(count // 2)],
        "real_graphs": real_subgraph_laplacians(rng, count, sizes=(min(6, hi), hi)),
    }
    return sets


def spectrum_summary(a: np.ndarray) -> np.ndarray:
    """Mean, std, min and max of log-eigenvalues of ``A/s`` (``a``: [n, n]) -> [4]."""
    an, _ = normalise(np.asarray(a, dtype=np.float64))
    le = np.log(np.clip(np.linalg.eigvalsh(an), 1e-300, None))
    return np.array([le.mean(), le.std(), le.min(), le.max()])
