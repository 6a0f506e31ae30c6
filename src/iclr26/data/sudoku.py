"""4x4 Sudoku (2x2 boxes): every valid grid, a brute-force solver, and puzzles with a unique solution.

There are 288 valid 4x4 grids. ``sudoku_puzzles`` blanks cells of seeded grids until the requested number
of blanks is reached while the solution stays unique, so every puzzle is solvable by the rules alone.
Cells are flat row-major [16] int64 arrays, 0 = blank, 1..4 = digits.
"""

from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np
import torch

from iclr26.core.errors import UserError

__all__ = ["all_grids", "count_solutions", "is_valid_grid", "sudoku_puzzles", "split_grids"]

N = 4
UNITS: tuple[tuple[int, ...], ...] = tuple(
    [tuple(r * N + c for c in range(N)) for r in range(N)]
    + [tuple(r * N + c for r in range(N)) for c in range(N)]
    + [tuple((br + i) * N + bc + j for i in range(2) for j in range(2)) for br in (0, 2) for bc in (0, 2)]
)
PEERS: tuple[frozenset[int], ...] = tuple(
    frozenset(p for u in UNITS if i in u for p in u if p != i) for i in range(N * N)
)


def is_valid_grid(g) -> bool:
    """True when every row, column and 2x2 box holds 1..4 exactly once."""
    g = list(np.asarray(g).reshape(-1))
    return len(g) == N * N and all(sorted(g[i] for i in u) == [1, 2, 3, 4] for u in UNITS)


@lru_cache(maxsize=1)
def all_grids() -> np.ndarray:
    """All 288 valid grids, [288, 16] int64, in lexicographic order."""
    rows = list(itertools.permutations(range(1, N + 1)))
    out = [sum(rs, ()) for rs in itertools.product(rows, repeat=N) if is_valid_grid(sum(rs, ()))]
    arr = np.array(out, dtype=np.int64)
    arr.setflags(write=False)
    return arr


def count_solutions(puzzle, limit: int = 2) -> int:
    """Number of completions of ``puzzle`` (0 = blank), counted up to ``limit``."""
    g = [int(v) for v in np.asarray(puzzle).reshape(-1)]
    if len(g) != N * N or any(v < 0 or v > N for v in g):
        raise UserError(f"a 4x4 puzzle has 16 cells with values 0..4; got {np.asarray(puzzle).tolist()}")

    def solve(k: int) -> int:
        while k < N * N and g[k]:
            k += 1
        if k == N * N:
            return 1
        found = 0
        for v in range(1, N + 1):
            if all(g[p] != v for p in PEERS[k]):
                g[k] = v
                found += solve(k + 1)
                g[k] = 0
                if found >= limit:
                    break
        return found

    # a given clue that conflicts with a peer makes the puzzle unsolvable
    if any(g[i] and any(g[p] == g[i] for p in PEERS[i]) for i in range(N * N)):
        return 0
    return solve(0)


def split_grids(n_test: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split of the 288 grids into (train grids, test grids); test puzzles never share a solution."""
    grids = all_grids()
    if not 1 <= n_test < len(grids):
        raise UserError(f"n_test={n_test}: must be in 1..{len(grids) - 1}")
    perm = np.random.default_rng(seed).permutation(len(grids))
    return grids[perm[n_test:]], grids[perm[:n_test]]


def sudoku_puzzles(grids: np.ndarray, n: int, *, blanks: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` puzzles from ``grids`` (cycled in seeded order), each with ``blanks`` blank cells and one solution.

    Returns (puzzles [n, 16] int64 with 0 = blank, targets [n, 16] int64: the digit - 1 at blanks, -100 at
    the given cells, so a cross-entropy with ``ignore_index=-100`` scores only the blanks).
    """
    if not 1 <= blanks <= 12:  # at most 12 blanks keep a unique 4x4 solution reachable (the minimum is 4 clues)
        raise UserError(f"blanks={blanks}: allowed 1..12")
    if n < 1 or len(grids) == 0:
        raise UserError(f"n={n} must be >= 1 and grids non-empty")
    rng = np.random.default_rng(seed)
    P, Y = np.zeros((n, N * N), np.int64), np.full((n, N * N), -100, np.int64)
    order = rng.permutation(len(grids))
    for i in range(n):
        sol = grids[order[i % len(grids)]]
        for _ in range(200):  # blank cells in a random order, skipping any that would break uniqueness
            g = sol.copy()
            for c in rng.permutation(N * N):
                if (g == 0).sum() == blanks:
                    break
                v, g[c] = g[c], 0
                if count_solutions(g) != 1:
                    g[c] = v
            if (g == 0).sum() == blanks:
                break
        else:
            raise UserError(f"could not make a unique puzzle with {blanks} blanks")
        P[i], Y[i, g == 0] = g, sol[g == 0] - 1
    return torch.from_numpy(P), torch.from_numpy(Y)
