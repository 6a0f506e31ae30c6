"""Small image CNNs whose penultimate layer is a named feature (``model.feature_layer = "feat"``).

``shallow``: conv(C->16) ReLU maxpool, conv(16->32) ReLU maxpool, FC(->64) ReLU (the feature), FC(64->K).
``deep``: four 3x3 convs (16, 16, 32, 32) with a maxpool after the second and the fourth, same head.
Images smaller than 4x4 skip the pools that would empty them.
"""

from __future__ import annotations

import torch
from torch import nn

from iclr26.core.errors import UserError

ARCHS = ("shallow", "deep")


class FeatureCNN(nn.Module):
    """A CNN classifier ``[N, C, H, W] -> logits [N, K]``; ``feat`` (a ReLU) outputs the 64-d feature."""

    feature_layer = "feat"

    def __init__(self, in_channels: int, hw: tuple[int, int], num_classes: int, arch: str = "shallow",
                 width: int = 64):
        super().__init__()
        if arch not in ARCHS:
            raise UserError(f"arch {arch!r}: allowed values are {', '.join(ARCHS)}")
        if in_channels < 1 or num_classes < 2 or width < 1 or min(hw) < 1:
            raise UserError(
                f"FeatureCNN needs in_channels >= 1, num_classes >= 2, width >= 1, H, W >= 1; "
                f"got {in_channels}, {num_classes}, {width}, {hw}"
            )
        chans = [16, 32] if arch == "shallow" else [16, 16, 32, 32]
        pool_after = {0, 1} if arch == "shallow" else {1, 3}
        layers: list[nn.Module] = []
        c, (h, w) = in_channels, hw
        for i, out in enumerate(chans):
            layers += [nn.Conv2d(c, out, 3, padding=1), nn.ReLU()]
            c = out
            if i in pool_after and min(h, w) >= 2:
                layers.append(nn.MaxPool2d(2))
                h, w = h // 2, w // 2
        self.body = nn.Sequential(*layers)
        self.fc = nn.Linear(c * h * w, width)
        self.feat = nn.ReLU()
        self.head = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.feat(self.fc(self.body(x).flatten(1))))


def make_cnn(in_channels: int, hw: tuple[int, int], num_classes: int, arch: str = "shallow", *,
             seed: int) -> FeatureCNN:
    """A :class:`FeatureCNN` initialised from ``seed`` (the global RNG is forked, callers are untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return FeatureCNN(in_channels, hw, num_classes, arch)
