"""Offline data loaders and generators of synthetic data.

Images live in :mod:`iclr26.data.images` (Fashion-MNIST, MNIST-5k, sklearn digits, stratified
splits); text in :mod:`iclr26.data.text`. Generators are named after what they generate:
:mod:`~iclr26.data.sparse_dictionary` (activations from a known sparse dictionary),
:mod:`~iclr26.data.feature_importance` (correlated-feature designs with known important sets) and
:mod:`~iclr26.data.subspace_tasks` (task sequences with overlapping input subspaces). Import the
submodule you need.
"""
