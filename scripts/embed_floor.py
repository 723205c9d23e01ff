#!/usr/bin/env python3
"""The floor the service benchmarks compare against: the bare embedding model.

Runs the same ONNX file the service uses (int8 all-MiniLM-L6-v2, or multilingual-e5-small
with its `query: ` / `passage: ` prefixes) through the Python `onnxruntime` wheel (2 intra-op
threads, truncation at the model's limit, mean pooling and L2 normalisation), on the texts the
benchmark uses, and prints one JSON line:
  {"query_p50_ms", "query_p95_ms", "batch_texts_per_s", "texts", "threads", ...}
With --serve it prints the batch rate (the same line without the query figures), then
answers rounds for as long as its stdin stays open: each line read is a JSON list of query
texts, each embedded alone, and each answer one line {"ms": [...]}, a duration per text, in
order. A benchmark then times the floor and the service in alternating rounds, so both see
the same machine.
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
    parser.add_argument("--serve", action="store_true", help="answer rounds read from stdin")
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

    if arguments.serve:
        serve(arguments, embed, tokenizer, texts)
        return

    query_ms = []
    for index in range(arguments.queries):
        text = arguments.query_prefix + texts[index % len(texts)]
        started = time.perf_counter()
        embed([text])
        query_ms.append((time.perf_counter() - started) * 1000.0)
    query_ms.sort()
    texts_per_s = batch_rate(arguments, embed, tokenizer, texts)

    def percentile(sorted_values, fraction):
        return sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))]

    print(
        json.dumps(
            {
                "query_p50_ms": round(statistics.median(query_ms), 2),
                "query_p95_ms": round(percentile(query_ms, 0.95), 2),
                "batch_texts_per_s": round(texts_per_s, 1),
                "texts": len(texts),
                "threads": arguments.threads,
                "batch": arguments.batch,
                "onnxruntime": onnxruntime.__version__,
            }
        )
    )


def batch_rate(arguments, embed, tokenizer, texts):
    """Passages per second, embedded in length-sorted batches."""
    passages = [arguments.passage_prefix + text for text in texts]
    by_length = sorted(passages, key=lambda text: len(tokenizer.encode(text).ids))
    started = time.perf_counter()
    for start in range(0, len(by_length), arguments.batch):
        embed(by_length[start : start + arguments.batch])
    return len(texts) / (time.perf_counter() - started)


def serve(arguments, embed, tokenizer, texts):
    print(
        json.dumps(
            {
                "batch_texts_per_s": round(batch_rate(arguments, embed, tokenizer, texts), 1),
                "texts": len(texts),
                "threads": arguments.threads,
                "batch": arguments.batch,
                "onnxruntime": onnxruntime.__version__,
            }
        ),
        flush=True,
    )
    for line in sys.stdin:
        if not line.strip():
            continue
        round_ms = []
        for text in json.loads(line):
            started = time.perf_counter()
            embed([arguments.query_prefix + text])
            round_ms.append(round((time.perf_counter() - started) * 1000.0, 4))
        print(json.dumps({"ms": round_ms}), flush=True)


if __name__ == "__main__":
    main()
