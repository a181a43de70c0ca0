#!/usr/bin/env python3
"""The 8-bit KV cache's quality (issue 28): teacher-forced logits with `--kv-cache int8` against the float32
cache's, on the CPU path (or, with --device gpu, the GPU's: its 8-bit cache has the CPU's codes). Each model runs one long prompt (--tokens, each length capped at what the model
holds) and then --steps decode steps fed fixed ids, with `tandem-cli eval` twice (f32, int8); every row (the
prompt's, then each step's at its depth) is compared: relative L2 per row (worst, median), top-1 agreement
and the KL divergence KL(p_f32 || p_int8) of the softmaxed rows (median, worst), for all rows and for the
decode steps alone (the rows that attend to the whole cache).

    python3 scripts/check_kv_cache.py --cli build/app/tandem-cli --fixtures tests/fixtures \\
        --model resources/models/pocket-dictionary --tokens 2048,8192

Fixtures get seeded random ids (as check_long_context.py). A model with a ChatML template (--model; the
Pocket Dictionary) gets a real conversation instead: one "What does WORD mean?" after another, each answer
the model's own greedy answer with the float32 cache, up to the length. Fixtures whose experts the
automatic choice runs on integer kernels run with bf16 or the reference experts (check_golden.py's rule).
--bound-median/--bound-top1: exit 1 when a model's median relative L2 or top-1 agreement is past them.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_golden import find_fixtures, rel_l2  # noqa: E402

WORDS = ("serendipity river leather ephemeral house ubiquitous bread eloquent window resilient garden meticulous "
         "music benevolent candle candid doctor diligent mountain empathy winter nostalgia paper paradox horse "
         "quintessential silver sublime teacher tenacious island whimsical money zealous kitchen ambiguous letter "
         "cacophony forest enigma bottle euphoria language gregarious market hubris shadow juxtaposition engine "
         "labyrinth friend melancholy table nefarious season oblivion hammer panacea ocean quixotic village "
         "reverie mirror solitude harvest tranquil bridge vicarious thunder wanderlust blanket zenith cattle "
         "altruism ladder catharsis garment dichotomy prison epiphany velvet").split()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("fixture", nargs="*", help="fixture folders")
    p.add_argument("--fixtures", action="append", default=[], help="a folder of fixtures (every one holding a golden)")
    p.add_argument("--model", action="append", default=[], help="a model with a ChatML template: a real conversation")
    p.add_argument("--cli", required=True)
    p.add_argument("--tokens", default="2048,8192", help="prompt lengths, comma-separated")
    p.add_argument("--steps", type=int, default=32, help="decode steps after the prompt")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bound-median", type=float, default=None, help="fail past this median relative L2")
    p.add_argument("--bound-top1", type=float, default=None, help="fail below this top-1 agreement")
    p.add_argument("--json", help="write the figures here too")
    p.add_argument("--device", default="cpu", choices=["cpu", "gpu"], help="the path both runs take (default cpu)")
    return p.parse_args()


def experts_for(config):
    method = (config.get("quantization_config") or {}).get("quant_method")
    return {"mxfp4": ["--experts", "bf16"], "compressed-tensors": ["--experts", "reference"]}.get(method, [])


def write_ids(path, ids):
    with open(path, "w") as f:
        f.write(" ".join(map(str, ids)))


DEVICE = "cpu"


def run(cli, model, ids, forced, new_tokens, extra, tmp, tag, device=None):
    ids_path, forced_path = os.path.join(tmp, "ids.txt"), os.path.join(tmp, "forced.txt")
    out_path = os.path.join(tmp, f"logits-{tag}.bin")
    write_ids(ids_path, ids)
    cmd = [cli, "eval", "--model", model, "--ids-file", ids_path, "--logits-out", out_path, "--device", device or DEVICE,
           "--no-verify", "--new-tokens", str(new_tokens)] + extra
    if forced:
        write_ids(forced_path, forced)
        cmd += ["--forced-ids", forced_path]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f'{" ".join(cmd)} failed: {done.stderr.strip()[-400:]}')
    return out_path, [int(t) for t in done.stdout.split()]


def tokenize(cli, model, text):
    done = subprocess.run([cli, "tokenize", "--model", model], input=text, capture_output=True, text=True, check=True)
    return [int(t) for t in done.stdout.split()]


def conversation(cli, model, length, most, tmp):
    """A chat of dictionary questions, each answered by the model itself (float32 cache, greedy), up to
    `length` tokens."""
    with open(os.path.join(model, "config.json")) as f:
        eos = json.load(f).get("eos_token_id")
    eos = set(eos if isinstance(eos, list) else [eos])
    ids, turn = [], 0
    while len(ids) < length:
        word = WORDS[turn % len(WORDS)]
        question = "What does %s mean?" % word if turn % 3 else "And %s?" % word
        ids += tokenize(cli, model, f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n")
        room = min(64, most - len(ids) - 1)
        if room < 2:
            break
        # The text alone matters here: made on the CPU whatever --device is (one start per turn).
        _, answer = run(cli, model, ids, None, room, [], tmp, "chat", "cpu")
        cut = next((i for i, t in enumerate(answer) if t in eos), len(answer))
        ids += answer[:cut] + tokenize(cli, model, "<|im_end|>\n")
        turn += 1
    return ids[:length]


def softmax_log(x):
    x = x.astype(np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def compare(f32, int8):
    """Per-row relative L2, top-1 agreement and KL(f32 || int8)."""
    err = rel_l2(int8, f32)
    top1 = f32.argmax(-1) == int8.argmax(-1)
    kl = np.empty(len(f32))
    for i in range(0, len(f32), 256):
        a, b = softmax_log(f32[i:i + 256]), softmax_log(int8[i:i + 256])
        kl[i:i + 256] = (np.exp(a) * (a - b)).sum(-1)
    return err, top1, kl


def main():
    args = parse_args()
    global DEVICE
    DEVICE = args.device
    lengths = [int(t) for t in args.tokens.split(",")]
    models = [(m, False) for m in find_fixtures(args.fixture, args.fixtures)] + [(m, True) for m in args.model]
    failures, results = 0, []
    print(f'{"model":26} {"prompt":>6} {"rows":>6} {"worst":>9} {"median":>9} {"top-1":>7} {"KL med":>9} {"KL max":>9}'
          f' | steps: {"median":>9} {"top-1":>7} {"KL med":>9}')
    with tempfile.TemporaryDirectory() as tmp:
        for model, chat in models:
            name = os.path.basename(os.path.normpath(model))
            with open(os.path.join(model, "config.json")) as f:
                config = json.load(f)
            vocab, most = config["vocab_size"], config.get("max_position_embeddings") or 1 << 20
            extra = experts_for(config)
            for length in sorted({min(n, most - args.steps) for n in lengths}):
                rng = np.random.default_rng(args.seed)
                ids = conversation(args.cli, model, length, most, tmp) if chat else rng.integers(0, vocab, size=length).tolist()
                forced = rng.integers(0, vocab, size=args.steps).tolist()
                rows = {}
                for kind in ("f32", "int8"):
                    path, _ = run(args.cli, model, ids, forced, args.steps, extra + ["--kv-cache", kind], tmp, kind)
                    rows[kind] = np.fromfile(path, dtype=np.float32).reshape(-1, vocab)
                err, top1, kl = compare(rows["f32"], rows["int8"])
                steps = slice(len(ids), None)
                r = dict(model=name, prompt=length, text="chat" if chat else "random ids", rows=len(err),
                         worst=float(err.max()), median=float(np.median(err)), top1=float(top1.mean()),
                         kl_median=float(np.median(kl)), kl_max=float(kl.max()),
                         steps_median=float(np.median(err[steps])), steps_top1=float(top1[steps].mean()),
                         steps_kl_median=float(np.median(kl[steps])))
                results.append(r)
                bad = (args.bound_median is not None and r["median"] > args.bound_median) or \
                      (args.bound_top1 is not None and r["top1"] < args.bound_top1)
                failures += bad
                print(f'{name:26} {length:6} {r["rows"]:6} {r["worst"]:9.2e} {r["median"]:9.2e} {r["top1"]:7.1%} '
                      f'{r["kl_median"]:9.2e} {r["kl_max"]:9.2e} | steps: {r["steps_median"]:9.2e} {r["steps_top1"]:7.1%} '
                      f'{r["steps_kl_median"]:9.2e}{"  FAILED" if bad else ""}', flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print(f"{failures} FAILURES" if failures else "done")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
