#!/usr/bin/env python3
"""Definition accuracy of the pocket dictionary through Tandem's own engine, with Expert Deferral and
with skipping, for the table in docs/BENCHMARKS.md.

Usage: evaluate.py --model DIR --cli build/app/tandem-cli --eval eval.jsonl [--limit N] [--device cpu]

For d = 0 .. k-1 it runs `tandem-cli generate --prompts-file` (greedy) once with --defer d and once
with --skip d over the "seen" and "paraphrase" questions of eval.jsonl and prints a Markdown table.
"""
import argparse
import json
import subprocess
import tempfile
from pathlib import Path

from tokenizers import Tokenizer

from scoring import score


def run(cli, model, prompts_file, device, flag, d, new_tokens):
    command = [cli, "generate", "--model", str(model), "--prompts-file", prompts_file, "--new-tokens",
               str(new_tokens), "--temperature", "0", "--device", device]
    if d:
        command += [flag, str(d)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return [[int(t) for t in line.split()] for line in out.splitlines()]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--cli", required=True)
    parser.add_argument("--eval", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=200, help="questions per split")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--new-tokens", type=int, default=120)
    args = parser.parse_args()

    tokenizer = Tokenizer.from_file(str(args.model / "tokenizer.json"))
    eos = tokenizer.token_to_id("<|im_end|>")
    config = json.loads((args.model / "config.json").read_text())
    k = config["num_experts_per_tok"]
    items, per_split = [], {}
    for line in open(args.eval):
        item = json.loads(line)
        if item["split"] in ("seen", "paraphrase") and per_split.get(item["split"], 0) < args.limit:
            per_split[item["split"]] = per_split.get(item["split"], 0) + 1
            items.append(item)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        for item in items:
            prompt = f"<|im_start|>user\n{item['question']}<|im_end|>\n<|im_start|>assistant\n"
            f.write(" ".join(map(str, tokenizer.encode(prompt).ids)) + "\n")
        prompts_file = f.name

    print(f"| experts | seen: definition | seen: exact | paraphrase: definition | paraphrase: exact |")
    print("|---|---|---|---|---|")
    for d in range(k):
        for flag in (("--defer", "--skip") if d else ("--defer",)):
            rows = run(args.cli, args.model, prompts_file, args.device, flag, d, args.new_tokens)
            outputs = [tokenizer.decode(r[:r.index(eos)] if eos in r else r) for r in rows]
            table = score(items, outputs)
            label = f"all {k} immediate (d=0)" if d == 0 else f"{flag[2:]} {d}"
            s, p = table["seen"], table["paraphrase"]
            print(f"| {label} | {s['definition']:.1%} | {s['exact']:.1%} | {p['definition']:.1%} | {p['exact']:.1%} |",
                  flush=True)
    Path(prompts_file).unlink()


if __name__ == "__main__":
    main()
