"""The built-in networks the synthetic workloads train (workloads.py builds their specs)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

NUM_CLASSES = 10


class _Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.short(x))


class SmallResNet(nn.Module):
    def __init__(self, width: int = 16, blocks: int = 1, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU())
        layers, cin = [], width
        for i, cout in enumerate((width, 2 * width, 4 * width)):
            for b in range(blocks):
                layers.append(_Block(cin, cout, 2 if (i > 0 and b == 0) else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.layers(self.stem(x)).mean(dim=(2, 3)))


class TinyEncoder(nn.Module):
    def __init__(self, vocab: int, seq_len: int, dim: int, layers: int, heads: int,
                 num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(seq_len, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(tokens) + self.pos).mean(dim=1))
