#!/usr/bin/python3
"""
Generate the reference files that the C tests compare against.

Regenerate with (Debian's PyTorch lives under /usr/bin/python3):
    /usr/bin/python3 scripts/make_reference.py --out tests/ref

A tiny GPT-2 (same architecture as llm.c's train_gpt2.py) is written by hand
in float32 torch. Default config: maxT=16, V=101 (padded Vp=128), L=2, NH=4,
C=32; batch B=2, T=8 (T < maxT on purpose); seed 1337.

Init: weights ~ N(0, 0.02), attprojw/fcprojw scaled by 1/sqrt(2L); then, so
that every gradient is non-trivial, LayerNorm weights = 1 + 0.1*randn and
LayerNorm/linear biases = 0.02*randn. Tokens: B*T+1 random ids in [0,V);
x = first B*T as (B,T), y = x shifted by one.

Files (all little-endian):
  ref_model.bin   llm.c model file v3 (fp32). 256 int32 header:
                  [0]=20240326 [1]=3 [2]=maxT [3]=V [4]=L [5]=NH [6]=C [7]=Vp,
                  rest 0; then float32 params in llm.c order:
                  wte (Vp,C) (rows V..Vp-1 zero), wpe (maxT,C), ln1w (L,C),
                  ln1b (L,C), qkvw (L,3C,C), qkvb (L,3C), attprojw (L,C,C),
                  attprojb (L,C), ln2w (L,C), ln2b (L,C), fcw (L,4C,C),
                  fcb (L,4C), fcprojw (L,C,4C), fcprojb (L,C), lnfw (C), lnfb (C).
  ref_state.bin   llm.c debug state. 256 int32 header:
                  [0]=20240327 [1]=2 [2]=B [3]=T, rest 0; then x int32 (B*T),
                  y int32 (B*T), logits float32 (B,T,V) (unpadded V), loss
                  float32, then grads of all params (same order/shapes as the
                  model file; wte grad has Vp rows, padded rows zero).
                  This is one forward/backward at the initial parameters.
  ref_trajectory.txt  10 AdamW steps on the same (x,y): lr 1e-3 (--lr), betas
                  (0.9,0.95), eps 1e-8, weight decay 0.1 on wte, wpe, qkvw,
                  attprojw, fcw, fcprojw only; clip_grad_norm_(params, 1.0) semantics
                  with the global norm summed in float64
                  before each update. One line per step: "step loss grad_norm"
                  (loss before the update, grad_norm before clipping), '%.9g'.
  ref_sched_trajectory.txt  from the same initial parameters and batch, 12 steps
                  with the trainer's schedule: peak lr 3e-3 (--sched-lr), linear
                  warmup over 3 steps (lr * (step+1) / 3), then cosine decay to
                  0.1 * peak at the last step (ratio (step-3)/(12-3)), strong
                  weight decay 0.5 on the same tensors, clipping at 1.0. One line
                  per step: "step loss lr grad_norm", '%.9g'.
  ref_sched_params.bin  the parameters after the last of those steps, as an
                  llm.c model file (same header as ref_model.bin).
  hf*/            the parameters of ref_model.bin as Hugging Face GPT-2
                  checkpoints (tests/test_hf.c loads them), each with its
                  config.json; safetensors written by hand (json + struct; the
                  safetensors package is not needed). HF's layout: wte (V, C)
                  without the padded rows, Conv1D weights (c_attn, c_proj,
                  c_fc, mlp.c_proj) transposed to (in, out), 1-D vectors.
      hf/         model.safetensors, F32, "transformer."-prefixed names as
                  save_pretrained writes them, plus lm_head.weight (= wte) and
                  the causal-mask buffers h.N.attn.bias (BOOL (1,1,maxT,maxT))
      hf_fp16/    the same in F16 (lm_head.weight too)
      hf_noprefix/  the hub's original GPT-2 layout: names without the prefix,
                  h.N.attn.bias F32 and h.N.attn.masked_bias (a scalar); BF16
      hf_sharded/ F32 in two shards (model-0000K-of-00002.safetensors) listed
                  by model.safetensors.index.json
  With --hf-only only the hf*/ folders are written, from the parameters of
  the existing <out>/ref_model.bin (the other files stay as they are).
"""
import argparse
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

PARAM_NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
               "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
DECAYED = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}


def init_params(a):
    maxT, V, Vp, L, NH, C = a.maxT, a.V, a.Vp, a.L, a.NH, a.C
    n = lambda *s: torch.randn(*s)
    std, pstd = 0.02, 0.02 / math.sqrt(2 * L)
    p = {}
    p["wte"] = n(Vp, C) * std
    p["wte"][V:] = 0.0  # padded vocab rows: always zero
    p["wpe"] = n(maxT, C) * std
    p["ln1w"] = 1 + 0.1 * n(L, C)
    p["ln1b"] = 0.02 * n(L, C)
    p["qkvw"] = n(L, 3 * C, C) * std
    p["qkvb"] = 0.02 * n(L, 3 * C)
    p["attprojw"] = n(L, C, C) * pstd
    p["attprojb"] = 0.02 * n(L, C)
    p["ln2w"] = 1 + 0.1 * n(L, C)
    p["ln2b"] = 0.02 * n(L, C)
    p["fcw"] = n(L, 4 * C, C) * std
    p["fcb"] = 0.02 * n(L, 4 * C)
    p["fcprojw"] = n(L, C, 4 * C) * pstd
    p["fcprojb"] = 0.02 * n(L, C)
    p["lnfw"] = 1 + 0.1 * n(C)
    p["lnfb"] = 0.02 * n(C)
    return {k: v.float().contiguous().requires_grad_(True) for k, v in p.items()}


def forward(p, x, y, a):
    B, T = x.shape
    C, NH, V = a.C, a.NH, a.V
    hs = C // NH
    ln = lambda t, w, b: F.layer_norm(t, (C,), w, b, eps=1e-5)
    h = p["wte"][x] + p["wpe"][:T]                        # (B,T,C)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(a.L):
        # attention
        qkv = ln(h, p["ln1w"][l], p["ln1b"][l]) @ p["qkvw"][l].T + p["qkvb"][l]
        q, k, v = qkv.split(C, dim=2)
        q, k, v = (t.view(B, T, NH, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        o = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        h = h + o @ p["attprojw"][l].T + p["attprojb"][l]
        # MLP
        m = ln(h, p["ln2w"][l], p["ln2b"][l]) @ p["fcw"][l].T + p["fcb"][l]
        m = F.gelu(m, approximate="tanh")
        h = h + m @ p["fcprojw"][l].T + p["fcprojb"][l]
    h = ln(h, p["lnfw"], p["lnfb"])
    logits = h @ p["wte"][:V].T                           # tied LM head, unpadded V
    loss = F.cross_entropy(logits.view(-1, V), y.view(-1))
    return logits, loss


def clipped_step(opt, p, params, x, y, a):
    """One AdamW step on (x, y) with global-norm clipping at 1.0; returns (loss before the step, norm before clipping).
    clip_grad_norm_'s semantics (scale by max_norm / (norm + 1e-6) when below 1), with the norm summed in float64:
    torch 1.13's float32 torch.norm loses ~1% on tensors of tens of millions of elements (measured on GPT-2 124M's
    wte gradient), which would make the reference, not the trainer, wrong at that size."""
    opt.zero_grad(set_to_none=True)
    _, loss = forward(p, x, y, a)
    loss.backward()
    norm = torch.sqrt(sum((t.grad.double() ** 2).sum() for t in params))
    coef = 1.0 / (norm.item() + 1e-6)
    if coef < 1.0:
        for t in params:
            t.grad.mul_(coef)
    opt.step()
    return loss, norm


def header(vals):
    hdr = np.zeros(256, dtype="<i4")
    hdr[:len(vals)] = vals
    return hdr.tobytes()


def f32(t):
    return t.detach().cpu().numpy().astype("<f4").tobytes()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="tests/ref")
    ap.add_argument("--maxT", type=int, default=16)
    ap.add_argument("--V", type=int, default=101)
    ap.add_argument("--Vp", type=int, default=128)
    ap.add_argument("--L", type=int, default=2)
    ap.add_argument("--NH", type=int, default=4)
    ap.add_argument("--C", type=int, default=32)
    ap.add_argument("--B", type=int, default=2)
    ap.add_argument("--T", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate of the trajectory (test_gpt --traj-lr)")
    ap.add_argument("--sched-lr", type=float, default=3e-3, help="peak learning rate of the scheduled trajectory")
    ap.add_argument("--hf-only", action="store_true",
                    help="write only the hf*/ folders, from the parameters of the existing <out>/ref_model.bin")
    a = ap.parse_args()
    assert a.C % a.NH == 0 and a.T <= a.maxT and a.V <= a.Vp
    if a.hf_only:
        write_hf(read_model_file(os.path.join(a.out, "ref_model.bin"), a), a)
        return

    torch.manual_seed(a.seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    os.makedirs(a.out, exist_ok=True)

    p = init_params(a)
    tok = torch.randint(0, a.V, (a.B * a.T + 1,))
    x = tok[:-1].view(a.B, a.T)
    y = tok[1:].view(a.B, a.T)
    params = [p[k] for k in PARAM_NAMES]

    # 1. model file
    model_path = os.path.join(a.out, "ref_model.bin")
    with open(model_path, "wb") as f:
        f.write(header([20240326, 3, a.maxT, a.V, a.L, a.NH, a.C, a.Vp]))
        for t in params:
            f.write(f32(t))

    # 2. debug state: one forward/backward at the initial parameters
    logits, loss = forward(p, x, y, a)
    loss.backward()
    state_path = os.path.join(a.out, "ref_state.bin")
    with open(state_path, "wb") as f:
        f.write(header([20240327, 2, a.B, a.T]))
        f.write(x.numpy().astype("<i4").tobytes())
        f.write(y.numpy().astype("<i4").tobytes())
        f.write(f32(logits))
        f.write(np.array([loss.item()], dtype="<f4").tobytes())
        for t in params:
            f.write(f32(t.grad))
    for k in PARAM_NAMES:
        assert p[k].grad.abs().max() > 0, f"zero gradient for {k}"
    for t in params:
        t.grad = None

    # 3. training trajectory
    opt = torch.optim.AdamW(
        [{"params": [p[k] for k in PARAM_NAMES if k in DECAYED], "weight_decay": 0.1},
         {"params": [p[k] for k in PARAM_NAMES if k not in DECAYED], "weight_decay": 0.0}],
        lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    lines = []
    for step in range(a.steps):
        loss, norm = clipped_step(opt, p, params, x, y, a)
        lines.append("%d %.9g %.9g" % (step, loss.item(), norm.item()))
    assert (p["wte"][a.V:] == 0).all()
    traj_path = os.path.join(a.out, "ref_trajectory.txt")
    with open(traj_path, "w") as f:
        f.write("\n".join(lines) + "\n")

    # 4. scheduled trajectory: warmup, cosine decay, strong weight decay, from the initial parameters again
    q = {k: v.detach().clone().requires_grad_(True) for k, v in init_params_again(a).items()}
    qparams = [q[k] for k in PARAM_NAMES]
    steps, warmup, final_frac, wd = 12, 3, 0.1, 0.5
    opt = torch.optim.AdamW(
        [{"params": [q[k] for k in PARAM_NAMES if k in DECAYED], "weight_decay": wd},
         {"params": [q[k] for k in PARAM_NAMES if k not in DECAYED], "weight_decay": 0.0}],
        lr=a.sched_lr, betas=(0.9, 0.95), eps=1e-8)
    sched_lines = []
    for step in range(steps):
        if step < warmup:
            lr = a.sched_lr * (step + 1) / warmup
        else:
            ratio = (step - warmup) / (steps - warmup)
            lr_min = a.sched_lr * final_frac
            lr = lr_min + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (a.sched_lr - lr_min)
        for g in opt.param_groups:
            g["lr"] = lr
        loss, norm = clipped_step(opt, q, qparams, x, y, a)
        sched_lines.append("%d %.9g %.9g %.9g" % (step, loss.item(), lr, norm.item()))
    with open(os.path.join(a.out, "ref_sched_trajectory.txt"), "w") as f:
        f.write("\n".join(sched_lines) + "\n")
    with open(os.path.join(a.out, "ref_sched_params.bin"), "wb") as f:
        f.write(header([20240326, 3, a.maxT, a.V, a.L, a.NH, a.C, a.Vp]))
        for t in qparams:
            f.write(f32(t))

    # summary + sanity checks
    nparams = sum(t.numel() for t in params)
    BT = a.B * a.T
    exp_model = 256 * 4 + 4 * nparams
    exp_state = 256 * 4 + 4 * (2 * BT + BT * a.V + 1 + nparams)
    for path, exp in ((model_path, exp_model), (state_path, exp_state)):
        size = os.path.getsize(path)
        print(f"{path}: {size} bytes (expected {exp})")
        assert size == exp
    print(f"{traj_path}: {os.path.getsize(traj_path)} bytes")
    # round-trip the model file
    with open(model_path, "rb") as f:
        hdr = np.frombuffer(f.read(1024), dtype="<i4")
        flat = np.frombuffer(f.read(), dtype="<f4")
    assert list(hdr[:8]) == [20240326, 3, a.maxT, a.V, a.L, a.NH, a.C, a.Vp]
    init = init_params_again(a)
    assert np.array_equal(flat, np.concatenate([init[k].numpy().ravel() for k in PARAM_NAMES]))
    print(f"model round-trip OK ({nparams} params)")
    write_hf(read_model_file(model_path, a), a)
    print(f"config: maxT={a.maxT} V={a.V} Vp={a.Vp} L={a.L} NH={a.NH} C={a.C} B={a.B} T={a.T} seed={a.seed}")
    print("trajectory (step loss grad_norm):")
    print("\n".join(lines))


# ----------------------------------------------------------------------------
# Hugging Face layout (safetensors + config.json)

HF_LAYER = [("ln1w", "ln_1.weight", False), ("ln1b", "ln_1.bias", False),
            ("qkvw", "attn.c_attn.weight", True), ("qkvb", "attn.c_attn.bias", False),
            ("attprojw", "attn.c_proj.weight", True), ("attprojb", "attn.c_proj.bias", False),
            ("ln2w", "ln_2.weight", False), ("ln2b", "ln_2.bias", False),
            ("fcw", "mlp.c_fc.weight", True), ("fcb", "mlp.c_fc.bias", False),
            ("fcprojw", "mlp.c_proj.weight", True), ("fcprojb", "mlp.c_proj.bias", False)]


def hf_state_dict(p, a):
    """GPT2Model's state dict (names without "transformer.") from our parameters, as float32 torch tensors."""
    sd = {"wte.weight": p["wte"][:a.V], "wpe.weight": p["wpe"]}
    for l in range(a.L):
        for ours, hf, transposed in HF_LAYER:
            t = p[ours][l]
            sd["h.%d.%s" % (l, hf)] = t.t() if transposed else t  # Conv1D: (in, out)
    sd["ln_f.weight"] = p["lnfw"]
    sd["ln_f.bias"] = p["lnfb"]
    return {k: v.detach().float().contiguous() for k, v in sd.items()}


def tensor_bytes(t, dtype):
    """(safetensors dtype name, little-endian bytes) of a torch tensor converted to dtype."""
    if dtype == "F32":
        return "F32", t.float().numpy().astype("<f4").tobytes()
    if dtype == "F16":
        return "F16", t.half().numpy().astype("<f2").tobytes()
    if dtype == "BF16":
        return "BF16", t.bfloat16().view(torch.int16).numpy().astype("<i2").tobytes()
    if dtype == "BOOL":
        return "BOOL", t.bool().numpy().astype(np.uint8).tobytes()
    raise ValueError(dtype)


def write_safetensors(path, tensors):
    """tensors: list of (name, torch tensor, dtype). Header padded with spaces to 8 bytes, as the library does."""
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t, dtype in tensors:
        dt, b = tensor_bytes(t, dtype)
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def hf_config(a):
    return {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
            "embd_pdrop": 0.1, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
            "n_ctx": a.maxT, "n_embd": a.C, "n_head": a.NH, "n_inner": None, "n_layer": a.L, "n_positions": a.maxT,
            "resid_pdrop": 0.1, "tie_word_embeddings": True, "vocab_size": a.V}


def write_hf(p, a):
    """Writes the hf*/ folders (see the top of this file) from parameters p."""
    sd = hf_state_dict(p, a)
    mask = torch.tril(torch.ones(a.maxT, a.maxT)).view(1, 1, a.maxT, a.maxT)
    variants = {
        "hf": ("transformer.", "F32", "BOOL", False),
        "hf_fp16": ("transformer.", "F16", None, False),
        "hf_noprefix": ("", "BF16", "F32", True),
        "hf_sharded": ("transformer.", "F32", None, False),
    }
    for folder, (prefix, dtype, mask_dtype, masked_bias) in variants.items():
        d = os.path.join(a.out, folder)
        os.makedirs(d, exist_ok=True)
        tensors = [(prefix + k, v, dtype) for k, v in sd.items()]
        if mask_dtype:
            for l in range(a.L):
                tensors.append(("%sh.%d.attn.bias" % (prefix, l), mask, mask_dtype))
                if masked_bias:
                    tensors.append(("%sh.%d.attn.masked_bias" % (prefix, l), torch.tensor(-1e4), "F32"))
        if folder != "hf_noprefix":
            tensors.append(("lm_head.weight", sd["wte.weight"], dtype))  # tied: equal to wte
        if folder == "hf_sharded":
            half = len(tensors) // 2
            shards = [tensors[:half], tensors[half:]]
            weight_map = {}
            for i, part in enumerate(shards):
                fn = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
                write_safetensors(os.path.join(d, fn), part)
                weight_map.update({name: fn for name, _, _ in part})
            total = sum(t.numel() * 4 for _, t, _ in tensors)
            with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
                json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
                f.write("\n")
        else:
            write_safetensors(os.path.join(d, "model.safetensors"), tensors)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(hf_config(a), f, indent=2)
            f.write("\n")
        print(f"{d}: {sorted(os.listdir(d))}")


def read_model_file(path, a):
    """The parameters of an llm.c fp32 model file with this script's shape, as torch tensors by name."""
    with open(path, "rb") as f:
        hdr = np.frombuffer(f.read(1024), dtype="<i4")
        flat = np.frombuffer(f.read(), dtype="<f4")
    assert list(hdr[:8]) == [20240326, 3, a.maxT, a.V, a.L, a.NH, a.C, a.Vp], f"{path}: header {list(hdr[:8])} does not match the arguments"
    L, C, maxT, Vp = a.L, a.C, a.maxT, a.Vp
    shapes = {"wte": (Vp, C), "wpe": (maxT, C), "ln1w": (L, C), "ln1b": (L, C), "qkvw": (L, 3 * C, C), "qkvb": (L, 3 * C),
              "attprojw": (L, C, C), "attprojb": (L, C), "ln2w": (L, C), "ln2b": (L, C), "fcw": (L, 4 * C, C),
              "fcb": (L, 4 * C), "fcprojw": (L, C, 4 * C), "fcprojb": (L, C), "lnfw": (C,), "lnfb": (C,)}
    p, off = {}, 0
    for k in PARAM_NAMES:
        n = int(np.prod(shapes[k]))
        p[k] = torch.from_numpy(flat[off:off + n].copy()).view(*shapes[k])
        off += n
    assert off == flat.size, f"{path}: {flat.size} floats, expected {off}"
    return p


def init_params_again(a):
    """Re-create the initial parameters from the seed (for the round-trip check)."""
    torch.manual_seed(a.seed)
    return {k: v.detach() for k, v in init_params(a).items()}


if __name__ == "__main__":
    main()
