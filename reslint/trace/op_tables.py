"""The names torch.fx graphs give to ops (aten overloads, torch functions, tensor methods, `call_module`
targets), grouped by what they mean for placement. torch's module names come from the one table the
static engine uses too (`reslint.static.torch_api`)."""

from __future__ import annotations

import operator

from reslint.static import torch_api

ADD_OPS = {"add", "add_", "iadd", "__add__", "__iadd__", "__radd__"}
# Binary arithmetic that broadcasts its operands (a mask added to scores, statistics subtracted from a series).
ELEMENTWISE_OPS = ADD_OPS | {"sub", "sub_", "rsub", "__sub__", "__rsub__", "__isub__", "mul", "mul_", "__mul__",
                             "__rmul__", "__imul__", "div", "div_", "__truediv__", "__rtruediv__", "__itruediv__"}
# torch's dropout functions and their aten spellings.
DROPOUT_OPS = torch_api.DROPOUT_FUNCTIONS | {"dropout_", "feature_dropout", "native_dropout"}
# Ops whose output is the input, for placement purposes: dropout, casts, copies, views.
PASS_OPS = DROPOUT_OPS | {
    "_to_copy", "to", "type_as", "float", "half", "bfloat16", "double", "type", "clone", "contiguous",
    "view", "reshape", "_unsafe_view", "flatten", "unflatten", "alias", "lift_fresh_copy", "identity", "Identity",
    "detach_", "_assert_tensor_metadata",
}
JOIN_OPS = torch_api.JOIN_FUNCTIONS  # `torch.cat`: a skip joined from pieces
MATMUL_OPS = {"linear", "addmm", "mm", "matmul", "bmm", "baddbmm", "einsum", "addmv", "mv"}
CONV_OPS = {"conv1d", "conv2d", "conv3d", "convolution", "_convolution", "conv_transpose1d", "conv_transpose2d",
            "conv_transpose3d", "cudnn_convolution"}
ALWAYS_PARAMETRISED = {"scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
                       "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention_for_cpu",
                       "_scaled_dot_product_cudnn_attention", "multi_head_attention_forward",
                       "_native_multi_head_attention"}
LAYER_NORM_OPS = {name: kind for name, kind in torch_api.FUNCTIONAL_NORMS.items() if kind in ("layernorm", "rmsnorm")}
LAYER_NORM_OPS["_fused_rms_norm"] = "rmsnorm"
BATCH_NORM_OPS = {name for name, kind in torch_api.FUNCTIONAL_NORMS.items() if kind == "batchnorm"} | {
    "_native_batch_norm_legit", "_native_batch_norm_legit_no_training", "_native_batch_norm_legit_functional",
    "native_batch_norm", "cudnn_batch_norm", "_batch_norm_impl_index", "_batch_norm_with_update",
    "_batch_norm_no_update"}
# Ops a transformed skip may apply around its projection (`GLU(conv(LN(x)))`), besides views: the static
# engine's activations and norms, and pooling.
SKIP_PATH_OPS = torch_api.ACTIVATION_FUNCTIONS | set(LAYER_NORM_OPS) | {
    "transpose", "permute", "getitem", "avg_pool1d", "avg_pool2d", "max_pool1d", "max_pool2d"}
SHAPE_ONLY_OPS = {"sym_size", "sym_numel", "sym_stride", "size", "dim", "arange", "zeros", "ones", "full",
                  "empty", "new_zeros", "new_ones", "new_full", "new_empty", "zeros_like", "ones_like",
                  "empty_like", "full_like", "scalar_tensor", "_assert_tensor_metadata", "sym_constrain_range"}
_NORM_MODULE_OPS = {"layernorm": "layer_norm", "rmsnorm": "rms_norm", "batchnorm": "batch_norm",
                    "groupnorm": "group_norm", "instancenorm": "instance_norm"}
MODULE_OPS = {  # call_module targets (fx Tracer graphs): class name → op
    **{name: "linear" for name in torch_api.LINEAR_MODULES | {"Bilinear"}},
    **{name: name.removeprefix("Lazy").replace("Transpose", "_transpose").lower() for name in torch_api.CONV_MODULES},
    **{name: _NORM_MODULE_OPS[kind] for name, kind in torch_api.NORM_MODULES.items()},
    **{name: "dropout" for name in torch_api.DROPOUT_MODULES},
    "Embedding": "embedding", "Identity": "identity", "MultiheadAttention": "multi_head_attention_forward",
}
# Python operators as fx Tracer graphs record them, under the name aten gives the same op.
OPERATOR_OPS = {operator.truediv: "div", operator.itruediv: "div_"}
BUILTIN_LAYERS = ("TransformerEncoderLayer", "TransformerDecoderLayer")
BUILTIN_STACKS = ("TransformerEncoder", "TransformerDecoder")


def op_name(node, modules: dict) -> str:
    """A short, engine-independent name for what a node computes ("add", "linear", "layer_norm")."""
    if node.op == "call_function":
        target = node.target
        if target is operator.getitem:
            return "getitem"
        if target in OPERATOR_OPS:
            return OPERATOR_OPS[target]
        text = str(target)
        if text.startswith(("aten.", "prims.")):
            return text.split(".")[1]
        name = getattr(target, "__name__", text)
        return name
    if node.op == "call_method":
        return str(node.target)
    if node.op == "call_module":
        module = modules.get(node.target)
        name = type(module).__name__ if module is not None else ""
        return MODULE_OPS.get(name, "module:" + name)
    return node.op
