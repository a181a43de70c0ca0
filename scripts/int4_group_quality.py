#!/usr/bin/env python3
"""INT4 group size against quality (issue 23): g32 (today's store format) against 64- and 128-column
groups, on the fixtures and the Pocket Dictionary, through Tandem's exact reference path.

Usage (torch, safetensors, numpy, tokenizers; `source /work/venv/activate-torch.sh`):

    python3 scripts/int4_group_quality.py --cli build/app/tandem-cli \
        [--fixtures tests/fixtures] [--pocket resources/models/pocket-dictionary] \
        [--pocket-eval .training/data/eval.jsonl] [--limit 500] [--groups 32,64,128] [--threads 2] \
        [--work DIR] [--keep]

For every model it writes copies of the checkpoint into a temporary folder (--work; deleted at the end
unless --keep) whose routed experts' weights are replaced by their INT4 quantize-dequantize with each
group size, as float32 tensors (the dequantized values are not exact in bf16). The rounding is the
store's (engine/cpu/expert_pack.cpp): per group of G inputs of one output row, scale = fp16(absmax / 7),
n = clamp(round_half_even(w / scale), -8, 7), w' = n * scale (0 where the scale is 0); groups run along
each matrix's input dimension (gate/up over hidden, down over the expert's intermediate size) and a last
partial group takes what is left. FP8 experts are dequantized first (e4m3 x their 128x128 block scale).
Everything else in the checkpoint stays as stored.

Each copy and the original folder then run `tandem-cli eval --experts reference --device cpu` (float32
experts, exact) over the fixtures' golden `chat` and `long` prompts, teacher-forced with the golden
`gen_ids`; every logits row (the prompt's, then one per forced token) is compared with the original's:
KL(original || quantized) of the softmax, top-1 agreement, relative L2. For context the same comparison
is made for the engine's own packed kernels on the original folder (`--experts int8` and `--experts int4`,
i.e. g32 with int8 activations), the difference the store goldens already accept.

The Pocket Dictionary has no goldens: its rows are the answer rows (the last prompt row and every forced
token) of --logit-questions eval questions (half "seen", half "paraphrase") teacher-forced with WordNet's
answer, and with --pocket-eval (eval.jsonl of training/pocket_dictionary/prepare_data.py) also its task
accuracy: greedy answers (`tandem-cli generate --prompts-file`, as evaluate.py does at d=0, but with the
reference experts) scored by training/pocket_dictionary/scoring.py.

Prints Markdown tables (the ones in docs/BENCHMARKS.md, "INT4 group size (issue 23)").
"""
import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load_file as load_numpy
from safetensors.torch import load_file, save_file

FIXTURES = ["tiny-qwen3moe", "tiny-deepseekv2", "tiny-mixtral", "tiny-deepseekv3-fp8", "tiny-deepseekv3-fp8-edge"]
# Routed experts only (shared_experts.* has no index after "experts.").
EXPERT = re.compile(r"\.experts\.\d+\.(gate_proj|up_proj|down_proj|w1|w2|w3)\.weight$")


def int4_roundtrip(w, group):
    """The store's INT4 quantize-dequantize of w [out, in] (float32) with groups of `group` inputs."""
    rows, cols = w.shape
    groups = (cols + group - 1) // group
    padded = torch.zeros(rows, groups * group, dtype=torch.float32)
    padded[:, :cols] = w
    g = padded.view(rows, groups, group)
    absmax = g.abs().amax(dim=2, keepdim=True)
    scale = torch.clamp(absmax / 7.0, max=65504.0).to(torch.float16).to(torch.float32)
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    n = torch.clamp(torch.round(g / safe), -8, 7)  # torch.round: half to even, as nearbyint
    out = torch.where(scale == 0, torch.zeros_like(g), n * scale)
    return out.view(rows, groups * group)[:, :cols].contiguous()


def fp8_dequant(w, scale_inv, block):
    """e4m3 [out, in] x one float32 scale per block (partial blocks at the edges) -> float32."""
    br, bc = block
    rows, cols = w.shape
    s = scale_inv.to(torch.float32).repeat_interleave(br, 0).repeat_interleave(bc, 1)[:rows, :cols]
    return w.to(torch.float32) * s


def shard_files(model):
    index = model / "model.safetensors.index.json"
    if index.exists():
        return sorted(set(json.loads(index.read_text())["weight_map"].values())), index
    return [p.name for p in sorted(model.glob("*.safetensors")) if not p.name.startswith("golden")], None


def make_variants(model, groups, out_root):
    """Writes out_root/g{G} for each G; returns ({G: folder}, {G: relative RMS weight error})."""
    config = json.loads((model / "config.json").read_text())
    block = (config.get("quantization_config") or {}).get("weight_block_size", [128, 128])
    files, index = shard_files(model)
    dirs = {g: out_root / f"g{g}" for g in groups}
    for d in dirs.values():
        d.mkdir(parents=True)
        for p in model.iterdir():
            if p.is_file() and not p.name.endswith(".safetensors") and not p.name.startswith("golden") \
                    and p.name != "model.safetensors.index.json":
                shutil.copy2(p, d / p.name)
    err = {g: 0.0 for g in groups}
    norm = 0.0
    dropped = set()
    for name in files:
        tensors = load_file(model / name)
        per_group = {g: {} for g in groups}
        for key, t in tensors.items():
            if key.endswith("_scale_inv") and EXPERT.search(key[: -len("_scale_inv")]):
                dropped.add(key)  # the expert it scaled is float32 now
                continue
            if not EXPERT.search(key):
                for g in groups:
                    per_group[g][key] = t
                continue
            if t.dtype == torch.float8_e4m3fn:
                w = fp8_dequant(t, tensors[key + "_scale_inv"], block)
            else:
                w = t.to(torch.float32)
            norm += float((w.double() ** 2).sum())
            for g in groups:
                q = int4_roundtrip(w, g)
                err[g] += float(((q.double() - w.double()) ** 2).sum())
                per_group[g][key] = q
        for g in groups:
            save_file(per_group[g], str(dirs[g] / name), metadata={"format": "pt"})
    if index is not None:
        data = json.loads(index.read_text())
        data["weight_map"] = {k: v for k, v in data["weight_map"].items() if k not in dropped}
        for d in dirs.values():
            (d / index.name).write_text(json.dumps(data, indent=2))
    return dirs, {g: (err[g] / norm) ** 0.5 for g in groups}


def write_ids(path, ids):
    Path(path).write_text(" ".join(str(int(i)) for i in ids) + "\n")


def run_eval(cli, model, prompt, forced, experts, threads, work):
    """Logits rows [prompt positions + forced tokens - 1, V]: the prompt's rows, then one per forced token
    after the first (eval writes the last prompt row again as the first generated row)."""
    ids, force, out = work / "prompt.txt", work / "forced.txt", work / "logits.bin"
    write_ids(ids, prompt)
    write_ids(force, forced)
    subprocess.run([cli, "eval", "--model", str(model), "--ids-file", str(ids), "--forced-ids", str(force),
                    "--new-tokens", str(len(forced)), "--logits-out", str(out), "--experts", experts,
                    "--device", "cpu", "--threads", str(threads)], check=True, capture_output=True, text=True)
    rows = np.fromfile(out, dtype=np.float32)
    rows = rows.reshape(len(prompt) + len(forced), -1)
    t = len(prompt)
    assert np.array_equal(rows[t - 1], rows[t]), "expected the last prompt row twice"
    return np.concatenate([rows[:t], rows[t + 1:]])


def compare(ref, other):
    """Per row: KL(ref || other) of the softmax, argmax agreement, relative L2."""
    a = torch.from_numpy(ref).double()
    b = torch.from_numpy(other).double()
    la, lb = torch.log_softmax(a, -1), torch.log_softmax(b, -1)
    kl = (la.exp() * (la - lb)).sum(-1)
    agree = (a.argmax(-1) == b.argmax(-1)).double()
    rel = (a - b).norm(dim=-1) / a.norm(dim=-1)
    return kl.numpy(), agree.numpy(), rel.numpy()


def summary(parts):
    kl = np.concatenate([p[0] for p in parts])
    agree = np.concatenate([p[1] for p in parts])
    rel = np.concatenate([p[2] for p in parts])
    return {"rows": len(kl), "kl_mean": float(kl.mean()), "kl_median": float(np.median(kl)), "kl_max": float(kl.max()),
            "top1": float(agree.mean()), "rel_median": float(np.median(rel))}


def fixture_cases(model):
    g = load_numpy(str(model / "golden.safetensors"))
    return [(g[f"{p}.prompt_ids"].tolist(), g[f"{p}.gen_ids"].tolist()) for p in ("chat", "long")]


def pocket_items(eval_file, limit):
    items, per_split = [], {}
    for line in open(eval_file):
        item = json.loads(line)
        if item["split"] in ("seen", "paraphrase") and per_split.get(item["split"], 0) < limit:
            per_split[item["split"]] = per_split.get(item["split"], 0) + 1
            items.append(item)
    return items


def chat_prompt(question):
    return f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"


def pocket_cases(model, items, count):
    from tokenizers import Tokenizer
    tokenizer = Tokenizer.from_file(str(model / "tokenizer.json"))
    eos = tokenizer.token_to_id("<|im_end|>")
    chosen = [i for i in items if i["split"] == "seen"][: count // 2] + \
             [i for i in items if i["split"] == "paraphrase"][: count - count // 2]
    return [(tokenizer.encode(chat_prompt(i["question"])).ids, tokenizer.encode(i["answer"]).ids + [eos])
            for i in chosen]


def pocket_accuracy(cli, model, items, experts, threads, work, new_tokens):
    from tokenizers import Tokenizer
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "training" / "pocket_dictionary"))
    from scoring import score
    tokenizer = Tokenizer.from_file(str(model / "tokenizer.json"))
    eos = tokenizer.token_to_id("<|im_end|>")
    prompts = work / "prompts.txt"
    prompts.write_text("".join(" ".join(map(str, tokenizer.encode(chat_prompt(i["question"])).ids)) + "\n"
                               for i in items))
    out = subprocess.run([cli, "generate", "--model", str(model), "--prompts-file", str(prompts), "--new-tokens",
                          str(new_tokens), "--temperature", "0", "--device", "cpu", "--experts", experts,
                          "--threads", str(threads)], check=True, capture_output=True, text=True).stdout
    rows = [[int(t) for t in line.split()] for line in out.splitlines()]
    outputs = [tokenizer.decode(r[:r.index(eos)] if eos in r else r) for r in rows]
    return score(items, outputs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cli", required=True)
    parser.add_argument("--fixtures", type=Path, default=Path("tests/fixtures"))
    parser.add_argument("--only", help="comma-separated model names (fixtures and/or pocket-dictionary)")
    parser.add_argument("--pocket", type=Path, default=Path("resources/models/pocket-dictionary"))
    parser.add_argument("--pocket-eval", type=Path, help="eval.jsonl from prepare_data.py; needed for the Pocket Dictionary")
    parser.add_argument("--limit", type=int, default=500, help="task accuracy: questions per split")
    parser.add_argument("--logit-questions", type=int, default=40, help="Pocket Dictionary: teacher-forced answers")
    parser.add_argument("--new-tokens", type=int, default=120)
    parser.add_argument("--groups", default="32,64,128")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the quantized copies")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    args = parser.parse_args()
    groups = [int(g) for g in args.groups.split(",")]
    cli = str(Path(args.cli).resolve())

    models = [(name, args.fixtures / name) for name in FIXTURES]
    if args.pocket_eval:
        models.append(("pocket-dictionary", args.pocket))
    if args.only:
        keep = set(args.only.split(","))
        models = [m for m in models if m[0] in keep]

    work = args.work or Path(tempfile.mkdtemp(prefix="int4-groups-"))
    work.mkdir(parents=True, exist_ok=True)
    results, accuracy = {}, {}
    pocket_items_all = pocket_items(args.pocket_eval, args.limit) if args.pocket_eval else []
    try:
        for name, model in models:
            start = time.time()
            variants, weight_err = make_variants(model, groups, work / name)
            if name == "pocket-dictionary":
                cases = pocket_cases(model, pocket_items_all, args.logit_questions)
            else:
                cases = fixture_cases(model)
            # (label, folder, --experts): the group-size copies on the exact path, then the engine's kernels.
            runs = [(f"int4 g{g}", variants[g], "reference") for g in groups]
            runs += [("int8 kernels", model, "int8"), ("int4 g32 kernels", model, "int4")]
            parts = {label: [] for label, _, _ in runs}
            for c, (prompt, forced) in enumerate(cases):
                ref = run_eval(cli, model, prompt, forced, "reference", args.threads, work)
                if name == "pocket-dictionary":
                    ref_rows = slice(len(prompt) - 1, None)  # the answer's rows
                else:
                    ref_rows = slice(None)
                for label, folder, experts in runs:
                    rows = run_eval(cli, folder, prompt, forced, experts, args.threads, work)
                    parts[label].append(compare(ref[ref_rows], rows[ref_rows]))
            results[name] = {label: summary(p) for label, p in parts.items()}
            for g in groups:
                results[name][f"int4 g{g}"]["weight_rel_rms"] = weight_err[g]
            print(f"{name}: {len(cases)} sequences, {results[name][runs[0][0]]['rows']} rows, "
                  f"{time.time() - start:.0f} s", file=sys.stderr, flush=True)
            if name == "pocket-dictionary":
                for label, folder, experts in [("original (reference)", model, "reference")] + runs:
                    start = time.time()
                    accuracy[label] = pocket_accuracy(cli, folder, pocket_items_all, experts, args.threads, work,
                                                      args.new_tokens)
                    print(f"  accuracy {label}: {time.time() - start:.0f} s", file=sys.stderr, flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"copies kept in {work}", file=sys.stderr)

    print("| model | experts | rows | weight rel. RMS error | mean KL | median KL | max KL | top-1 | median rel. L2 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, table in results.items():
        for label, s in table.items():
            w = f"{s['weight_rel_rms']:.4f}" if "weight_rel_rms" in s else "-"
            print(f"| {name} | {label} | {s['rows']} | {w} | {s['kl_mean']:.2e} | {s['kl_median']:.2e} | {s['kl_max']:.2e} | "
                  f"{100 * s['top1']:.1f}% | {s['rel_median']:.2e} |")
    if accuracy:
        print()
        print("| Pocket Dictionary experts | seen: definition | seen: exact | paraphrase: definition | paraphrase: exact |")
        print("|---|---|---|---|---|")
        for label, table in accuracy.items():
            s, p = table["seen"], table["paraphrase"]
            print(f"| {label} | {s['definition']:.1%} | {s['exact']:.1%} | {p['definition']:.1%} | {p['exact']:.1%} |")
    if args.json:
        args.json.write_text(json.dumps({"logits": results, "accuracy": accuracy}, indent=2) + "\n")


if __name__ == "__main__":
    main()
