"""Writes the PyTorch side of `volta/tests/checkpoint.rs`'s interchange test.

`pytorch_net.safetensors`: the `state_dict()` of the CNN below (the test's `Net`),
saved with `safetensors.torch.save_file`, batch-norm statistics included.
`pytorch_io.safetensors`: an input batch (`input`, 5×1×6×6) and the model's eval-mode
`logits` (5×3) for it.

Run: `python3 pytorch_checkpoint.py` (PyTorch 2.x and `safetensors`), in this folder.
"""
import torch
from torch import nn
from safetensors.torch import save_file


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4 * 3 * 3, 3)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn(self.conv(x))))
        return self.fc(x.flatten(1))


torch.manual_seed(0)
net = Net()
with torch.no_grad():
    # Statistics away from their defaults, so that loading them matters.
    net.bn.running_mean.uniform_(-0.5, 0.5)
    net.bn.running_var.uniform_(0.5, 2.0)
    net.bn.weight.uniform_(0.5, 1.5)
    net.bn.bias.uniform_(-0.5, 0.5)
net.eval()
x = torch.randn(5, 1, 6, 6)
with torch.no_grad():
    logits = net(x)
save_file(net.state_dict(), "pytorch_net.safetensors")
save_file({"input": x.contiguous(), "logits": logits.contiguous()}, "pytorch_io.safetensors")
print(sorted(net.state_dict().keys()))
print(logits)
