#!/usr/bin/env python3
"""Trains the pocket dictionary: a small Qwen3-MoE model on prepare_data.py's conversations.

Usage: train.py --data DIR --out MODEL_DIR [--minutes M] [--device cuda]
       train.py --data DIR --out MODEL_DIR --init MODEL_DIR [--minutes M]   (fine-tune)

From scratch it trains on train.jsonl.gz (or train.jsonl) and, when prepare_data.py wrote it, multiturn.jsonl.gz, every
conversation once an epoch. With --init it starts from that model folder's weights (the shipped pocket
dictionary; same architecture and tokenizer) and each epoch is every multi-turn conversation plus a
fresh random --single-fraction of the single-turn ones, so the model learns to answer the latest
question of a chat and keeps its single-turn answers; the learning rate warms up briefly and follows a
cosine over the --minutes.

The model is written as a Hugging Face qwen3_moe folder (config.json, model.safetensors in bf16, the
tokenizer files, generation_config.json), so Tandem and transformers load it alike. The architecture is
written out here rather than taken from transformers so that training is fast (all experts computed
densely with batched matrix products, which at this size beats gathering tokens per expert) and the
saved names are exactly the published checkpoints' ones. After training it measures the definition
accuracy on eval.jsonl with greedy decoding, and on eval_multiturn.jsonl question by question in each
chat with the model's own earlier answers (decoded to text and rendered again, as Tandem does) as the
history, and, when transformers is installed, checks that transformers' Qwen3MoeForCausalLM computes
the same logits from the saved folder.
"""
import gzip
import argparse
import json
import math
import random
import shutil
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from scoring import score

CONFIG = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
    "vocab_size": 4096, "hidden_size": 256, "num_hidden_layers": 6,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
    "intermediate_size": 768, "moe_intermediate_size": 96, "num_experts": 16, "num_experts_per_tok": 4,
    "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 2048,
    "tie_word_embeddings": False, "attention_bias": False, "attention_dropout": 0.0, "hidden_act": "silu",
    "router_aux_loss_coef": 0.01, "use_sliding_window": False, "sliding_window": None,
    "initializer_range": 0.02, "use_cache": True, "torch_dtype": "bfloat16",
}


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        h = c["hidden_size"]
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=False)
        self.q_norm = RMSNorm(self.head_dim, c["rms_norm_eps"])
        self.k_norm = RMSNorm(self.head_dim, c["rms_norm_eps"])

    def forward(self, x, cos, sin, key_padding):
        b, t, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, t, self.heads, self.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(b, t, self.kv_heads, self.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
        v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        # Every query sees at least itself: a left-padding row would otherwise have no key at all, which
        # some attention kernels turn into NaN that then spreads. Real tokens see themselves anyway.
        itself = torch.eye(t, dtype=torch.bool, device=x.device)[None, None]
        mask = (causal[None, None] & key_padding[:, None, None, :]) | itself
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, -1))


class Experts(nn.Module):
    """The routed experts, stored stacked for training and unstacked to HF names when saved."""

    def __init__(self, c):
        super().__init__()
        e, h, i = c["num_experts"], c["hidden_size"], c["moe_intermediate_size"]
        std = c["initializer_range"]
        self.gate_proj = nn.Parameter(torch.randn(e, i, h) * std)
        self.up_proj = nn.Parameter(torch.randn(e, i, h) * std)
        self.down_proj = nn.Parameter(torch.randn(e, h, i) * std)

    def forward(self, x, weights):
        # x [n, h], weights [n, e] (zero for experts a token was not routed to)
        gate = torch.einsum("nh,eih->nei", x, self.gate_proj)
        up = torch.einsum("nh,eih->nei", x, self.up_proj)
        act = F.silu(gate) * up * weights[..., None].to(x.dtype)
        return torch.einsum("nei,ehi->nh", act, self.down_proj)


class MoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.top_k, self.norm_topk = c["num_experts_per_tok"], c["norm_topk_prob"]
        self.num_experts = c["num_experts"]
        self.gate = nn.Linear(c["hidden_size"], c["num_experts"], bias=False)
        self.experts = Experts(c)

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        probs = F.softmax(self.gate(x).float(), dim=-1)
        top_w, top_i = probs.topk(self.top_k, dim=-1)
        if self.norm_topk:
            top_w = top_w / top_w.sum(-1, keepdim=True)
        weights = torch.zeros_like(probs).scatter(-1, top_i, top_w)
        # Switch-style balance: fraction of routings to each expert times its mean probability.
        load = torch.zeros_like(probs).scatter(-1, top_i, 1.0).mean(0) / self.top_k
        aux = self.num_experts * (load * probs.mean(0)).sum()
        return self.experts(x, weights).reshape(shape), aux


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.mlp = MoE(c)

    def forward(self, x, cos, sin, key_padding):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, key_padding)
        y, aux = self.mlp(self.post_attention_layernorm(x))
        return x + y, aux


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(Layer(c) for _ in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=c["initializer_range"])

    def forward(self, ids, key_padding):
        d = self.c["head_dim"]
        inv = 1.0 / (self.c["rope_theta"] ** (torch.arange(0, d, 2, device=ids.device).float() / d))
        # Left padding: positions count from each row's first real token.
        pos = (key_padding.long().cumsum(-1) - 1).clamp(min=0).float()
        freqs = pos[..., None] * inv
        emb = torch.cat((freqs, freqs), dim=-1)[:, None]
        cos, sin = emb.cos(), emb.sin()
        x = self.embed_tokens(ids)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        aux_total = 0.0
        for layer in self.layers:
            x, aux = layer(x, cos, sin, key_padding)
            aux_total = aux_total + aux
        return self.lm_head(self.norm(x)), aux_total / len(self.layers)

    def hf_state_dict(self):
        out = {}
        for name, tensor in self.state_dict().items():
            if ".mlp.experts." in name:
                prefix, proj = name.rsplit(".", 1)
                for e in range(tensor.shape[0]):
                    out[f"model.{prefix}.{e}.{proj}.weight"] = tensor[e]
            elif name.startswith("lm_head"):
                out[name] = tensor
            else:
                out["model." + name] = tensor
        return {k: v.detach().to(torch.bfloat16).contiguous().cpu() for k, v in out.items()}


def render(messages, generation_prompt=False):
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return text + ("<|im_start|>assistant\n" if generation_prompt else "")


def encode_conversation(tokenizer, messages):
    """ids and a mask of the tokens the loss counts: the assistant's replies and their <|im_end|>."""
    ids, mask = [], []
    for m in messages:
        head = tokenizer.encode(f"<|im_start|>{m['role']}\n").ids
        body = tokenizer.encode(f"{m['content']}<|im_end|>").ids
        tail = tokenizer.encode("\n").ids
        train = m["role"] == "assistant"
        ids += head + body + tail
        mask += [False] * len(head) + [train] * len(body) + [False] * len(tail)
    return ids, mask


def encode_conversations(tokenizer, conversations):
    """encode_conversation for many at once: the same ids and masks, the message texts encoded in one
    batch (the turn markers and the newline between messages are separate pre-tokens, so each
    message's text encodes the same alone as inside the whole prompt; checked against tandem-cli
    render-chat and tokenize)."""
    heads = {}
    tail = tokenizer.encode("\n").ids
    bodies = tokenizer.encode_batch([f"{m['content']}<|im_end|>" for c in conversations for m in c])
    result, k = [], 0
    for messages in conversations:
        ids, mask = [], []
        for m in messages:
            if m["role"] not in heads:
                heads[m["role"]] = tokenizer.encode(f"<|im_start|>{m['role']}\n").ids
            head, body = heads[m["role"]], bodies[k].ids
            k += 1
            train = m["role"] == "assistant"
            ids += head + body + tail
            mask += [False] * len(head) + [train] * len(body) + [False] * len(tail)
        result.append((ids, mask))
    return result


def load_conversations(path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [json.loads(line)["messages"] for line in f]


def load_init(model, folder):
    """The weights of a saved model folder (Hugging Face names) into our layout (stacked experts)."""
    from safetensors.torch import load_file
    saved = json.loads((folder / "config.json").read_text())
    for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                "head_dim", "moe_intermediate_size", "num_experts", "num_experts_per_tok"):
        assert saved[key] == CONFIG[key], f"{folder}: {key} is {saved[key]}, not {CONFIG[key]}"
    tensors = load_file(str(folder / "model.safetensors"))
    state = {}
    for name, shape in ((n, t.shape) for n, t in model.state_dict().items()):
        if ".mlp.experts." in name:
            prefix, proj = name.rsplit(".", 1)
            state[name] = torch.stack([tensors.pop(f"model.{prefix}.{e}.{proj}.weight") for e in range(shape[0])])
        else:
            state[name] = tensors.pop(name if name.startswith("lm_head") else "model." + name)
        assert state[name].shape == shape, name
    assert not tensors, f"unused tensors in {folder}: {sorted(tensors)[:5]}"
    model.load_state_dict({k: v.float() for k, v in state.items()})


def batches(examples, tokens_per_batch, rng):
    order = sorted(range(len(examples)), key=lambda i: len(examples[i][0]) + rng.random())
    result, current = [], []
    for i in order:
        longest = max([len(examples[j][0]) for j in current] + [len(examples[i][0])])
        if current and longest * (len(current) + 1) > tokens_per_batch:
            result.append(current)
            current = []
        current.append(i)
    result.append(current)
    rng.shuffle(result)
    return result


def collate(examples, index, device, pad):
    width = max(len(examples[i][0]) for i in index)
    ids = torch.full((len(index), width), pad, dtype=torch.long)
    keep = torch.zeros(len(index), width, dtype=torch.bool)
    target_mask = torch.zeros(len(index), width, dtype=torch.bool)
    for row, i in enumerate(index):
        tokens, mask = examples[i]
        ids[row, :len(tokens)] = torch.tensor(tokens)
        keep[row, :len(tokens)] = True
        target_mask[row, :len(tokens)] = torch.tensor(mask)
    return ids.to(device), keep.to(device), target_mask.to(device)


@torch.no_grad()
def greedy(model, tokenizer, prompts, device, eos, pad, max_new=120, batch=512):
    outputs = []
    for start in range(0, len(prompts), batch):
        rows = [tokenizer.encode(p).ids for p in prompts[start:start + batch]]
        width = max(map(len, rows))
        ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], device=device)
        keep = torch.tensor([[False] * (width - len(r)) + [True] * len(r) for r in rows], device=device)
        done = torch.zeros(len(rows), dtype=torch.bool, device=device)
        generated = []
        for _ in range(max_new):
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                logits, _ = model(ids, keep)
            nxt = logits[:, -1].float().argmax(-1)
            nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
            generated.append(nxt)
            done |= nxt == eos
            ids = torch.cat([ids, nxt[:, None]], 1)
            keep = torch.cat([keep, (~done | (nxt == eos))[:, None]], 1)
            if bool(done.all()):
                break
        gen = torch.stack(generated, 1).tolist()
        for row in gen:
            row = row[:row.index(eos)] if eos in row else row
            outputs.append(tokenizer.decode(row))
    return outputs


def multiturn_accuracy(model, tokenizer, chats, device, eos, pad):
    """Each chat question by question, every chat's turn t in one batch, the model's own earlier answers
    as the assistant's messages: the score per turn (split = turn number) and per kind of question."""
    histories = [[] for _ in chats]
    items, outputs = [], []
    for t in range(max(len(c) for c in chats)):
        active = [i for i, c in enumerate(chats) if t < len(c)]
        for i in active:
            histories[i].append({"role": "user", "content": chats[i][t]["question"]})
        answers = greedy(model, tokenizer, [render(histories[i], True) for i in active], device, eos, pad)
        for i, answer in zip(active, answers):
            histories[i].append({"role": "assistant", "content": answer})
            items.append(dict(chats[i][t], split=t + 1))
            outputs.append(answer)
    by_turn = score(items, outputs)
    by_form = score([dict(it, split=it["form"]) for it in items], outputs)
    samples = [{"questions": [m["content"] for m in h if m["role"] == "user"],
                "answers": [m["content"] for m in h if m["role"] == "assistant"]} for h in histories[:2]]
    return by_turn, by_form, samples


def save(model, tokenizer_dir, out, eos, pad):
    from safetensors.torch import save_file
    out.mkdir(parents=True, exist_ok=True)
    save_file(model.hf_state_dict(), str(out / "model.safetensors"), metadata={"format": "pt"})
    config = dict(CONFIG, bos_token_id=None, eos_token_id=eos, pad_token_id=pad)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    generation = {"do_sample": False, "eos_token_id": [eos], "pad_token_id": pad}
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / name, out / name)


def check_with_transformers(model, out, device, tokenizer):
    try:
        from transformers import AutoModelForCausalLM
    except ImportError:
        return None
    hf = AutoModelForCausalLM.from_pretrained(str(out), torch_dtype=torch.float32).to(device).eval()
    ours = Model(CONFIG).to(device).eval()
    ours.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    # Our copy gets the bf16-rounded weights the file holds, so both compute from the same numbers.
    with torch.no_grad():
        for p in ours.parameters():
            p.copy_(p.to(torch.bfloat16).float())
        ids = torch.tensor([tokenizer.encode(render([{"role": "user", "content": "What does serendipity mean?"}], True)).ids], device=device)
        a = hf(ids).logits.float()
        b, _ = ours(ids, torch.ones_like(ids, dtype=torch.bool))
        return float((a - b).norm() / a.norm())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tokens-per-batch", type=int, default=65536)
    parser.add_argument("--lr", type=float, help="peak learning rate (3e-3 from scratch, 5e-4 with --init)")
    parser.add_argument("--init", type=Path, help="fine-tune: start from this model folder's weights")
    parser.add_argument("--single-fraction", type=float, default=0.5,
                        help="with --init: the share of single-turn conversations in each epoch")
    parser.add_argument("--eval-limit", type=int, default=0, help="evaluate only this many items (0: all)")
    parser.add_argument("--log-every", type=int, help="steps between progress lines (200; 50 with --init)")
    parser.add_argument("--eval-multiturn", type=int, default=100, help="chats of eval_multiturn.jsonl to evaluate")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    from tokenizers import Tokenizer

    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    device = torch.device(args.device)
    tokenizer = Tokenizer.from_file(str(args.data / "tokenizer.json"))
    eos, pad = tokenizer.token_to_id("<|im_end|>"), tokenizer.token_to_id("<|endoftext|>")
    assert tokenizer.get_vocab_size() <= CONFIG["vocab_size"]
    load_start = time.time()
    single_path = args.data / "train.jsonl.gz"
    if not single_path.exists():
        single_path = args.data / "train.jsonl"  # written by an earlier prepare_data.py
    single = encode_conversations(tokenizer, load_conversations(single_path))
    multi_path = args.data / "multiturn.jsonl.gz"
    multi = encode_conversations(tokenizer, load_conversations(multi_path)) if multi_path.exists() else []
    examples = single + multi
    print(f"{len(single)} single-turn conversations ({sum(len(e[0]) for e in single) / 1e6:.2f} M tokens), "
          f"{len(multi)} multi-turn ({sum(len(e[0]) for e in multi) / 1e6:.2f} M tokens), "
          f"longest {max(len(e[0]) for e in examples)} tokens; encoded in {time.time() - load_start:.0f} s", flush=True)

    model = Model(CONFIG)
    if args.init:
        init_tokenizer = Tokenizer.from_file(str(args.init / "tokenizer.json"))
        assert init_tokenizer.get_vocab() == tokenizer.get_vocab(), "--init's tokenizer differs from the data's"
        load_init(model, args.init)
        print(f"initialised from {args.init}", flush=True)
    model = model.to(device)
    params = sum(p.numel() for p in model.parameters())
    print(f"{params / 1e6:.2f} M parameters", flush=True)
    if args.lr is None:
        args.lr = 5e-4 if args.init else 3e-3
    log_every = args.log_every or (50 if args.init else 200)

    def epoch_examples():
        """From scratch every conversation; fine-tuning all multi-turn ones and a share of the rest."""
        if not args.init:
            return examples
        return multi + rng.sample(single, int(len(single) * args.single_fraction))
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), fused=device.type == "cuda")
    budget = args.minutes * 60
    start = time.time()
    step, epoch, warmup = 0, 0, 30 if args.init else 200
    seen_tokens = 0
    estimated_steps = None
    while time.time() - start < budget:
        epoch += 1
        epoch_data = epoch_examples()
        for index in batches(epoch_data, args.tokens_per_batch, rng):
            elapsed = time.time() - start
            if elapsed >= budget:
                break
            if step == 200:
                estimated_steps = int(budget / (elapsed / 200))
            progress = min(1.0, step / estimated_steps) if estimated_steps else 0.0
            if args.init:
                progress = elapsed / budget  # a short run: follow the clock from the first step
            lr = args.lr * min(1.0, (step + 1) / warmup) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))
            for group in opt.param_groups:
                group["lr"] = lr
            ids, keep, target_mask = collate(epoch_data, index, device, pad)
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                logits, aux = model(ids, keep)
            targets = ids[:, 1:].masked_fill(~target_mask[:, 1:], -100)
            loss = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
            total = loss + CONFIG["router_aux_loss_coef"] * aux
            opt.zero_grad(set_to_none=True)
            total.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            seen_tokens += int(keep.sum())
            if step % log_every == 0:
                print(f"step {step} epoch {epoch} loss {loss.detach().item():.3f} aux {float(aux.detach()):.3f} lr {lr:.2e} "
                      f"{seen_tokens / (time.time() - start) / 1e3:.0f} k tok/s", flush=True)
            step += 1
    train_seconds = time.time() - start
    print(f"trained {step} steps, {epoch} epochs, {seen_tokens / 1e6:.0f} M tokens in {train_seconds:.0f} s", flush=True)

    model.eval()
    save(model, args.data, args.out, eos, pad)
    items = [json.loads(line) for line in open(args.data / "eval.jsonl")]
    if args.eval_limit:
        items = items[:args.eval_limit]
    prompts = [render([{"role": "user", "content": it["question"]}], True) for it in items]
    outputs = greedy(model, tokenizer, prompts, device, eos, pad)
    table = score(items, outputs)
    samples = [{"question": it["question"], "split": it["split"], "answer": out} for it, out in zip(items, outputs)][::50]
    print("single-turn accuracy: " + json.dumps(table), flush=True)
    report = {"parameters": params, "steps": step, "epochs": epoch, "train_tokens": seen_tokens,
              "train_seconds": round(train_seconds), "final_loss": round(loss.item(), 4), "accuracy": table,
              "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "samples": samples}
    if args.init:
        report.update(init=str(args.init), lr=args.lr, single_fraction=args.single_fraction)
    multi_eval = args.data / "eval_multiturn.jsonl"
    if multi_eval.exists() and args.eval_multiturn:
        eval_start = time.time()
        chats = [json.loads(line)["turns"] for line in open(multi_eval)][:args.eval_multiturn]
        by_turn, by_form, chat_samples = multiturn_accuracy(model, tokenizer, chats, device, eos, pad)
        report["multiturn_chats"] = len(chats)
        report["multiturn_accuracy_by_turn"] = {str(t): v for t, v in sorted(by_turn.items())}
        report["multiturn_accuracy_by_kind"] = by_form
        report["multiturn_samples"] = chat_samples
        print(f"multi-turn ({len(chats)} chats, {time.time() - eval_start:.0f} s): turn " +
              " ".join(f"{t}: {v['definition']:.1%}/{v['exact']:.1%}" for t, v in sorted(by_turn.items())) +
              " (definition/exact)", flush=True)
    report["transformers_rel_err"] = check_with_transformers(model, args.out, device, tokenizer)
    (args.out / "training_report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k not in ("samples", "multiturn_samples")}, indent=2))


if __name__ == "__main__":
    main()
