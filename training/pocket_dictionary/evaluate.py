#!/usr/bin/env python3
"""Definition accuracy of the pocket dictionary through Tandem's own engine: with Expert Deferral and
with skipping, for the table in docs/BENCHMARKS.md, or question by question in one chat (multi-turn).

Usage: evaluate.py --model DIR --cli build/app/tandem-cli --eval eval.jsonl [--limit N] [--device cpu]
       evaluate.py --model DIR --cli build/app/tandem-cli --eval eval.jsonl \
                   --multiturn eval_multiturn.jsonl [--conversations N] [--limit N]

With --dense-compare: the single-turn questions with --dense checkpoint and --dense int8, both scores
and the share of answers that stay identical (issue 25's quality check of int8 dense weights).
Without --multiturn: for d = 0 .. k-1 it runs `tandem-cli generate --prompts-file` (greedy) once with
--defer d and once with --skip d over the "seen" and "paraphrase" questions of eval.jsonl and prints a
Markdown table.

With --multiturn: the single-turn accuracy (all experts, "seen" and "paraphrase" questions, one chat
each), then the chats of eval_multiturn.jsonl through `tandem-cli chat` (greedy; the app's own chat
path: the model's chat template renders the whole conversation, the engine's own earlier answers as
the assistant's messages, /reset between chats), scored question by question; it prints the accuracy
at turns 1..10 and by kind of question (the first, a full question later, a follow-up such as "And
X?", a word asked again), definition and exact as scoring.py defines them.
"""
import argparse
import json
import subprocess
import tempfile
from pathlib import Path

from tokenizers import Tokenizer

from scoring import score


def run(cli, model, prompts_file, device, flag, d, new_tokens, extra=()):
    command = [cli, "generate", "--model", str(model), "--prompts-file", prompts_file, "--new-tokens",
               str(new_tokens), "--temperature", "0", "--device", device, *extra]
    if d:
        command += [flag, str(d)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return [[int(t) for t in line.split()] for line in out.splitlines()]


def chat_answers(cli, model, chats, device, new_tokens, threads):
    """Each chat's questions through one `tandem-cli chat` session, /reset between chats: the answers
    as the app shows them and sends them back."""
    lines = []
    for chat in chats:
        lines += [turn["question"] for turn in chat] + ["/reset"]
    command = [cli, "chat", "--model", str(model), "--device", device, "--temperature", "0",
               "--max-tokens", str(new_tokens), "--threads", str(threads)]
    out = subprocess.run(command, input="\n".join(lines) + "\n/quit\n", check=True, capture_output=True,
                         text=True).stdout
    # stdout: "> " before each answer, each answer ended by a newline; an empty answer leaves "> > ".
    assert out.startswith("> "), out[:200]
    records = []
    for record in out[2:].split("\n> "):
        while record.startswith("> "):
            records.append("")
            record = record[2:]
        records.append(record)
    answers, index = [], 0
    for chat in chats:
        answers.append([records[index + i].removesuffix("\n") for i in range(len(chat))])
        assert records[index + len(chat)].startswith("(new conversation)"), records[index + len(chat)][:200]
        index += len(chat) + 1
    return answers


def single_turn_prompts(args, tokenizer):
    """The first --limit "seen" and "paraphrase" questions of --eval, and a prompts file of their ids."""
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
        return items, f.name


def decode_answers(tokenizer, eos, rows):
    return [tokenizer.decode(r[:r.index(eos)] if eos in r else r) for r in rows]


def multiturn(args, tokenizer, eos):
    items, prompts_file = single_turn_prompts(args, tokenizer)
    rows = run(args.cli, args.model, prompts_file, args.device, "--defer", 0, args.new_tokens)
    Path(prompts_file).unlink()
    outputs = decode_answers(tokenizer, eos, rows)
    single = score(items, outputs)
    print("| single-turn questions | n | definition | exact |\n|---|---|---|---|")
    for split in ("seen", "paraphrase"):
        s = single[split]
        print(f"| {split} | {s['n']} | {s['definition']:.1%} | {s['exact']:.1%} |")

    chats = [json.loads(line)["turns"] for line in open(args.multiturn)][:args.conversations]
    answers = chat_answers(args.cli, args.model, chats, args.device, args.new_tokens, args.threads)
    turn_items, turn_outputs, form_items = [], [], []
    for chat, outs in zip(chats, answers):
        for t, (turn, out) in enumerate(zip(chat, outs)):
            turn_items.append(dict(turn, split=t + 1))
            form_items.append(dict(turn, split=turn["form"]))
            turn_outputs.append(out)
    by_turn, by_form = score(turn_items, turn_outputs), score(form_items, turn_outputs)
    print(f"\n| multi-turn ({len(chats)} chats) | " + " | ".join(f"turn {t}" for t in sorted(by_turn)) + " |")
    print("|---|" + "---|" * len(by_turn))
    for key in ("definition", "exact"):
        print(f"| {key} | " + " | ".join(f"{by_turn[t][key]:.1%}" for t in sorted(by_turn)) + " |")
    print("\n| question kind | n | definition | exact |\n|---|---|---|---|")
    for form in ("first", "full", "followup", "again"):
        if form in by_form:
            s = by_form[form]
            print(f"| {form} | {s['n']} | {s['definition']:.1%} | {s['exact']:.1%} |")
    if args.json:
        result = {"single_turn": single, "multi_turn_by_turn": {str(t): v for t, v in by_turn.items()},
                  "multi_turn_by_form": by_form, "chats": len(chats),
                  "samples": [{"questions": [t["question"] for t in chat], "answers": outs}
                              for chat, outs in list(zip(chats, answers))[:3]]}
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--cli", required=True)
    parser.add_argument("--eval", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=200, help="questions per split")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--new-tokens", type=int, default=120)
    parser.add_argument("--multiturn", type=Path, help="eval_multiturn.jsonl: score chats turn by turn instead")
    parser.add_argument("--conversations", type=int, default=100, help="chats of --multiturn to run")
    parser.add_argument("--threads", type=int, default=0, help="tandem-cli chat's threads (0: all)")
    parser.add_argument("--json", help="with --multiturn: also write the figures to this file")
    parser.add_argument("--dense-compare", action="store_true",
                        help="single-turn questions with the dense weights as the checkpoint has them and in int8 "
                             "(tandem-cli --dense int8): both scores and the share of identical greedy answers")
    parser.add_argument("--dense-types", default="int8",
                        help="with --dense-compare: the quantized types to compare, comma-separated (int8, int4)")
    args = parser.parse_args()

    tokenizer = Tokenizer.from_file(str(args.model / "tokenizer.json"))
    eos = tokenizer.token_to_id("<|im_end|>")
    config = json.loads((args.model / "config.json").read_text())
    k = config["num_experts_per_tok"]
    if args.multiturn:
        return multiturn(args, tokenizer, eos)
    items, prompts_file = single_turn_prompts(args, tokenizer)
    if args.dense_compare:
        types = ["checkpoint"] + args.dense_types.split(",")
        rows = {dense: run(args.cli, args.model, prompts_file, args.device, "--defer", 0, args.new_tokens,
                           ["--dense", dense]) for dense in types}
        Path(prompts_file).unlink()
        print("| dense weights | seen: definition | seen: exact | paraphrase: definition | paraphrase: exact |")
        print("|---|---|---|---|---|")
        for dense, r in rows.items():
            table = score(items, decode_answers(tokenizer, eos, r))
            s, p = table["seen"], table["paraphrase"]
            print(f"| {dense} | {s['definition']:.1%} | {s['exact']:.1%} | {p['definition']:.1%} | {p['exact']:.1%} |")
        cut = {d: [r[:r.index(eos)] if eos in r else r for r in rows[d]] for d in types}
        for d in types[1:]:
            same = sum(a == b for a, b in zip(cut["checkpoint"], cut[d]))
            print(f"\n{d}: identical greedy answers: {same} of {len(items)} ({same / len(items):.1%})")
        return

    print(f"| experts | seen: definition | seen: exact | paraphrase: definition | paraphrase: exact |")
    print("|---|---|---|---|---|")
    for d in range(k):
        for flag in (("--defer", "--skip") if d else ("--defer",)):
            rows = run(args.cli, args.model, prompts_file, args.device, flag, d, args.new_tokens)
            outputs = decode_answers(tokenizer, eos, rows)
            table = score(items, outputs)
            label = f"all {k} immediate (d=0)" if d == 0 else f"{flag[2:]} {d}"
            s, p = table["seen"], table["paraphrase"]
            print(f"| {label} | {s['definition']:.1%} | {s['exact']:.1%} | {p['definition']:.1%} | {p['exact']:.1%} |",
                  flush=True)
    Path(prompts_file).unlink()


if __name__ == "__main__":
    main()
