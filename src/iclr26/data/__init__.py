"""Offline data loaders and synthetic-data generators.

Images live in :mod:`iclr26.data.images` (Fashion-MNIST, MNIST-5k, sklearn digits, stratified
splits); text and synthetic generators live in their own modules. Import the submodule you need.
"""
