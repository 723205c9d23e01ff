#!/usr/bin/env python3
"""The floor the service benchmarks compare against: the bare embedding model.

Runs the same ONNX file the service uses (int8 all-MiniLM-L6-v2, or multilingual-e5-small
with its `query: ` / `passage: ` prefixes) through the Python `onnxruntime` wheel (2 intra-op
threads, truncation at the model's limit, mean pooling and L2 normalisation), on the texts the
benchmark uses, and prints one JSON line:
  {"query_p50_ms", "query_p95_ms", "batch_texts_per_s", "texts", "threads", ...}
`make bench` installs its Python packages into .cache/bench-venv.
"""

import argparse
import json
import statistics
import sys
import time

import numpy as np
import onnxruntime
from tokenizers import Tokenizer


def load_texts(path, limit):
    texts = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            line = line.strip()
            if line:
                texts.append(line)
            if len(texts) >= limit:
                break
    return texts


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True, help="model.onnx")
    parser.add_argument("--tokenizer", required=True, help="tokenizer.json")
    parser.add_argument("--texts", required=True, help="one text per line")
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--query-prefix", default="")
    parser.add_argument("--passage-prefix", default="")
    arguments = parser.parse_args()

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = arguments.threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = onnxruntime.InferenceSession(
        arguments.model, options, providers=["CPUExecutionProvider"]
    )
    tokenizer = Tokenizer.from_file(arguments.tokenizer)
    tokenizer.enable_truncation(max_length=arguments.max_length)
    tokenizer.enable_padding()  # to the longest text of the batch
    input_names = {model_input.name for model_input in session.get_inputs()}

    def embed(batch):
        encodings = tokenizer.encode_batch(batch)
        ids = np.array([encoding.ids for encoding in encodings], dtype=np.int64)
        mask = np.array([encoding.attention_mask for encoding in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = session.run(None, feeds)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return pooled / norms

    texts = load_texts(arguments.texts, arguments.limit)
    if not texts:
        sys.exit(f"no texts in {arguments.texts}")
    for text in texts[:20]:  # warm-up: first runs allocate
        embed([text])

    query_ms = []
    for index in range(arguments.queries):
        text = arguments.query_prefix + texts[index % len(texts)]
        started = time.perf_counter()
        embed([text])
        query_ms.append((time.perf_counter() - started) * 1000.0)
    query_ms.sort()

    passages = [arguments.passage_prefix + text for text in texts]
    by_length = sorted(passages, key=lambda text: len(tokenizer.encode(text).ids))
    started = time.perf_counter()
    for start in range(0, len(by_length), arguments.batch):
        embed(by_length[start : start + arguments.batch])
    batch_seconds = time.perf_counter() - started

    def percentile(sorted_values, fraction):
        return sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))]

    print(
        json.dumps(
            {
                "query_p50_ms": round(statistics.median(query_ms), 2),
                "query_p95_ms": round(percentile(query_ms, 0.95), 2),
                "batch_texts_per_s": round(len(texts) / batch_seconds, 1),
                "texts": len(texts),
                "threads": arguments.threads,
                "batch": arguments.batch,
                "onnxruntime": onnxruntime.__version__,
            }
        )
    )


if __name__ == "__main__":
    main()
