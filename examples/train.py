"""A small transformer language model trained with torch, whose attention, layer norm and loss
softmax run as kernelc kernels (``examples/kernels/``), instrumented with ``profiler.scope``.

Each kernelc kernel is wrapped in a ``torch.autograd.Function``: the forward pass is the kernelc
kernel, the backward pass recomputes the same function with torch ops and differentiates that
(simple and exact; it is not meant to be fast).  Linear layers, GELU, the optimizer and the
embedding are plain torch (cuBLAS and torch kernels on a GPU).

    python examples/train.py                  # train (GPU: "small" model; CPU: "tiny" through the interpreter)
    python -m kprof examples/train.py         # the same under the profiler: writes kprof.hatchet
    kprof-viewer kprof.hatchet                # where the time went

The task is learnable (each next token is the current one plus one), so the loss falls quickly.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import profiler  # noqa: E402
from examples.kernels import attention as k_attention  # noqa: E402
from examples.kernels import layernorm as k_layernorm  # noqa: E402
from examples.kernels import softmax as k_softmax  # noqa: E402

SIZES = {
    # vocab, d_model, heads, layers, seq, batch
    "tiny": dict(vocab=64, d_model=32, heads=2, layers=2, seq=16, batch=2),
    "small": dict(vocab=8192, d_model=768, heads=12, layers=4, seq=1024, batch=8),
}


# -- kernelc kernels as autograd functions --------------------------------------------------------
class LayerNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        y, _, _ = k_layernorm.layer_norm(x.contiguous(), weight, bias, eps)
        ctx.save_for_backward(x, weight, bias)
        ctx.eps = eps
        return y

    @staticmethod
    def backward(ctx, grad):
        x, weight, bias = ctx.saved_tensors
        with torch.enable_grad():
            xr, wr, br = (t.detach().requires_grad_() for t in (x, weight, bias))
            y = F.layer_norm(xr, (x.shape[-1],), wr, br, ctx.eps)
            return (*torch.autograd.grad(y, (xr, wr, br), grad), None)


class AttentionFn(torch.autograd.Function):
    """Causal attention; q, k, v: [batch, heads, seq, head_dim]."""

    @staticmethod
    def forward(ctx, q, k, v):
        ctx.save_for_backward(q, k, v)
        if q.is_cuda:  # tensor cores: fp16 operands, fp32 accumulation inside the kernel
            o = k_attention.attention(q.half().contiguous(), k.half().contiguous(), v.half().contiguous(),
                                      causal=True)
            return o.to(q.dtype)
        return k_attention.attention(q.contiguous(), k.contiguous(), v.contiguous(), causal=True,
                                     BLOCK_M=16, BLOCK_N=16)

    @staticmethod
    def backward(ctx, grad):
        q, k, v = ctx.saved_tensors
        with torch.enable_grad():
            qr, kr, vr = (t.detach().requires_grad_() for t in (q, k, v))
            o = F.scaled_dot_product_attention(qr, kr, vr, is_causal=True)
            return torch.autograd.grad(o, (qr, kr, vr), grad)


class SoftmaxFn(torch.autograd.Function):
    """Row softmax of a 2-D tensor."""

    @staticmethod
    def forward(ctx, x):
        y = k_softmax.softmax(x.contiguous())
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        y, = ctx.saved_tensors
        return y * (grad - (grad * y).sum(dim=-1, keepdim=True))


# -- the model -------------------------------------------------------------------------------------
class LayerNorm(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))
        self.bias = torch.nn.Parameter(torch.zeros(d))

    def forward(self, x):
        with profiler.scope("layernorm"):
            return LayerNormFn.apply(x, self.weight, self.bias, 1e-5)


class Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = LayerNorm(d), LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.fc1 = torch.nn.Linear(d, 4 * d)
        self.fc2 = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, D = x.shape
        H, hd = self.heads, D // self.heads
        with profiler.scope("attn", metrics={"flops": 2 * 2 * B * H * T * T * hd // 2}):  # causal: half of QK^T and PV
            h = self.ln1(x)
            q, k, v = self.qkv(h).view(B, T, 3, H, hd).permute(2, 0, 3, 1, 4)
            o = AttentionFn.apply(q, k, v)
            x = x + self.proj(o.transpose(1, 2).reshape(B, T, D))
        with profiler.scope("mlp", metrics={"flops": 2 * 2 * B * T * D * 4 * D}):
            x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x


class TinyGPT(torch.nn.Module):
    def __init__(self, vocab, d_model, heads, layers, seq):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d_model)
        self.pos = torch.nn.Parameter(torch.randn(seq, d_model) * 0.02)
        self.blocks = torch.nn.ModuleList(Block(d_model, heads) for _ in range(layers))
        self.ln_f = LayerNorm(d_model)
        self.head = torch.nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos[: idx.shape[1]]
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln_f(x))
        with profiler.scope("loss"):
            probs = SoftmaxFn.apply(logits.reshape(-1, logits.shape[-1]))
            return -probs.gather(1, targets.reshape(-1, 1)).clamp_min(1e-12).log().mean()


def batch(cfg, gen, device):
    start = torch.randint(0, cfg["vocab"], (cfg["batch"], 1), generator=gen)
    seq = (start + torch.arange(cfg["seq"] + 1)) % cfg["vocab"]
    return seq[:, :-1].to(device), seq[:, 1:].to(device)


class Trainer:
    """The model, its optimizer and the batch generator; :meth:`step` runs one training step and
    returns the loss as a device tensor (no host sync).  bench/profiler_overhead_ab.py times blocks of
    these steps with and without a profiler in one process."""

    def __init__(self, cfg: dict, device: str):
        torch.manual_seed(0)
        if device.startswith("cuda"):
            torch.backends.cuda.matmul.allow_tf32 = True
        self.cfg, self.device = cfg, device
        self.gen = torch.Generator().manual_seed(0)
        self.model = TinyGPT(cfg["vocab"], cfg["d_model"], cfg["heads"], cfg["layers"], cfg["seq"]).to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-3)
        self.n_params = sum(p.numel() for p in self.model.parameters())

    def step(self) -> torch.Tensor:
        idx, tgt = batch(self.cfg, self.gen, self.device)
        with profiler.scope("train_step"):
            with profiler.scope("forward"):
                loss = self.model(idx, tgt)
            with profiler.scope("backward"):
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
            with profiler.scope("optimizer"):
                self.opt.step()
        return loss.detach()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), default=None, help="model size (default: small on a GPU, tiny on CPU)")
    ap.add_argument("--steps", type=int, default=None, help="training steps (default: 30 on a GPU, 6 on CPU)")
    ap.add_argument("--warmup", type=int, default=None, help="steps left out of the reported time (default: 5 GPU, 1 CPU)")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--json", default=None, help="write {'step_ms': ..., 'loss': ...} to this file")
    args = ap.parse_args(argv)

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    gpu = device.startswith("cuda")
    cfg = SIZES[args.size or ("small" if gpu else "tiny")]
    steps = args.steps if args.steps is not None else (30 if gpu else 6)
    warmup = min(args.warmup if args.warmup is not None else (5 if gpu else 1), max(steps - 1, 0))
    trainer = Trainer(cfg, device)
    print(f"train: {trainer.n_params / 1e6:.2f}M parameters, {cfg}, {steps} steps on "
          f"{torch.cuda.get_device_name() if gpu else 'CPU (kernelc interpreter)'}", flush=True)

    losses = []
    t0 = None
    for step in range(steps):
        if step == warmup:
            if gpu:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        losses.append(trainer.step())   # no .item() here: it would wait for the GPU every step
    if gpu:
        torch.cuda.synchronize()
    losses = [x.item() for x in losses]
    timed = steps - warmup
    step_ms = (time.perf_counter() - t0) * 1e3 / timed if t0 is not None and timed > 0 else float("nan")
    print(f"train: loss {losses[0]:.3f} -> {losses[-1]:.3f}; {step_ms:.2f} ms/step over the last {timed} steps",
          flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"step_ms": step_ms, "steps": steps, "warmup": warmup, "losses": losses,
                       "size": args.size or ("small" if gpu else "tiny"), "device": device}, f)
    ok = all(math.isfinite(x) for x in losses)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
