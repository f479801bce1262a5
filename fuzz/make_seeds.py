#!/usr/bin/env python3
"""
fuzz/make_seeds.py: writes the committed seed corpora fuzz/corpus/<target>/ of the targets in OWN_TARGETS (every
harness but safetensors, whose seeds are made elsewhere), the dictionaries fuzz/vocab.dict and fuzz/flags.dict, and
the small vocabulary fuzz/vocab/ (the first 256 + 1024 tokens of GPT-2, with their merges) used by fuzz/encode.c.
A few valid inputs and a few broken ones per target; about 130 KB in all.

    python3 fuzz/make_seeds.py [--gpt2 ../shared/data/gpt2]      (from the repository root; overwrites)

The formats written here follow the harnesses' top comments (fuzz/*.c) and the parsers' file formats
(dataloader.h, tokenizer.h, train_gpt.c, flags.h). Only the standard library.
"""
import argparse
import json
import os
import re
import shutil
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUZZ = os.path.join(ROOT, "fuzz")
MASK = (1 << 64) - 1
OWN_TARGETS = ["shard", "tokenizer_bin", "vocab", "encode", "model", "checkpoint", "llmc_state", "flags", "hellaswag"]


def write(target, name, data):
    d = os.path.join(FUZZ, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def fnv1a64(data, h=14695981039346656037):
    for b in data:
        h = ((h ^ b) * 1099511628211) & MASK
    return h


# ---------------------------------------------------------------------------------------------------------------
# shards (fuzz/shard.c): 17 bytes of settings, then shards separated by "FZSH"

def shard(tokens, version=1, magic=20240520, count=None):
    header = struct.pack("<3i", magic, version, len(tokens) if count is None else count) + b"\0" * (1024 - 12)
    return header + struct.pack("<%d%s" % (len(tokens), "H" if version == 1 else "I"), *tokens)


def shard_config(B=2, T=4, world=1, rank=0, shuffle=0, seed=0, vocab=50257, times256=False, word=8, value=0, blend=False):
    v = vocab - 1 if not times256 else vocab // 256 - 1
    return bytes([B - 1, T - 1, world - 1, rank, seed * 3 + shuffle, v & 255, v >> 8, (1 if times256 else 0) | (2 if blend else 0),
                  word]) + struct.pack("<Q", value)


def make_shard_seeds():
    toks = [(i * 7919) % 50257 for i in range(41)]
    write("shard", "seq_one_shard", shard_config(B=2, T=4) + shard(toks))
    write("shard", "seq_two_shards_world2", shard_config(B=1, T=4, world=2, rank=1) + shard(toks) + b"FZSH" + shard(toks[:20]))
    write("shard", "shuffle_three_shards", shard_config(B=2, T=3, world=3, rank=2, shuffle=1, seed=5)
          + shard(toks[:17]) + b"FZSH" + shard(toks[:30]) + b"FZSH" + shard(toks[5:12]))
    write("shard", "v2_uint32_tokens", shard_config(B=1, T=8, vocab=100096, times256=True)
          + shard([(i * 104729) % 100096 for i in range(33)], version=2))
    write("shard", "state_position_word", shard_config(B=1, T=2, word=6, value=7) + shard(toks[:25]))
    write("shard", "state_cursor_word", shard_config(B=1, T=2, shuffle=1, word=5, value=1 << 40) + shard(toks[:25]))
    write("shard", "llmc_order_two_shards_world2", shard_config(B=1, T=4, world=2, rank=1, shuffle=2) + shard(toks) + b"FZSH" + shard(toks[:20]))
    write("shard", "llmc_order_calls_word", shard_config(B=1, T=2, shuffle=2, word=5, value=37) + shard(toks[:25]))
    # blends (shuffle 1): shard 0 against shards 1-3, weights 1 + value byte 0 % 5 and 1 + value byte 1 % 5
    write("shard", "blend_two_sets", shard_config(B=1, T=3, world=2, rank=1, shuffle=1, seed=2, blend=True, value=0x0102)
          + shard(toks[:17]) + b"FZSH" + shard(toks[:30]) + b"FZSH" + shard(toks[5:12]))
    write("shard", "blend_cursor_word", shard_config(B=1, T=2, shuffle=1, blend=True, word=5, value=(1 << 40) | 0x0300)
          + shard(toks[:25]) + b"FZSH" + shard(toks[3:20]))
    write("shard", "llmc_order_epoch_word", shard_config(B=1, T=2, shuffle=2, word=4, value=3) + shard(toks[:25]))
    # broken
    write("shard", "bad_magic", shard_config() + shard(toks, magic=20240521))
    write("shard", "bad_version", shard_config() + shard(toks, version=3))
    write("shard", "count_mismatch", shard_config() + shard(toks, count=50))
    write("shard", "negative_count", shard_config() + shard(toks, count=-1))
    write("shard", "token_above_vocab", shard_config(vocab=100) + shard(toks))
    write("shard", "too_few_tokens", shard_config(B=4, T=8) + shard(toks[:10]))
    write("shard", "short_header", shard_config() + shard(toks)[:1000])
    write("shard", "empty", shard_config())


# ---------------------------------------------------------------------------------------------------------------
# the GPT-2 byte alphabet and a small vocabulary

def byte_alphabet():
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    b2u, n = {}, 0
    for b in range(256):
        if b in printable:
            b2u[b] = chr(b)
        else:
            b2u[b] = chr(256 + n)
            n += 1
    return b2u


def load_gpt2(gpt2_dir, merges):
    """The first 256 + merges tokens of GPT-2 (id order) as strings in the byte alphabet, and the merge lines."""
    with open(os.path.join(gpt2_dir, "encoder.json"), encoding="utf-8") as f:
        enc = json.load(f)
    by_id = sorted(enc.items(), key=lambda kv: kv[1])
    tokens = [k for k, v in by_id[: 256 + merges]]
    with open(os.path.join(gpt2_dir, "vocab.bpe"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    return tokens, lines[1 : 1 + merges]


def vocab_files(tokens, merge_lines, ensure_ascii=False, indent=None, eot=True):
    d = {t: i for i, t in enumerate(tokens)}
    if eot:
        d["<|endoftext|>"] = len(tokens)
    js = json.dumps(d, ensure_ascii=ensure_ascii, indent=indent)
    bpe = "#version: 0.2\n" + "\n".join(merge_lines) + "\n"
    return js.encode("utf-8"), bpe.encode("utf-8")


def token_bytes(tokens):
    u2b = {u: b for b, u in byte_alphabet().items()}
    return [bytes(u2b[ch] for ch in t) for t in tokens]


def make_vocab_seeds(tokens, merges):
    sep = b"\n@@vocab.bpe@@\n"
    t, m = tokens[:256 + 32], merges[:32]
    js, bpe = vocab_files(t, m)
    write("vocab", "small_valid", js + sep + bpe)
    js2, _ = vocab_files(t, m, ensure_ascii=True, indent=1)
    write("vocab", "small_valid_escaped", js2 + sep + bpe.replace(b"\n", b"\r\n"))
    js3, bpe3 = vocab_files(tokens[:256 + 4], merges[:4])
    write("vocab", "tiny_valid", js3 + sep + bpe3)
    # broken
    write("vocab", "no_eot", vocab_files(t, m, eot=False)[0] + sep + bpe)
    write("vocab", "merge_order", js + sep + bpe.replace(m[0].encode(), b"TMP").replace(m[1].encode(), m[0].encode()).replace(b"TMP", m[1].encode()))
    write("vocab", "merge_unknown", js + sep + bpe + "Ġ zzzz\n".encode())
    write("vocab", "missing_byte", js.replace(b'"!": 0, ', b"") + sep + bpe)
    write("vocab", "duplicate_id", js.replace(b'"#": 2', b'"#": 1') + sep + bpe)
    write("vocab", "bad_escape", js.replace(b'"\\""', b'"\\q"') + sep + bpe)
    write("vocab", "lone_surrogate", js2.replace(b'"!"', b'"\\udc00"') + sep + bpe)
    write("vocab", "unterminated", js[:200] + sep + bpe)
    write("vocab", "no_separator", js)
    write("vocab", "empty_object", b"{}" + sep + bpe)
    # a fuzz finding: an id past every integer type (1.1e26) was converted to uint64_t (undefined behaviour)
    write("vocab", "id_astronomical", js.replace(b'"#": 2', b'"#": 110000000000000000000000000') + sep + bpe)
    # generated vocabularies (first byte 0, see fuzz/vocab.c): settings, merges as pairs of uint16, then text
    def gen(mult, add, flags, pairs, text):
        return bytes([0, mult, add, len(pairs), flags]) + b"".join(struct.pack("<HH", a, b) for a, b in pairs) + text
    chain = [(104, 101), (108, 108), (256, 257), (258, 111), (32, 119), (260, 111), (259, 259), (262, 262), (263, 263)]
    text = b"hello hello world, hellllo wo\xc3\xa9 \xff " + b"l" * 80
    write("vocab", "gen_chain", gen(0, 0, 0, chain, text))
    write("vocab", "gen_permuted_escaped", gen(37, 11, 7, chain + [(i * 7 % 300, i * 13 % 300) for i in range(40)], text))
    write("vocab", "gen_no_merges", gen(0, 0, 0, [], text))
    with open(os.path.join(FUZZ, "vocab.dict"), "w") as f:
        f.write("# libFuzzer dictionary for fuzz/vocab.c (made by fuzz/make_seeds.py)\n")
        for w in ['"\\x0a@@vocab.bpe@@\\x0a"', '"{"', '"}"', '"\\""', '": "', '", "', '"\\\\u0120"', '"\\\\ud83d\\\\ude00"',
                  '"\\\\\\""', '"\\\\n"', '"<|endoftext|>"', '"#version: 0.2\\x0a"', '"\\xc4\\xa0"', '"\\xc4\\x80"',
                  '"256"', '"1048575"', '"1048576"']:
            f.write(w + "\n")


def make_encode_vocab(tokens, merges):
    d = os.path.join(FUZZ, "vocab")
    os.makedirs(d, exist_ok=True)
    js, bpe = vocab_files(tokens, merges)
    with open(os.path.join(d, "encoder.json"), "wb") as f:
        f.write(js)
    with open(os.path.join(d, "vocab.bpe"), "wb") as f:
        f.write(bpe)


def make_encode_seeds():
    texts = {
        "ascii": "Hello world! It's a test, isn't it? They'll've 12345 numbers.\n\nNew paragraph.",
        "unicode": "Grüße, ünïcödé — 日本語のテキスト, русский текст, emoji \U0001F600\U0001F680 and ﬁ ligatures",
        "whitespace": "a\t\tb   c\r\n\r\n    d \u00a0\u2003e\n\n\n" + " " * 70 + "end",
        "code": "int main(void) {\n    return x->y[3] >= 0 ? 1 : -1; // comment\n}\n",
        "digits": "3.14159265358979 2024-05-20 0x1F 1,000,000 ٣٤٥ ௧௨",
    }
    for name, t in texts.items():
        write("encode", name, t)
    write("encode", "invalid_utf8", b"ok \xff\xfe \xc0\x80 overlong \xed\xa0\x80 surrogate \xf4\x90\x80\x80 big \xe2\x82 cut")
    write("encode", "binary", bytes(range(256)))
    write("encode", "long_piece", b"a" * 300 + b" " + b"ab" * 100)


def make_tokenizer_bin_seeds(tokens):
    tb = token_bytes(tokens[:256 + 64]) + [b"<|endoftext|>"]

    def tbin(toks, version=2, vocab=None, eot=None, magic=20240328):
        vocab = len(toks) if vocab is None else vocab
        eot = len(toks) - 1 if eot is None else eot
        header = struct.pack("<4I", magic, version, vocab, eot) + b"\0" * (1024 - 16)
        return header + b"".join(bytes([len(t)]) + t for t in toks)

    write("tokenizer_bin", "valid_v2", tbin(tb))
    write("tokenizer_bin", "valid_v2_tiny", tbin([b"a", b"b", b"ab", b"<|endoftext|>"]))
    write("tokenizer_bin", "v1_small", tbin(tb, version=1))  # EOT 50256 is not below vocab_size
    write("tokenizer_bin", "truncated_last", tbin(tb)[:-3])
    write("tokenizer_bin", "zero_length_token", tbin([b"a", b"", b"b"]))
    write("tokenizer_bin", "trailing_data", tbin([b"a", b"b"]) + b"xyz")
    write("tokenizer_bin", "bad_magic", tbin([b"a"], magic=1))
    write("tokenizer_bin", "huge_vocab", tbin([b"a"], vocab=1 << 20, eot=0))
    write("tokenizer_bin", "header_only", tbin([], vocab=1, eot=0))


# ---------------------------------------------------------------------------------------------------------------
# model files (fuzz/model.c) and checkpoints (fuzz/checkpoint.c): the tiny model maxT 8, V 5, Vp 8, L 1, NH 1, C 4

def num_params(maxT, V, Vp, L, NH, C):
    return Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C


def model_file(maxT=8, V=5, Vp=8, L=1, NH=1, C=4, version=3, magic=20240326, values=None):
    n = num_params(maxT, V, Vp, L, NH, C)
    header = struct.pack("<8i", magic, version, maxT, V, L, NH, C, Vp) + b"\0" * (1024 - 32)
    values = values if values is not None else [0.001 * i for i in range(n)]
    if version == 3:
        return header + struct.pack("<%df" % n, *values)
    return header + b"".join(struct.pack("<f", v)[2:] for v in values)  # bf16: the high half of each float


def make_model_seeds():
    write("model", "tiny_fp32", model_file())
    write("model", "tiny_bf16", model_file(version=5))
    write("model", "two_layers_two_heads", model_file(L=2, NH=2, C=4, maxT=4, V=3, Vp=4))
    n = num_params(8, 5, 8, 1, 1, 4)
    write("model", "nan_value", model_file(values=[0.0] * (n - 1) + [float("nan")]))
    write("model", "truncated", model_file()[:-8])
    write("model", "too_long", model_file() + b"\0\0\0\0")
    write("model", "bad_magic", model_file(magic=1))
    write("model", "bad_version", model_file(version=4))
    write("model", "heads_do_not_divide", model_file(NH=3))
    write("model", "huge_header", model_file()[:1024].replace(struct.pack("<i", 5), struct.pack("<i", 1 << 24), 1))
    write("model", "header_only", model_file()[:1024])


def dl_state(shuffle, cursor_or_shard, position, epoch, seed=1337, T=4):
    fingerprint = fnv1a64(struct.pack("<Q", 64), fnv1a64(struct.pack("<i", 1)))
    return [(0x444C5354 << 32) | 1, shuffle, seed, T, epoch, cursor_or_shard, position, fingerprint]


def state_file(step=3, version=3, magic=20240331, params=None, data=None, adam_t=None, master=0, sum_kind=1,
               dtype=0, scale=1.0, clean=0, psgd=None, guard=None, settings=None):
    n = num_params(8, 5, 8, 1, 1, 4) if params is None else params
    h = [0] * 64
    h[0], h[1], h[2], h[3] = magic, version, step, n
    h[6] = 0x2545F4914F6CDD1D  # rng
    h[18] = step if adam_t is None else adam_t
    if version >= 5:  # checksum kind, storage type, master-weights flag, loss scaler, stochastic-rounding seed
        h[20], h[21], h[22], h[23], h[24] = sum_kind, dtype, master, clean, 0x5352
        h[7] = struct.unpack("<I", struct.pack("<f", scale))[0]
    if settings:  # the run's settings (checkpoint.h's ST_SETTINGS...ST_SET_COMPRESS): words 40 to 51
        for i, w in enumerate(settings):
            h[40 + i] = w & MASK
    data = data if data is not None else dl_state(0, 0, 8, 0)
    for i, w in enumerate(data):
        h[32 + i] = w & MASK
    payload = struct.pack("<%df" % n, *[0.01 * i for i in range(n)]) + struct.pack("<%df" % n, *[1e-4] * n)
    if master:
        payload += struct.pack("<%df" % n, *[0.001 * i for i in range(n)])
    if psgd:  # version 6: PowerSGD's rank, error-feedback vectors and Q floats; Q, then each rank's error feedback
        rank, ranks, q = psgd
        h[25], h[26], h[27] = rank, ranks, q
        payload += struct.pack("<%df" % q, *[0.5] * q) + struct.pack("<%df" % (ranks * n), *[1e-3 * (i % 7) for i in range(ranks * n)])
    if guard:  # version 7: the outlier guard's window W; per window (losses, norms) the count and W doubles
        W, windows = guard
        h[29] = W
        for vals in windows:
            payload += struct.pack("<Q", len(vals)) + struct.pack("<%dd" % W, *(list(vals) + [0.0] * (W - len(vals))))
    return struct.pack("<64Q", *h) + payload


# llm.c's per-process state files (fuzz/llmc_state.c) for the tiny model: a 256-int header (magic 20240527, version
# 1, processes, rank, master weights, shuffle, [10] step, [30..33] shard and sample as size_t), m, v and perhaps the
# master weights (`shard` floats each: every parameter, or under ZeRO-1 the rank's N-th of each tensor of llm.c's
# flat order), then with shuffle the loader's orders and a 2520-byte mt19937 state
TINY_TENSORS = [32, 32, 4, 4, 48, 12, 16, 4, 4, 4, 64, 16, 64, 4, 4, 4]  # llm.c's flat order, L 1


def llmc_state(N=1, rank=0, zero=0, master=0, shuffle=0, step=4, magic=20240527, values=None):
    n = sum(TINY_TENSORS)
    h = [0] * 256
    h[0], h[1], h[2], h[3], h[4], h[5], h[10] = magic, 1, N, rank, master, shuffle, step
    h[32] = 3  # the sample index (low word of the size_t)
    flat = values if values is not None else [0.01 * i for i in range(n)]
    if zero:
        mine, at = [], 0
        for size in TINY_TENSORS:
            piece = size // N
            mine += flat[at + rank * piece:at + (rank + 1) * piece]
            at += size
    else:
        mine = flat
    body = b"".join(struct.pack("<%df" % len(mine), *[v * (k + 1) for v in mine]) for k in range(2 + master))
    if shuffle:
        body += struct.pack("<Q", 1) + struct.pack("<i", 0) + struct.pack("<Q", 3) + struct.pack("<3i", 2, 0, 1) + b"\0" * 2520
    return struct.pack("<256i", *h) + body


def make_llmc_state_seeds():
    sep = b"\n@@rank@@\n"
    write("llmc_state", "one_process", llmc_state())
    write("llmc_state", "one_process_master_shuffled", llmc_state(master=1, shuffle=1))
    write("llmc_state", "two_zero1", sep.join(llmc_state(N=2, rank=r, zero=1, master=1, shuffle=1) for r in range(2)))
    write("llmc_state", "two_zero0", sep.join(llmc_state(N=2, rank=r) for r in range(2)))
    write("llmc_state", "four_zero1", sep.join(llmc_state(N=4, rank=r, zero=1, master=1) for r in range(4)))
    write("llmc_state", "missing_rank", llmc_state(N=2, rank=0, zero=1))
    write("llmc_state", "truncated", llmc_state()[:-4])
    write("llmc_state", "too_long", llmc_state() + b"\0\0\0\0")
    write("llmc_state", "bad_magic", llmc_state(magic=1))
    write("llmc_state", "other_step", llmc_state(step=5))
    write("llmc_state", "rank_swapped", sep.join(llmc_state(N=2, rank=1 - r, zero=1) for r in range(2)))
    write("llmc_state", "nan_moment", llmc_state(values=[0.0] * 300 + [float("nan")] * 16))
    write("llmc_state", "header_only", llmc_state()[:1024])


def make_checkpoint_seeds():
    sep = b"\n@@state@@\n"
    fix = b"\x01"
    write("checkpoint", "seq_state", fix + b"3\n" + sep + state_file())
    write("checkpoint", "shuffle_state", fix + b"12\n" + sep + state_file(step=12, data=dl_state(1, 20, 0, 1)))
    write("checkpoint", "seq_last_position", fix + b"3" + sep + state_file(data=dl_state(0, 0, 60, 7)))
    write("checkpoint", "unfixed_checksums", b"\x00" + b"3\n" + sep + state_file())
    write("checkpoint", "v5_fp32", fix + b"3\n" + sep + state_file(version=5, sum_kind=2))
    write("checkpoint", "v5_fp16_master", fix + b"3\n" + sep + state_file(version=5, master=1, dtype=2, scale=4096.0, clean=2))
    write("checkpoint", "v5_bad_scale", fix + b"3\n" + sep + state_file(version=5, master=1, dtype=2, scale=-1.0))
    write("checkpoint", "v5_bad_master_flag", fix + b"3\n" + sep + state_file(version=5, master=2))
    fbits = lambda x: struct.unpack("<I", struct.pack("<f", x))[0]
    # recorded, lr 6e-4, cosine, warmup 2, final 0.1, steps 10, wd 0.1, clip 1, betas 0.9 0.95, eps 1e-8, powersgd:2
    run = [1, fbits(6e-4), 1, 2, fbits(0.1), 10, fbits(0.1), fbits(1.0), fbits(0.9), fbits(0.95), fbits(1e-8), 3 + 256 * 2]
    write("checkpoint", "v5_settings", fix + b"3\n" + sep + state_file(version=5, sum_kind=2, settings=run))
    write("checkpoint", "v5_settings_bad_schedule", fix + b"3\n" + sep + state_file(version=5, sum_kind=2, settings=run[:2] + [9] + run[3:]))
    write("checkpoint", "v6_powersgd", fix + b"3\n" + sep + state_file(version=6, sum_kind=2, psgd=(1, 2, 36)))
    write("checkpoint", "v6_powersgd_bad_rank", fix + b"3\n" + sep + state_file(version=6, sum_kind=2, psgd=(0, 2, 36)))
    big_q = state_file(version=6, sum_kind=2, psgd=(1, 1, 100000))  # refused by its header: no need for the floats
    write("checkpoint", "v6_powersgd_big_q", fix + b"3\n" + sep + big_q[:len(state_file(version=6, sum_kind=2, psgd=(1, 1, 0)))])
    write("checkpoint", "v7_guard", fix + b"3\n" + sep + state_file(version=7, sum_kind=2, guard=(8, [[4.5, 4.4, 4.3], [1.5, 1.2, 1.1]])))
    write("checkpoint", "v7_guard_powersgd", fix + b"3\n" + sep + state_file(version=7, sum_kind=2, psgd=(1, 2, 36), guard=(2, [[4.5, 4.4], [1.0]])))
    write("checkpoint", "v7_guard_count_above_window", fix + b"3\n" + sep + state_file(version=7, sum_kind=2, guard=(2, [[4.5, 4.4], [1.0]]))
          .replace(struct.pack("<Q", 2) + struct.pack("<2d", 4.5, 4.4), struct.pack("<Q", 3) + struct.pack("<2d", 4.5, 4.4)))
    write("checkpoint", "v7_guard_nan", fix + b"3\n" + sep + state_file(version=7, sum_kind=2, guard=(4, [[4.5, float("nan")], []])))
    write("checkpoint", "v7_guard_window_0", fix + b"3\n" + sep + state_file(version=7, sum_kind=2, guard=(0, [[], []])))
    # broken
    write("checkpoint", "latest_not_a_number", fix + b"three\n" + sep + state_file())
    write("checkpoint", "latest_two_numbers", fix + b"3 4\n" + sep + state_file())
    write("checkpoint", "latest_overflow", fix + b"99999999999\n" + sep + state_file())
    write("checkpoint", "step_mismatch", fix + b"4\n" + sep + state_file(step=3))
    write("checkpoint", "old_version", fix + b"3\n" + sep + state_file(version=2))
    write("checkpoint", "truncated_state", fix + b"3\n" + sep + state_file()[:-4])
    write("checkpoint", "adam_t_above_step", fix + b"3\n" + sep + state_file(adam_t=9))
    write("checkpoint", "bad_fingerprint", fix + b"3\n" + sep + state_file(data=dl_state(0, 0, 8, 0)[:7] + [1]))
    write("checkpoint", "position_past_end", fix + b"3\n" + sep + state_file(data=dl_state(0, 0, 64, 0)))
    write("checkpoint", "epoch_cursor_mismatch", fix + b"3\n" + sep + state_file(data=dl_state(1, 20, 0, 0)))


# ---------------------------------------------------------------------------------------------------------------
# flags (fuzz/flags.c): arguments separated by NUL bytes

# multiple-choice eval files (fuzz/hellaswag.c): 3 bytes of settings (vocab - 1 as uint16, longest row - 1), then
# the file: 256 int32 header (20240522, 1, examples, longest example in bytes), then per example the uint16 stream
# 65535, bytes, index, label, endings, context length, context, then each ending's length and tokens
def hs_example(index, label, ctx, endings, n=None):
    s = [65535, 0, index, label, len(endings) if n is None else n, len(ctx)] + list(ctx)
    for e in endings:
        s += [len(e)] + list(e)
    s[1] = 2 * len(s)
    return s


def hs_file(examples, magic=20240522, version=1, count=None, longest=None):
    words = [w for ex in examples for w in ex]
    lo = max((2 * len(ex) for ex in examples), default=12) if longest is None else longest
    head = struct.pack("<256i", magic, version, len(examples) if count is None else count, lo, *([0] * 252))
    return head + struct.pack("<%dH" % len(words), *words)


def hs_config(vocab=101, max_row=16):
    return struct.pack("<HB", vocab - 1, max_row - 1)


def make_hellaswag_seeds():
    a = hs_example(0, 2, [5, 6, 7], [[8, 9], [10], [11, 12, 13], [14, 15]])
    b = hs_example(1, 1, [20], [[21, 22, 23, 24], [25, 26]])
    c = hs_example(2, 0, [30, 31], [[32], [33], [34, 35]])
    write("hellaswag", "three_examples", hs_config() + hs_file([a, b, c]))
    write("hellaswag", "gpt2_vocab", hs_config(50257, 64) + hs_file([hs_example(0, 3, [32, 582, 6296], [[50256], [13], [198, 11], [262, 3797, 13]])]))
    write("hellaswag", "bad_magic", hs_config() + hs_file([a], magic=20240520))
    write("hellaswag", "bad_version", hs_config() + hs_file([a], version=2))
    write("hellaswag", "truncated", hs_config() + hs_file([a, b])[:-4])
    write("hellaswag", "fewer_than_header", hs_config() + hs_file([a, b], count=3))
    write("hellaswag", "trailing_bytes", hs_config() + hs_file([a, b], count=1))
    write("hellaswag", "label_out_of_range", hs_config() + hs_file([hs_example(0, 4, [5], [[1], [2], [3], [4]])]))
    write("hellaswag", "zero_endings", hs_config() + hs_file([hs_example(0, 0, [5, 6], [])]))
    write("hellaswag", "row_too_long", hs_config(max_row=4) + hs_file([a]))
    write("hellaswag", "token_above_vocab", hs_config(vocab=10) + hs_file([a]))
    write("hellaswag", "longer_than_header_says", hs_config() + hs_file([a, b], longest=30))
    write("hellaswag", "short_header", hs_config() + hs_file([a])[:1000])


def make_flags_seeds():
    src = open(os.path.join(ROOT, "flags.h"), encoding="utf-8").read()
    names = re.findall(r'FLAG_[ISF]\("([a-z0-9-]+)",\s*(NULL|"-[a-z]+")', src)
    names += re.findall(r'\{\s*"([a-z0-9-]+)",\s*(NULL|"-[a-z]+"),\s*FLAG_', src)
    args = lambda *a: b"\0".join(x.encode() for x in a)
    write("flags", "typical", args("--model", "d4", "--train", "data/x/*_train_*.bin", "--batch-size", "4", "--seq-len", "64",
                                   "--steps", "100", "--lr", "6e-4", "--lr-schedule", "linear", "--warmup", "10"))
    write("flags", "llmc_aliases", args("-i", "train.bin", "-b", "8", "-t", "128", "-l", "1e-3", "-x", "5"))
    write("flags", "checkpoints", args("--train", "x", "--checkpoint-every", "10", "--out", "out/a", "--resume", "out/a"))
    write("flags", "help", args("--help"))
    write("flags", "bench", args("--bench", "1", "--model", "gpt2-124M", "--bench-steps", "2", "--zero", "2"))
    write("flags", "out_of_range", args("--lr", "1e400"))
    write("flags", "not_a_number", args("--batch-size", "12abc"))
    write("flags", "missing_value", args("--steps"))
    write("flags", "unknown_flag", args("--no-such-flag", "1"))
    write("flags", "twice", args("--seed", "1", "--seed", "2"))
    write("flags", "long_string", args("--model", "d" * 100))
    write("flags", "powersgd", args("--grad-compress", "powersgd:4", "--zero", "1", "--dtype", "bf16"))
    write("flags", "eval_hellaswag_no_seq_len", args("--eval-hellaswag", "3"))  # (seq_len 0: the model's context, later)
    write("flags", "outlier_guard", args("-sl", "5", "-sg", "5", "-k", "wsd", "--outlier-window", "64"))
    write("flags", "llmc_124M", args("-i", "t.bin", "-j", "v.bin", "-o", "log", "-v", "250", "-s", "20000", "-g", "144", "-h", "1",
                                     "-b", "64", "-t", "1024", "-d", "524288", "-r", "2", "-z", "1", "-c", "0.1", "-l", "0.0006",
                                     "-q", "0.0", "-u", "700", "-n", "5000", "-y", "1", "-e", "gpt2:d12", "-nk", "2", "-nm", "10000",
                                     "-f", "1", "-ge", "2", "-x", "-1", "-pi", "mpi"))
    with open(os.path.join(FUZZ, "flags.dict"), "w") as f:
        f.write("# libFuzzer dictionary for fuzz/flags.c (made by fuzz/make_seeds.py from the flag table in flags.h)\n")
        words = set()
        for name, alias in names:
            words.add("--" + name)
            if alias != "NULL":
                words.add(alias.strip('"'))
        words |= {"--help", "-h", "-r", "-f", "-ge", "-lg", "-w", "-pi", "-pn", "mpi", "gpt2:d", "gpt3:c", "cosine", "linear", "constant", "wsd", "stop", "skip", "d12", "gpt2-124M", "gpt3-2.7B", "bf16", "powersgd:",
                  "nan", "inf", "1e308", "-0", "0x10", "2147483648", "9223372036854775808", "\x00"}
        for w in sorted(words):
            f.write('"%s"\n' % w.replace("\\", "\\\\").replace('"', '\\"').replace("\x00", "\\x00"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpt2", default=os.path.join(ROOT, "..", "shared", "data", "gpt2"),
                    help="directory with GPT-2's encoder.json and vocab.bpe")
    a = ap.parse_args()
    corpus = os.path.join(FUZZ, "corpus")
    for t in OWN_TARGETS:  # other targets' seeds (fuzz/corpus/safetensors, ...) are made elsewhere: left alone
        if os.path.isdir(os.path.join(corpus, t)):
            shutil.rmtree(os.path.join(corpus, t))
    tokens, merges = load_gpt2(a.gpt2, 1024)
    make_shard_seeds()
    make_tokenizer_bin_seeds(tokens)
    make_vocab_seeds(tokens, merges)
    make_encode_vocab(tokens, merges)
    make_encode_seeds()
    make_model_seeds()
    make_checkpoint_seeds()
    make_llmc_state_seeds()
    make_flags_seeds()
    make_hellaswag_seeds()
    total = sum(os.path.getsize(os.path.join(corpus, t, f)) for t in OWN_TARGETS for f in os.listdir(os.path.join(corpus, t)))
    print("fuzz/make_seeds.py: wrote fuzz/corpus (%d KB), fuzz/vocab, fuzz/*.dict" % (total // 1024))


if __name__ == "__main__":
    main()
