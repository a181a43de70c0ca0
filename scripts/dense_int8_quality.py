#!/usr/bin/env python3
"""Int8 (or int4) dense weights against the checkpoint's on the fixtures (issue 25): each fixture's golden
prompts (`chat`, `long`) teacher-forced with their golden tokens through `tandem-cli eval --device cpu`, once
with `--dense checkpoint` and once with `--dense int8` (or `--dense int4`), every logits row compared:
KL(checkpoint || quantized) of the softmax, top-1 agreement, relative L2. Needs numpy and safetensors.

    python3 scripts/dense_int8_quality.py --cli build/app/tandem-cli [--dense int8|int4] [--fixtures tests/fixtures]
"""
import argparse
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

FIXTURES = ["tiny-qwen3moe", "tiny-deepseekv2", "tiny-mixtral", "tiny-deepseekv3-fp8", "tiny-deepseekv3-fp8-edge"]


def logits(cli, model, prompt, forced, dense, threads, work):
    """Rows [prompt positions + forced tokens - 1, V] (eval writes the last prompt row twice)."""
    ids, force, out = work / "prompt.txt", work / "forced.txt", work / "logits.bin"
    ids.write_text(" ".join(map(str, prompt)) + "\n")
    force.write_text(" ".join(map(str, forced)) + "\n")
    subprocess.run([cli, "eval", "--model", str(model), "--ids-file", str(ids), "--forced-ids", str(force),
                    "--new-tokens", str(len(forced)), "--logits-out", str(out), "--dense", dense, "--device", "cpu",
                    "--threads", str(threads)], check=True, capture_output=True, text=True)
    rows = np.fromfile(out, dtype=np.float32).reshape(len(prompt) + len(forced), -1).astype(np.float64)
    t = len(prompt)
    return np.concatenate([rows[:t], rows[t + 1:]])


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--fixtures", default="tests/fixtures")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dense", default="int8", choices=["int8", "int4"])
    args = ap.parse_args()
    print(f'{"fixture":26} {"rows":>5} {"mean KL":>9} {"median KL":>9} {"max KL":>9} {"top-1":>6} {"median rel L2":>13}')
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in FIXTURES:
            model = Path(args.fixtures) / name
            golden = load_file(str(model / "golden.safetensors"))
            kl, agree, rel = [], [], []
            for p in ("chat", "long"):
                prompt, forced = golden[f"{p}.prompt_ids"].tolist(), golden[f"{p}.gen_ids"].tolist()
                a = logits(args.cli, model, prompt, forced, "checkpoint", args.threads, work)
                b = logits(args.cli, model, prompt, forced, args.dense, args.threads, work)
                la, lb = log_softmax(a), log_softmax(b)
                kl.append((np.exp(la) * (la - lb)).sum(-1))
                agree.append(a.argmax(-1) == b.argmax(-1))
                rel.append(np.linalg.norm(a - b, axis=-1) / np.linalg.norm(a, axis=-1))
            kl, agree, rel = np.concatenate(kl), np.concatenate(agree), np.concatenate(rel)
            print(f"{name:26} {len(kl):5d} {kl.mean():9.2e} {np.median(kl):9.2e} {kl.max():9.2e} {100 * agree.mean():5.1f}% "
                  f"{np.median(rel):13.2e}")


if __name__ == "__main__":
    main()
