#!/usr/bin/env python3
"""The bench-moe summary table: every `tandem-cli bench-moe --json` line of a JSON-lines file, next to
the PyTorch baseline (scripts/bench_moe_torch.py --json lines, impl "pytorch-bf16") of the same shape
and token count when the file holds one. A "variant" key (scripts/device-gpu-check.sh's MOE_VARIANTS)
names the environment settings of a row.

    python3 scripts/moe_table.py RESULTS.jsonl
"""
import json
import sys


def main(path):
    rows = [json.loads(l) for l in open(path) if l.startswith("{")]
    torch = {(j["shape"], j["tokens"]): j["seconds_per_layer"] for j in rows if j.get("impl") == "pytorch-bf16"}
    print(f"{'shape':17} {'type':4} {'variant':24} {'tokens':>6} {'isa':6} {'s/layer':>10} {'GB/s':>6} {'%bw':>4} {'TFLOP/s':>7} {'torch s':>8} {'speedup':>7}"
          f" {'gate/up':>7} {'down':>5}")
    for j in rows:
        if "impl" in j:
            continue
        t = torch.get((j["shape"], j["tokens"]))
        print(f"{j['shape']:17} {j['experts']:4} {j.get('variant', 'default')[:24]:24} {j['tokens']:6d} {j['isa']:6} {j['seconds_per_layer']:10.6f} {j['weights_gbps']:6.1f} "
              f"{100 * j['bandwidth_fraction']:4.0f} {j['tflops']:7.3f} {t if t else float('nan'):8.4f} "
              f"{t / j['seconds_per_layer'] if t else float('nan'):7.2f}"
              + (f" {100 * j['phases']['gate_up']:6.1f}% {100 * j['phases']['down']:4.1f}%" if "phases" in j else ""))


if __name__ == "__main__":
    main(sys.argv[1])
