"""``volta.functional`` under PyTorch's path: ``import volta.nn.functional as F`` works
as ``import torch.nn.functional as F`` does."""

from volta.functional import *  # noqa: F403
from volta.functional import __all__  # noqa: F401
