#!/usr/bin/env python3
"""Builds an ONNX graph for nomic-embed-text-v1.5 (a NomicBert encoder) from its GGUF weights,
without torch.

Usage: convert_nomic_onnx.py <model.gguf> <out_dir>

Writes <out_dir>/model.onnx, config.json and vocab.txt (the WordPiece vocabulary, given back its
`##` continuation marks: the GGUF spells a word's first piece with a leading `▁` instead).

NomicBert differs from BERT in four places, all handled here: no position embeddings, but rotary
ones (the "neox" layout: the two halves of each head rotated, base 1000) applied to queries and
keys; one fused query/key/value projection; a SwiGLU feed-forward (down(up(x) * silu(gate(x))));
and no biases in the projections. The LayerNorms sit after each residual, as in BERT. The graph
takes input_ids and attention_mask (int64, [batch, seq]; every token has type 0) and returns
last_hidden_state. Needs numpy, onnx and gguf (PyPI).
"""

import json
import math
import os
import sys

import gguf
import numpy as np
from onnx import TensorProto

sys.path.insert(0, os.path.dirname(__file__))
from convert_bert_onnx import Graph, save  # noqa: E402

ARCH = "nomic-bert"


def read_gguf(path):
    reader = gguf.GGUFReader(path)
    meta = {}
    for key, field in reader.fields.items():
        if key.startswith(ARCH + ".") or key.startswith("general."):
            meta[key.removeprefix(ARCH + ".")] = field.contents()
    if meta.get("general.architecture") != ARCH:
        sys.exit(f"{path}: not a {ARCH} model ({meta.get('general.architecture')})")
    weights = {t.name: np.asarray(t.data, dtype=np.float32) for t in reader.tensors}
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    return meta, weights, tokens, types


def wordpiece_vocab(tokens, types):
    """The GGUF's tokens in WordPiece spelling: `▁word` → `word`, `piece` → `##piece`; control
    tokens ([CLS], [PAD], …) as they are."""
    vocab = []
    for token, kind in zip(tokens, types):
        if kind == 3 or (token.startswith("[") and token.endswith("]")):
            vocab.append(token)
        elif token.startswith("\u2581"):
            vocab.append(token[1:])
        else:
            vocab.append("##" + token)
    return vocab


def rotary_tables(length, head_dim, base):
    """cos and sin of every position's angles, [length, head_dim] (each half repeated)."""
    inv_freq = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.arange(length, dtype=np.float64)[:, None] * inv_freq[None, :]
    angles = np.concatenate([angles, angles], axis=1)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def build(gguf_path, out_dir):
    meta, weights, tokens, types = read_gguf(gguf_path)
    hidden = int(meta["embedding_length"])
    heads = int(meta["attention.head_count"])
    layers = int(meta["block_count"])
    length = int(meta["context_length"])
    eps = float(meta["attention.layer_norm_epsilon"])
    base = float(meta["rope.freq_base"])
    head_dim = hidden // heads
    half = head_dim // 2
    g = Graph(weights)

    # Embeddings: word + token type 0, then LayerNorm.
    words = g.op("Gather", [g.weight("token_embd.weight"), "input_ids"], axis=0)
    type0 = g.const(weights["token_types.weight"][0])
    h = g.layer_norm(g.op("Add", [words, type0]), "token_embd_norm", eps)

    mask = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    mask = g.op("Mul", [g.op("Sub", [g.const(1.0), mask]), g.const(-10000.0)])
    mask = g.op("Unsqueeze", [mask, g.const([1, 2], np.int64)])

    # cos/sin for this sequence: [1, 1, seq, head_dim].
    cos, sin = rotary_tables(length, head_dim, base)
    seq_len = g.op("Unsqueeze", [g.op("Gather", [g.op("Shape", ["input_ids"]), g.const(1, np.int64)], axis=0), g.const([0], np.int64)])
    zero = g.const([0], np.int64)
    cos = g.op("Slice", [g.const(cos[None, None]), zero, seq_len, g.const([2], np.int64)])
    sin = g.op("Slice", [g.const(sin[None, None]), zero, seq_len, g.const([2], np.int64)])

    def rotate(x):
        """x * cos + rotate_half(x) * sin, where rotate_half(x) = [-x2, x1] for x = [x1, x2]."""
        last = g.const([-1], np.int64)
        first = g.op("Slice", [x, zero, g.const([half], np.int64), last])
        second = g.op("Slice", [x, g.const([half], np.int64), g.const([head_dim], np.int64), last])
        rotated = g.op("Concat", [g.op("Neg", [second]), first], axis=-1)
        return g.op("Add", [g.op("Mul", [x, cos]), g.op("Mul", [rotated, sin])])

    split_heads = g.const([0, 0, heads, head_dim], np.int64)
    merge_heads = g.const([0, 0, hidden], np.int64)
    scale = g.const(1.0 / math.sqrt(head_dim))
    for i in range(layers):
        p = f"blk.{i}"
        qkv = g.op("MatMul", [h, g.weight(f"{p}.attn_qkv.weight", True)])
        q, k, v = (
            g.op("Transpose", [g.op("Reshape", [g.op("Slice", [qkv, g.const([j * hidden], np.int64), g.const([(j + 1) * hidden], np.int64), g.const([2], np.int64)]), split_heads])], perm=[0, 2, 1, 3])
            for j in range(3)
        )
        q, k = rotate(q), rotate(k)
        k = g.op("Transpose", [k], perm=[0, 1, 3, 2])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), mask])
        context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), merge_heads])
        attended = g.op("Add", [g.op("MatMul", [context, g.weight(f"{p}.attn_output.weight", True)]), h])
        h = g.layer_norm(attended, f"{p}.attn_output_norm", eps)
        up = g.op("MatMul", [h, g.weight(f"{p}.ffn_up.weight", True)])
        gate = g.op("MatMul", [h, g.weight(f"{p}.ffn_gate.weight", True)])
        silu = g.op("Mul", [gate, g.op("Sigmoid", [gate])])
        out = g.op("Add", [g.op("MatMul", [g.op("Mul", [up, silu]), g.weight(f"{p}.ffn_down.weight", True)]), h])
        h = g.layer_norm(out, f"{p}.layer_output_norm", eps)

    os.makedirs(out_dir, exist_ok=True)
    # Written aside and renamed, so a conversion killed midway leaves no half model.onnx.
    model_path = os.path.join(out_dir, "model.onnx")
    save(g, h, ("input_ids", "attention_mask"), hidden, "nomic_bert", model_path + ".tmp")
    os.replace(model_path + ".tmp", model_path)
    with open(os.path.join(out_dir, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(wordpiece_vocab(tokens, types)) + "\n")
    config = {
        "model_type": "nomic_bert",
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "max_position_embeddings": length,
        "rotary_emb_base": base,
        "layer_norm_eps": eps,
        "vocab_size": len(tokens),
        "pad_token_id": 0,
    }
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    build(sys.argv[1], sys.argv[2])
