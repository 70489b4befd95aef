"""One-off: MostPop's test metrics on the shared Gowalla split, computed without recx (the golden test's literals).

Plain Python/numpy, one user at a time: read ../shared/data/gowalla/{train,valid,test}.txt, count training
interactions per item, rank all items by (count descending, item id ascending), and for each user with test items
walk that ranking, skipping the user's train and valid items, to the first 20; NDCG@20 (binary relevance, IDCG over
min(20, |test|)) and Recall@20 (hits / |test|), overall and per popularity stratum (items in the same order: the
first round(0.05 n) popular, up to round(0.20 n) neutral, the rest unpopular; stratified values keep the overall
IDCG / |test|). Averages over users with test items. Run: python3 tests/golden/mostpop_gowalla_reference.py
"""

import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "gowalla"
K = 20


def read(name):
    rows = {}
    for line in (ROOT / f"{name}.txt").read_text().splitlines():
        ids = [int(x) for x in line.split()]
        if ids:
            rows[ids[0]] = ids[1:]
    return rows


def main():
    train, valid, test = read("train"), read("valid"), read("test")
    n_items = 1 + max(i for split in (train, valid, test) for items in split.values() for i in items)
    counts = np.zeros(n_items, dtype=np.int64)
    for items in train.values():
        for i in items:
            counts[i] += 1
    ranking = sorted(range(n_items), key=lambda i: (-counts[i], i))
    stratum = {}
    for rank, item in enumerate(ranking):
        stratum[item] = (
            "popular" if rank < round(0.05 * n_items) else "neutral" if rank < round(0.20 * n_items) else "unpopular"
        )
    totals = {(m, s): 0.0 for m in ("ndcg", "recall") for s in ("all", "popular", "neutral", "unpopular")}
    n_users = 0
    for user, targets in test.items():
        targets = set(targets)
        if not targets:
            continue
        n_users += 1
        seen = set(train.get(user, [])) | set(valid.get(user, []))
        top = []
        for item in ranking:
            if item not in seen:
                top.append(item)
                if len(top) == K:
                    break
        idcg = sum(1 / math.log2(r + 2) for r in range(min(K, len(targets))))
        for r, item in enumerate(top):
            if item in targets:
                for s in ("all", stratum[item]):
                    totals[("ndcg", s)] += 1 / math.log2(r + 2) / idcg
                    totals[("recall", s)] += 1 / len(targets)
    print(f"n_items {n_items}, users with test items {n_users}")
    for key, value in totals.items():
        print(f"{key}: {value / n_users!r}")


if __name__ == "__main__":
    sys.exit(main())
