#!/usr/bin/env python3
"""Make Tandem's quantized test models: two small float models of our own,
each quantized by onnxruntime's quantizer several ways.

The float models (seeded, built with onnx.helper):
  * `qtransformer`: an audio transformer, input_features [1, 80, 64] ->
    a projection, two pre-norm blocks (LayerNormalization, self-attention
    with Softmax on the last axis, residual Add, an MLP with Gelu written
    as PyTorch exports it, x * 0.5 * (1 + Erf(x / sqrt 2)), residual Add),
    a mean over time and a classifier;
  * `qcnn`: an image CNN, [1, 3, 32, 32] -> Conv, Relu, a residual block of
    two Convs, a strided Conv, global average pooling, Gemm.

Each is quantized by onnxruntime's quantizer (calibrated on seeded inputs):
  * `_qdq_s8`: static, QDQ format, int8 activations and weights, per tensor;
  * `_qdq_s8_pc`: static, QDQ, int8, per-channel weights;
  * `_qdq_u8`: static, QDQ, uint8 activations, int8 weights, per tensor;
  * `_qop_u8`: static, QOperator format (QLinearConv, QLinearMatMul);
  * `_dyn_u8`: dynamic (DynamicQuantizeLinear, MatMulInteger/ConvInteger).

Each model gets a seeded input (NAME_input_0.pb, a TensorProto) and
onnxruntime's outputs on it (NAME_output_0.pb), computed with its graph
optimizations off (the Q/DQ nodes as ONNX defines them, not onnxruntime's
fused integer kernels, which round differently).

Writes `<cache>/quantized/NAME.onnx` and a manifest, `quantized.json`:
name, file, source, how, the input's shape, inputs and outputs. Nothing
here is committed; the Rust tests run this script through
`tandem_models::quantized`.
Usage: python3 models/quantized.py [--cache DIR]
"""

import argparse
import json
import logging
import os

VERSION = 2
SEED = 33
FRAMES = 64  # the export reads 800 frames; 64 keep the tests fast


def atomic_save(model, path):
    import onnx

    tmp = f"{path}.tmp{os.getpid()}"
    onnx.save(model, tmp)
    os.replace(tmp, path)


class Builder:
    """A seeded onnx.helper graph builder."""

    def __init__(self, seed):
        import numpy as np

        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def weight(self, name, shape, scale=None):
        import numpy as np
        from onnx import numpy_helper

        # MatMul weights are [in, out]; others pass their scale.
        s = scale if scale is not None else 1.0 / np.sqrt(shape[0])
        value = (self.rng.standard_normal(shape) * s).astype(np.float32)
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def const(self, name, value):
        import numpy as np
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type, inputs, name, **attrs):
        from onnx import helper

        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attrs))
        return name


def transformer():
    """The float audio transformer (opset 17: LayerNormalization)."""
    import numpy as np
    from onnx import TensorProto, helper

    b, d, heads, hidden = Builder(SEED), 64, 4, 128
    x = b.op("Transpose", ["input_features"], "frames", perm=[0, 2, 1])  # [1, T, 80]
    x = b.op("MatMul", [x, b.weight("proj_w", [80, d])], "proj")
    x = b.op("Add", [x, b.weight("proj_b", [d], 0.1)], "proj_bias")
    b.const("heads_shape", np.array([1, FRAMES, heads, d // heads], dtype=np.int64))
    b.const("merge_shape", np.array([1, FRAMES, d], dtype=np.int64))
    b.const("half", np.array(0.5, dtype=np.float32))
    b.const("one", np.array(1.0, dtype=np.float32))
    b.const("sqrt2", np.array(np.sqrt(2.0), dtype=np.float32))
    b.const("attn_scale", np.array(1.0 / np.sqrt(d // heads), dtype=np.float32))
    for i in range(2):
        p = f"block{i}"
        ln = b.op("LayerNormalization", [x, b.weight(f"{p}_ln1_g", [d], 0.1), b.weight(f"{p}_ln1_b", [d], 0.1)],
                  f"{p}_ln1", axis=-1)
        qkv = []
        for which in "qkv":
            t = b.op("MatMul", [ln, b.weight(f"{p}_{which}_w", [d, d])], f"{p}_{which}")
            t = b.op("Reshape", [t, "heads_shape"], f"{p}_{which}_heads")
            qkv.append(b.op("Transpose", [t], f"{p}_{which}_t", perm=[0, 2, 3, 1] if which == "k" else [0, 2, 1, 3]))
        scores = b.op("MatMul", [qkv[0], qkv[1]], f"{p}_scores")
        scores = b.op("Mul", [scores, "attn_scale"], f"{p}_scaled")
        attn = b.op("Softmax", [scores], f"{p}_softmax", axis=-1)
        ctx = b.op("MatMul", [attn, qkv[2]], f"{p}_ctx")
        ctx = b.op("Transpose", [ctx], f"{p}_ctx_t", perm=[0, 2, 1, 3])
        ctx = b.op("Reshape", [ctx, "merge_shape"], f"{p}_ctx_merged")
        out = b.op("MatMul", [ctx, b.weight(f"{p}_o_w", [d, d])], f"{p}_o")
        x = b.op("Add", [x, out], f"sum_{2 * i}")
        ln = b.op("LayerNormalization", [x, b.weight(f"{p}_ln2_g", [d], 0.1), b.weight(f"{p}_ln2_b", [d], 0.1)],
                  f"{p}_ln2", axis=-1)
        h = b.op("MatMul", [ln, b.weight(f"{p}_fc1_w", [d, hidden])], f"{p}_fc1")
        h = b.op("Add", [h, b.weight(f"{p}_fc1_b", [hidden], 0.1)], f"{p}_fc1_bias")
        # Gelu as PyTorch exports it below opset 20.
        e = b.op("Div", [h, "sqrt2"], f"{p}_gelu_div")
        e = b.op("Erf", [e], f"{p}_gelu_erf")
        e = b.op("Add", [e, "one"], f"{p}_gelu_add")
        e = b.op("Mul", [h, e], f"{p}_gelu_mul")
        h = b.op("Mul", [e, "half"], f"gelu_{i}")
        h = b.op("MatMul", [h, b.weight(f"{p}_fc2_w", [hidden, d])], f"{p}_fc2")
        x = b.op("Add", [x, h], f"sum_{2 * i + 1}")
    x = b.op("LayerNormalization", [x, b.weight("ln_f_g", [d], 0.1), b.weight("ln_f_b", [d], 0.1)], "ln_f", axis=-1)
    x = b.op("ReduceMean", [x], "pooled", axes=[1], keepdims=0)
    b.op("Gemm", [x, b.weight("cls_w", [d, 10]), b.weight("cls_b", [10], 0.1)], "logits")
    graph = helper.make_graph(
        b.nodes, "qtransformer",
        [helper.make_tensor_value_info("input_features", TensorProto.FLOAT, [1, 80, FRAMES])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], b.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def cnn():
    """The float image CNN (opset 17)."""
    from onnx import TensorProto, helper

    b = Builder(SEED + 1)

    def conv(x, name, cin, cout, stride=1):
        w = b.weight(f"{name}_w", [cout, cin, 3, 3], (2.0 / (cin * 9)) ** 0.5)
        return b.op("Conv", [x, w, b.weight(f"{name}_b", [cout], 0.1)], name, kernel_shape=[3, 3],
                    pads=[1, 1, 1, 1], strides=[stride, stride])

    x = b.op("Relu", [conv("image", "conv0", 3, 16)], "relu0")
    y = b.op("Relu", [conv(x, "conv1", 16, 16)], "relu1")
    y = conv(y, "conv2", 16, 16)
    x = b.op("Relu", [b.op("Add", [x, y], "res_sum")], "relu2")
    x = b.op("Relu", [conv(x, "conv3", 16, 32, stride=2)], "relu3")
    x = b.op("GlobalAveragePool", [x], "gap")
    x = b.op("Flatten", [x], "flat", axis=1)
    b.op("Gemm", [x, b.weight("fc_w", [32, 10]), b.weight("fc_b", [10], 0.1)], "logits")
    graph = helper.make_graph(
        b.nodes, "qcnn", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], b.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


# name suffix: (how, quantizer arguments)
VARIANTS = {
    "qdq_s8": "static QDQ, int8 activations and weights, per tensor",
    "qdq_s8_pc": "static QDQ, int8 activations and weights, per channel",
    "qdq_u8": "static QDQ, uint8 activations, int8 weights, per tensor",
    "qop_u8": "static QOperator (QLinearConv, QLinearMatMul), uint8 activations, int8 weights",
    "dyn_u8": "dynamic (DynamicQuantizeLinear, MatMulInteger/ConvInteger), uint8",
}


def quantize(source, target, variant, input_name, shape):
    import numpy as np
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                          quantize_static)

    rng = np.random.default_rng(SEED + 2)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([{input_name: rng.random(shape, dtype=np.float32)} for _ in range(8)])

        def get_next(self):
            return next(self.feeds, None)

    tmp = f"{target}.tmp{os.getpid()}"
    if variant == "dyn_u8":
        quantize_dynamic(source, tmp, weight_type=QuantType.QUInt8)
    else:
        qdq = variant.startswith("qdq")
        act = QuantType.QInt8 if variant.startswith("qdq_s8") else QuantType.QUInt8
        kwargs = {}
        if not qdq:
            # The QOperator ops tract has (QLinearConv, QLinearMatMul); onnxruntime's
            # contrib ops (QLinearAdd, QLinearSoftmax, ...) are its own.
            kwargs["op_types_to_quantize"] = ["Conv", "MatMul"]
        quantize_static(source, tmp, Reader(), quant_format=QuantFormat.QDQ if qdq else QuantFormat.QOperator,
                        per_channel=variant.endswith("_pc"), activation_type=act,
                        weight_type=QuantType.QInt8, **kwargs)
    os.replace(tmp, target)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache"))
    args = ap.parse_args()
    out_dir = os.path.join(args.cache, "quantized")
    manifest_path = os.path.join(out_dir, "quantized.json")
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            old = json.load(f)
        files = [f for m in old["models"] for f in [m["file"], *m.get("inputs", []), *m.get("outputs", [])]]
        if old.get("version") == VERSION and all(os.path.exists(os.path.join(out_dir, f)) for f in files):
            print(f"quantized models already in {out_dir}")
            return

    import numpy as np
    import onnx
    import onnxruntime
    from onnx import numpy_helper

    logging.getLogger().setLevel(logging.ERROR)  # the quantizer's advice to pre-process first
    os.makedirs(out_dir, exist_ok=True)
    entries = []
    feed_rng = np.random.default_rng(SEED + 3)

    def reference(name, input_name, shape):
        """A seeded input and onnxruntime's outputs on it, as TensorProto files."""
        x = feed_rng.random(shape, dtype=np.float32)
        with open(os.path.join(out_dir, f"{name}_input_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(x, name=input_name).SerializeToString())
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = onnxruntime.InferenceSession(os.path.join(out_dir, f"{name}.onnx"), options,
                                               providers=["CPUExecutionProvider"])
        outputs = []
        for i, (out, value) in enumerate(zip(session.get_outputs(), session.run(None, {input_name: x}))):
            rel = f"{name}_output_{i}.pb"
            with open(os.path.join(out_dir, rel), "wb") as f:
                f.write(numpy_helper.from_array(np.asarray(value), name=out.name).SerializeToString())
            outputs.append(rel)
        return {"inputs": [f"{name}_input_0.pb"], "outputs": outputs}

    for base, make, input_name, shape in (("qtransformer", transformer, "input_features", [1, 80, FRAMES]),
                                          ("qcnn", cnn, "image", [1, 3, 32, 32])):
        model = make()
        onnx.checker.check_model(model, full_check=True)
        source = os.path.join(out_dir, f"{base}.onnx")
        atomic_save(model, source)
        dims = ",".join(str(d) for d in shape)
        entries.append({"name": base, "file": f"{base}.onnx", "source": None, "how": "float32",
                        "input_shapes": [f"{input_name}={dims}"], **reference(base, input_name, shape)})
        for variant, how in VARIANTS.items():
            name = f"{base}_{variant}"
            quantize(source, os.path.join(out_dir, f"{name}.onnx"), variant, input_name, shape)
            entries.append({"name": name, "file": f"{name}.onnx", "source": base,
                            "how": f"{how} (onnxruntime {onnxruntime.__version__})",
                            "input_shapes": [f"{input_name}={dims}"], **reference(name, input_name, shape)})
    tmp = f"{manifest_path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump({"version": VERSION, "models": entries}, f, indent=1)
    os.replace(tmp, manifest_path)
    print(f"{len(entries)} quantized test models in {out_dir}")


if __name__ == "__main__":
    main()
