#!/usr/bin/env python3
"""Builds an ONNX graph for an MPNet encoder (all-mpnet-base-v2) from its safetensors weights,
without torch.

Usage: convert_mpnet_onnx.py <model_dir> <out.onnx>

MPNet differs from BERT in four places, all handled here: the weights' names
(`attention.attn.{q,k,v,o}`, `attention.LayerNorm`); no token types; positions counted from
the padding index + 1 over the non-padding tokens; and a relative position bias (32 buckets per
head, shared by every layer) added to the attention scores. The bias for every pair of positions
up to the model's length is computed here once and sliced to the sequence in the graph. The
graph takes input_ids and attention_mask (int64, [batch, seq]) and returns last_hidden_state.
"""

import json
import math
import sys

import numpy as np
from onnx import TensorProto

sys.path.insert(0, __import__("os").path.dirname(__file__))
from convert_bert_onnx import Graph, encoder, load_safetensors, save  # noqa: E402


def relative_buckets(length, num_buckets, max_distance=128):
    """MPNet's bidirectional bucket of every (query, key) position pair."""
    context = np.arange(length)[:, None]
    memory = np.arange(length)[None, :]
    n = -(memory - context)
    half = num_buckets // 2
    ret = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    max_exact = half // 2
    with np.errstate(divide="ignore"):
        large = max_exact + (
            np.log(np.maximum(n, 1) / max_exact) / math.log(max_distance / max_exact) * (half - max_exact)
        ).astype(np.int64)
    large = np.minimum(large, half - 1)
    return ret + np.where(n < max_exact, n, large)


def build(model_dir, out_path):
    config = json.load(open(f"{model_dir}/config.json"))
    weights = load_safetensors(f"{model_dir}/model.safetensors")
    hidden = config["hidden_size"]
    eps = config.get("layer_norm_eps", 1e-5)
    pad = config.get("pad_token_id", 1)
    length = config["max_position_embeddings"] - pad - 1
    g = Graph(weights)

    # Positions: pad + 1 + (index among the non-padding tokens); padding keeps the pad index.
    not_pad = g.op("Cast", [g.op("Not", [g.op("Equal", ["input_ids", g.const(pad, np.int64)])])], to=TensorProto.INT64)
    positions = g.op("Add", [g.op("Mul", [g.op("CumSum", [not_pad, g.const(1, np.int64)]), not_pad]), g.const(pad, np.int64)])
    words = g.op("Gather", [g.weight("embeddings.word_embeddings.weight"), "input_ids"], axis=0)
    pos = g.op("Gather", [g.weight("embeddings.position_embeddings.weight"), positions], axis=0)
    h = g.layer_norm(g.op("Add", [words, pos]), "embeddings.LayerNorm", eps)

    # The relative position bias [1, heads, seq, seq] (precomputed for every length) plus the
    # additive padding mask.
    table = weights["encoder.relative_attention_bias.weight"]  # [buckets, heads]
    bias = table[relative_buckets(length, table.shape[0])]  # [length, length, heads]
    bias = np.ascontiguousarray(bias.transpose(2, 0, 1)[None]).astype(np.float32)
    seq_len = g.op("Unsqueeze", [g.op("Gather", [g.op("Shape", ["input_ids"]), g.const(1, np.int64)], axis=0), g.const([0], np.int64)])
    zeros = g.const([0, 0], np.int64)
    sliced = g.op("Slice", [g.const(bias), zeros, g.op("Concat", [seq_len, seq_len], axis=0), g.const([2, 3], np.int64)])
    mask = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    mask = g.op("Mul", [g.op("Sub", [g.const(1.0), mask]), g.const(-10000.0)])
    mask = g.op("Add", [g.op("Unsqueeze", [mask, g.const([1, 2], np.int64)]), sliced])

    names = ("attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o", "attention.LayerNorm")
    h = encoder(g, h, mask, config, eps, names)
    save(g, h, ("input_ids", "attention_mask"), hidden, "mpnet", out_path)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    build(sys.argv[1], sys.argv[2])
