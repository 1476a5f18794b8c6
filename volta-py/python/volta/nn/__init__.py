"""Neural-network building blocks.

micrograd's ``Neuron``, ``Layer`` and ``MLP`` (scalar ``volta.Value`` networks, seeded
from Python's ``random`` exactly as micrograd's are).
"""

from volta.nn.micrograd import MLP, Layer, Neuron
from volta.nn.modules import (
    AvgPool2d,
    BatchNorm2d,
    Conv2d,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Flatten,
    GELU,
    Identity,
    LayerNorm,
    Linear,
    MaxPool2d,
    Module,
    ModuleList,
    MSELoss,
    Parameter,
    ReLU,
    RMSNorm,
    Sequential,
    SiLU,
    Sigmoid,
    Softmax,
    Tanh,
)

__all__ = [
    "Neuron",
    "Layer",
    "MLP",
    "Module",
    "Parameter",
    "Linear",
    "Conv2d",
    "MaxPool2d",
    "AvgPool2d",
    "BatchNorm2d",
    "LayerNorm",
    "RMSNorm",
    "Embedding",
    "Dropout",
    "ReLU",
    "GELU",
    "SiLU",
    "Sigmoid",
    "Tanh",
    "Identity",
    "Softmax",
    "Flatten",
    "Sequential",
    "ModuleList",
    "CrossEntropyLoss",
    "MSELoss",
]
