"""Offline data loaders and generators of synthetic data: every data set loader and every synthetic data
generator of the toolkit lives here, named after what it loads or generates, whether one paper uses it or
several (technique packages hold methods and the models or environments they act on).

Images live in :mod:`iclr26.data.images` (Fashion-MNIST, MNIST-5k, sklearn digits, stratified
splits); text in :mod:`iclr26.data.text`. Generators are named after what they generate:
:mod:`~iclr26.data.sparse_dictionary` (activations from a known sparse dictionary),
:mod:`~iclr26.data.feature_importance` (correlated-feature designs with known important sets) and
:mod:`~iclr26.data.subspace_tasks` (task sequences with overlapping input subspaces), and one module per
reproduction's world: :mod:`~iclr26.data.mocap` (the DeepMimic clips in the pybullet wheel, forward
kinematics) and :mod:`~iclr26.data.scenes` (social scenes with scripted events) for HUMOF,
:mod:`~iclr26.data.graphs`, :mod:`~iclr26.data.sudoku`, :mod:`~iclr26.data.culture`,
:mod:`~iclr26.data.dishonesty`, :mod:`~iclr26.data.clinical_notes`, :mod:`~iclr26.data.planning`,
:mod:`~iclr26.data.reasoning`, :mod:`~iclr26.data.statements`, :mod:`~iclr26.data.planted_duplicates`,
:mod:`~iclr26.data.spd_matrices`. Import the submodule you need.
"""
