"""What the static engine knows about torch's own names, without importing torch."""

from __future__ import annotations

from functools import lru_cache

NORM_MODULES = {
    "LayerNorm": "layernorm",
    "RMSNorm": "rmsnorm",
    "GroupNorm": "groupnorm",
    "BatchNorm1d": "batchnorm",
    "BatchNorm2d": "batchnorm",
    "BatchNorm3d": "batchnorm",
    "SyncBatchNorm": "batchnorm",
    "LazyBatchNorm1d": "batchnorm",
    "LazyBatchNorm2d": "batchnorm",
    "LazyBatchNorm3d": "batchnorm",
    "InstanceNorm1d": "instancenorm",
    "InstanceNorm2d": "instancenorm",
    "InstanceNorm3d": "instancenorm",
    "LazyInstanceNorm1d": "instancenorm",
    "LazyInstanceNorm2d": "instancenorm",
    "LazyInstanceNorm3d": "instancenorm",
}

PARAMETRISED_MODULES = {
    "Linear", "LazyLinear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
    "ConvTranspose2d", "ConvTranspose3d", "LazyConv1d", "LazyConv2d", "LazyConv3d",
    "Embedding", "EmbeddingBag", "MultiheadAttention", "LSTM", "GRU", "RNN", "LSTMCell",
    "GRUCell", "RNNCell", "Transformer", "TransformerEncoder", "TransformerDecoder",
    "TransformerEncoderLayer", "TransformerDecoderLayer",
}
LINEAR_MODULES = {"Linear", "LazyLinear"}
CONV_MODULES = {name for name in PARAMETRISED_MODULES if "Conv" in name}
WIDTH_PRESERVING_MODULES = {
    "MultiheadAttention", "TransformerEncoder", "TransformerDecoder",
    "TransformerEncoderLayer", "TransformerDecoderLayer", "Transformer",
}
SEQUENCE_MODULES = {
    "MultiheadAttention": "attention (nn.MultiheadAttention)",
    "Transformer": "nn.Transformer",
    "TransformerEncoder": "nn.TransformerEncoder",
    "TransformerDecoder": "nn.TransformerDecoder",
    "TransformerEncoderLayer": "nn.TransformerEncoderLayer",
    "TransformerDecoderLayer": "nn.TransformerDecoderLayer",
    "Embedding": "token embeddings (nn.Embedding)",
    "LSTM": "an RNN (nn.LSTM)",
    "GRU": "an RNN (nn.GRU)",
    "RNN": "an RNN (nn.RNN)",
    "LSTMCell": "an RNN (nn.LSTMCell)",
    "GRUCell": "an RNN (nn.GRUCell)",
}
# BatchNorm2d/3d normalise images and volumes (the CNN case); these variants see (batch, channels, time) (RL201).
SEQUENCE_BATCHNORMS = {"BatchNorm1d", "SyncBatchNorm", "LazyBatchNorm1d", "batch_norm"}
DROPOUT_MODULES = {"Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"}
ACTIVATION_MODULES = {
    "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "LeakyReLU", "ELU",
    "SELU", "CELU", "Mish", "Hardswish", "Hardsigmoid", "Softplus", "PReLU", "GLU", "ReLU6",
    "Softsign", "Tanhshrink", "Threshold", "Hardtanh", "LogSigmoid", "Softmin", "RReLU",
}
PASSTHROUGH_MODULES = {"Identity"}
# Layers of other packages without parameters that only reshape (True) or pool (False) their input.
SHAPE_ONLY_LAYERS = {"einops.layers.torch.Rearrange": True, "einops.layers.torch.Reduce": False}
CONTAINER_MODULES = {"Sequential", "ModuleList", "ModuleDict"}

FUNCTIONAL_NORMS = {
    "layer_norm": "layernorm",
    "rms_norm": "rmsnorm",
    "group_norm": "groupnorm",
    "batch_norm": "batchnorm",
    "instance_norm": "instancenorm",
    "native_layer_norm": "layernorm",
}
# Functions that join tensors along an axis (a skip assembled from pieces).
JOIN_FUNCTIONS = {"cat", "concat", "concatenate"}
DROPOUT_FUNCTIONS = {"dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"}
ACTIVATION_FUNCTIONS = {
    "relu", "gelu", "silu", "tanh", "sigmoid", "softmax", "log_softmax", "leaky_relu", "elu",
    "selu", "mish", "softplus", "glu", "relu6", "hardswish", "celu", "logsigmoid", "swish",
    "relu_", "gelu_new", "hardtanh", "softsign", "quick_gelu", "erf", "exp", "log", "sin", "cos",
}
PARAMETRISED_FUNCTIONS = {"linear", "conv1d", "conv2d", "conv3d", "bilinear", "embedding", "conv_transpose1d",
                          "conv_transpose2d"}
ATTENTION_FUNCTIONS = {"scaled_dot_product_attention", "multi_head_attention_forward", "flash_attn_func"}
REDUCTIONS = {"mean", "var", "std", "sum", "norm", "vector_norm", "var_mean", "std_mean", "amax", "max"}
MATH_UNARY = {"sqrt": "sqrt", "rsqrt": "rsqrt", "reciprocal": "reciprocal", "square": "square", "abs": "abs"}
PASSTHROUGH_METHODS = {
    "float", "half", "bfloat16", "double", "to", "type", "type_as", "contiguous", "clone", "detach",
    "view", "reshape", "transpose", "permute", "unsqueeze", "squeeze", "flatten", "expand",
    "expand_as", "repeat", "view_as", "reshape_as", "cuda", "cpu", "requires_grad_", "unflatten",
    "movedim", "swapaxes",
}
# Ops after which the last dimension is no longer the feature width.
WIDTH_CHANGING_METHODS = {"view", "reshape", "transpose", "permute", "flatten", "unflatten", "movedim",
                          "swapaxes", "view_as", "reshape_as", "repeat", "expand", "expand_as", "squeeze",
                          "unsqueeze"}
SHAPE_METHODS = {"size", "dim", "numel", "ndimension", "nelement", "get_device", "stride"}
SHAPE_ATTRIBUTES = {"shape", "ndim", "device", "dtype", "is_cuda", "requires_grad", "T_shape"}
CREATION_FUNCTIONS = {
    "arange", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "tensor", "eye",
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "linspace",
    "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "as_tensor", "randperm",
}
CLAMP_FUNCTIONS = {"clamp", "clamp_min", "clip", "clamp_", "maximum", "max"}

TORCH_PREFIXES = ("torch.nn.functional.", "torch.nn.", "torch.linalg.", "torch.", "math.")


def torch_member(qualified: str) -> str | None:
    """`torch.nn.LayerNorm` → `LayerNorm`; None when the name is not torch's."""
    for prefix in TORCH_PREFIXES:
        if qualified.startswith(prefix):
            return qualified[len(prefix):]
    return None


@lru_cache(maxsize=4096)  # asked for every call the static engine evaluates: a file names few callees
def is_stochastic_depth(name: str) -> bool:
    """timm's DropPath/drop_path, torchvision's StochasticDepth/stochastic_depth: a dropout of the whole branch,
    whichever file defines it."""
    return name.rsplit(".", 1)[-1].lower().replace("_", "") in ("droppath", "stochasticdepth")


def norm_kind_from_name(name: str) -> str | None:
    """Classify a norm class we cannot see (imported from elsewhere) by its name."""
    lowered = name.rsplit(".", 1)[-1].lower()
    if "batchnorm" in lowered:
        return "batchnorm"
    if "groupnorm" in lowered:
        return "groupnorm"
    if "rmsnorm" in lowered:
        return "rmsnorm"
    if "layernorm" in lowered or lowered.endswith("norm"):
        return "layernorm"
    return None
