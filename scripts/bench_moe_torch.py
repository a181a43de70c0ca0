#!/usr/bin/env python3
"""The PyTorch baseline for `tandem-cli bench-moe` prefill: one MoE layer of a real model's shape in
bfloat16 on the CPU, written the usual way (group the tokens of each expert, matmul gate+up, SiLU,
matmul down, scatter-add with the routing weight), with random weights and routing, timed the same way
(median seconds per layer over fresh routings). Run in the same command as bench-moe so the two share
the machine's state.

    python3 scripts/bench_moe_torch.py --shape deepseek-v3 --tokens 512,4096 --threads 16 --json
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

SHAPES = {  # hidden, intermediate, experts, experts per token
    "deepseek-v3": (7168, 2048, 256, 8),
    "qwen3-30b-a3b": (2048, 768, 128, 8),
    "deepseek-v2-lite": (2048, 1408, 64, 6),
}


def moe_layer(x, ids, weights, gate_up, down, experts):
    """out[t] = sum_j weights[t, j] * down_e(silu(gate_e x[t]) * up_e x[t]), e = ids[t, j]."""
    top_k = ids.shape[1]
    out = torch.zeros_like(x)
    flat = ids.flatten()
    order = flat.argsort()
    counts = torch.bincount(flat, minlength=experts).tolist()
    token_of = order // top_k
    weight_of = weights.flatten()[order]
    start = 0
    for e, n in enumerate(counts):
        if n == 0:
            continue
        tokens = token_of[start:start + n]
        g, u = (x[tokens] @ gate_up[e].T).chunk(2, dim=-1)
        y = (F.silu(g) * u) @ down[e].T
        out.index_add_(0, tokens, y * weight_of[start:start + n, None].to(y.dtype))
        start += n
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", required=True, choices=sorted(SHAPES))
    p.add_argument("--tokens", default="512", help="comma-separated token counts")
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--seconds", type=float, default=2.0, help="measuring time per token count")
    p.add_argument("--experts-in-memory", type=int, default=0,
                   help="distinct weight copies (expert e uses copy e %% N); 0: one per expert")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    hidden, inter, experts, top_k = SHAPES[a.shape]
    copies = a.experts_in_memory or experts
    bf16 = torch.bfloat16
    gate_up_copies = [torch.empty(2 * inter, hidden, dtype=bf16).uniform_(-0.05, 0.05) for _ in range(copies)]
    down_copies = [torch.empty(hidden, inter, dtype=bf16).uniform_(-0.05, 0.05) for _ in range(copies)]
    gate_up = [gate_up_copies[e % copies] for e in range(experts)]
    down = [down_copies[e % copies] for e in range(experts)]

    for tokens in [int(t) for t in a.tokens.split(",")]:
        x = torch.empty(tokens, hidden, dtype=bf16).uniform_(-1, 1)
        times = []
        start = time.perf_counter()
        it = -2  # two warm-ups
        with torch.inference_mode():
            while True:
                ids = torch.rand(tokens, experts).topk(top_k, dim=1).indices
                w = torch.rand(tokens, top_k)
                w = w / w.sum(dim=1, keepdim=True)
                t0 = time.perf_counter()
                moe_layer(x, ids, w, gate_up, down, experts)
                dt = time.perf_counter() - t0
                if it >= 0:
                    times.append(dt)
                it += 1
                if it >= 3 and time.perf_counter() - start > a.seconds:
                    break
        seconds = statistics.median(times)
        flops = 6.0 * hidden * inter * tokens * top_k
        result = {"impl": "pytorch-bf16", "torch": torch.__version__, "shape": a.shape, "tokens": tokens,
                  "threads": a.threads, "iterations": len(times), "seconds_per_layer": seconds,
                  "tflops": flops / seconds / 1e12}
        if a.json:
            print(json.dumps(result), flush=True)
        else:
            print(f"pytorch bf16 {a.shape} tokens {tokens}: {seconds:.6f} s/layer, {result['tflops']:.3f} TFLOP/s", flush=True)


if __name__ == "__main__":
    main()
