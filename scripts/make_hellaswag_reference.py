#!/usr/bin/python3
"""
The PyTorch reference for the trainer's multiple-choice evaluation (--eval-hellaswag; tests/test_hellaswag.c
compares against what this writes, so the test itself needs neither Python nor PyTorch).

Regenerate with Debian's PyTorch (python3-torch, under /usr/bin/python3):
    /usr/bin/python3 scripts/make_hellaswag_reference.py --out tests/ref

It reads the reference model tests/ref/ref_model.bin (an llm.c model file: maxT 16, V 101 padded to 128, L 2,
NH 4, C 32), makes a set of random multiple-choice examples over its vocabulary and writes:
  hellaswag_ref.bin  the examples as an llm.c eval file (the layout llm.c's dev/data/data_common.py writes,
                     written here independently with struct: 256 int32 header [20240522, 1, examples, longest
                     example in bytes], then per example the uint16 stream 65535, bytes, index, label, n,
                     context length, context, then per ending its length and tokens)
  hellaswag_ref.txt  the model's evaluation of every example, in the layout of train_gpt --hellaswag-details:
                     "position index label answer_by_sum answer_by_mean | summed loss of each ending | mean loss
                     of each ending", '%.9g', then a last line "acc A acc_norm B"
The evaluation is llm.c's hellaswag.py's, in float64: ending j's row is context + ending j, run through the model
as one sequence; the cross-entropies at the positions whose target is an ending token are summed (acc picks the
lowest sum) and averaged over the ending's tokens (acc_norm picks the lowest mean); ties to the lower index.

The examples: N (default 24) with 2 to 5 endings (mostly 4), contexts of 1-9 tokens and endings of 1-7 tokens,
rows at most the model's context (16). An untrained model prefers one ending only slightly, so an example is
drawn again until its best ending leads the second by at least --margin (default 0.01 nats, in both the sum and
the mean): far above float32's rounding (~1e-5 here), so the trainer must give the same answers. The labels are
drawn at random, independently of the model.
"""
import argparse
import math
import os
import random
import struct

import torch
import torch.nn.functional as F

NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
         "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]


def load_model(path):
    """llm.c model file (version 3, fp32) -> (config dict, {name: float64 tensor})."""
    with open(path, "rb") as f:
        h = struct.unpack("256i", f.read(1024))
        if h[0] != 20240326 or h[1] != 3:
            raise SystemExit(f"{path}: not an llm.c fp32 model file (magic {h[0]}, version {h[1]})")
        maxT, V, L, NH, C, Vp = h[2], h[3], h[4], h[5], h[6], h[7]
        shapes = {"wte": (Vp, C), "wpe": (maxT, C), "ln1w": (L, C), "ln1b": (L, C), "qkvw": (L, 3 * C, C),
                  "qkvb": (L, 3 * C), "attprojw": (L, C, C), "attprojb": (L, C), "ln2w": (L, C), "ln2b": (L, C),
                  "fcw": (L, 4 * C, C), "fcb": (L, 4 * C), "fcprojw": (L, C, 4 * C), "fcprojb": (L, C),
                  "lnfw": (C,), "lnfb": (C,)}
        p = {}
        for name in NAMES:
            n = math.prod(shapes[name])
            vals = struct.unpack(f"{n}f", f.read(4 * n))
            p[name] = torch.tensor(vals, dtype=torch.float64).view(shapes[name])
        if f.read(1):
            raise SystemExit(f"{path}: bytes after the parameters")
    return {"maxT": maxT, "V": V, "L": L, "NH": NH, "C": C}, p


def token_losses(p, cfg, x, y):
    """Per-token cross-entropy (B, T) of the model on inputs x and targets y, in float64 (GPT-2, GELU tanh)."""
    B, T = x.shape
    C, NH, V = cfg["C"], cfg["NH"], cfg["V"]
    hs = C // NH
    ln = lambda t, w, b: F.layer_norm(t, (C,), w, b, eps=1e-5)
    h = p["wte"][x] + p["wpe"][:T]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(cfg["L"]):
        qkv = ln(h, p["ln1w"][l], p["ln1b"][l]) @ p["qkvw"][l].T + p["qkvb"][l]
        q, k, v = (t.view(B, T, NH, hs).transpose(1, 2) for t in qkv.split(C, dim=2))
        att = ((q @ k.transpose(-2, -1)) / math.sqrt(hs)).masked_fill(~causal, float("-inf")).softmax(dim=-1)
        h = h + (att @ v).transpose(1, 2).reshape(B, T, C) @ p["attprojw"][l].T + p["attprojb"][l]
        m = F.gelu(ln(h, p["ln2w"][l], p["ln2b"][l]) @ p["fcw"][l].T + p["fcb"][l], approximate="tanh")
        h = h + m @ p["fcprojw"][l].T + p["fcprojb"][l]
    logits = ln(h, p["lnfw"], p["lnfb"]) @ p["wte"][:V].T
    return F.cross_entropy(logits.reshape(-1, V), y.reshape(-1), reduction="none").view(B, T)


def score(p, cfg, ctx, endings):
    """Each ending's summed and mean loss: rows context + ending, padded with token 0 to the longest."""
    T = max(len(ctx) + len(e) for e in endings)
    x = torch.zeros(len(endings), T, dtype=torch.long)
    y = torch.zeros(len(endings), T, dtype=torch.long)
    for j, e in enumerate(endings):
        row = ctx + e
        x[j, :len(row)] = torch.tensor(row)
        y[j, :len(row) - 1] = torch.tensor(row[1:])
    losses = token_losses(p, cfg, x, y)
    sums, means = [], []
    for j, e in enumerate(endings):
        s = float(losses[j, len(ctx) - 1:len(ctx) + len(e) - 1].sum())
        sums.append(s)
        means.append(s / len(e))
    return sums, means


def argmin(v):
    return min(range(len(v)), key=lambda j: (v[j], j))


def lead(v):
    """How far the lowest value is below the second lowest."""
    s = sorted(v)
    return s[1] - s[0] if len(s) > 1 else math.inf


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="tests/ref")
    ap.add_argument("--model", default=None, help="default: OUT/ref_model.bin")
    ap.add_argument("--examples", type=int, default=24)
    ap.add_argument("--margin", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=20240522)
    a = ap.parse_args()
    cfg, p = load_model(a.model or os.path.join(a.out, "ref_model.bin"))
    rng = random.Random(a.seed)
    V, maxT = cfg["V"], cfg["maxT"]
    examples = []
    tries = 0
    while len(examples) < a.examples:
        tries += 1
        i = len(examples)
        n = [2, 3, 5][i % 3] if i % 4 == 3 else 4
        ctx = [rng.randrange(V) for _ in range(rng.randint(1, 9))]
        endings = [[rng.randrange(V) for _ in range(rng.randint(1, min(7, maxT - len(ctx))))] for _ in range(n)]
        label = rng.randrange(n)
        with torch.no_grad():
            sums, means = score(p, cfg, ctx, endings)
        if lead(sums) < a.margin or lead(means) < a.margin:
            continue
        examples.append((i, label, ctx, endings, sums, means))

    streams = []
    for i, label, ctx, endings, _, _ in examples:
        s = [65535, 0, i, label, len(endings), len(ctx)] + ctx
        for e in endings:
            s += [len(e)] + e
        s[1] = 2 * len(s)
        streams.append(s)
    header = [20240522, 1, len(streams), max(2 * len(s) for s in streams)] + [0] * 252
    with open(os.path.join(a.out, "hellaswag_ref.bin"), "wb") as f:
        f.write(struct.pack("256i", *header))
        for s in streams:
            f.write(struct.pack(f"{len(s)}H", *s))

    right_sum = right_mean = 0
    with open(os.path.join(a.out, "hellaswag_ref.txt"), "w") as f:
        f.write("# scripts/make_hellaswag_reference.py: PyTorch (float64) on ref_model.bin and hellaswag_ref.bin\n")
        f.write("# position index label answer_by_sum answer_by_mean | summed loss of each ending | mean loss of each ending\n")
        for pos, (i, label, ctx, endings, sums, means) in enumerate(examples):
            bs, bm = argmin(sums), argmin(means)
            right_sum += bs == label
            right_mean += bm == label
            f.write(f"{pos} {i} {label} {bs} {bm} |" + "".join(f" {v:.9g}" for v in sums) + " |" +
                    "".join(f" {v:.9g}" for v in means) + "\n")
        f.write(f"acc {right_sum / len(examples):.9g} acc_norm {right_mean / len(examples):.9g}\n")
    print(f"{len(examples)} examples ({tries} drawn), acc {right_sum / len(examples):.4f}, "
          f"acc_norm {right_mean / len(examples):.4f} -> {a.out}/hellaswag_ref.bin, hellaswag_ref.txt")


if __name__ == "__main__":
    main()
