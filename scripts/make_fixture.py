#!/usr/bin/env python3
"""Makes a fixture model for tests/fixtures: a tiny checkpoint with random weights in the on-disk layout
of the public releases, and the outputs of Hugging Face transformers on it as the golden reference.

    python3 scripts/make_fixture.py --base tests/fixtures/tiny-deepseekv3-fp8 --out OUT/tiny-deepseekv3-fp8-edge \
        --set hidden_size=192 --set moe_intermediate_size=96 --set intermediate_size=320 \
        --set n_routed_experts=8 --set topk_group=3 --seed 16
    python3 scripts/make_fixture.py --verify tests/fixtures/tiny-deepseekv3-fp8    # the reference check

(tiny-deepseekv3-fp8-edge: 8 experts rather than 16 keep the folder under 4 MB; seed 16 is the second seed
from 0 that --stable-routing accepts, see tests/fixtures/README.md.)

A fixture is made from a BASE fixture of the same family (tests/fixtures/tiny-*): its config.json with the
--set overrides (KEY=JSON value) is the new config; its tokenizer files, generation_config.json and the
tokenizer/chat-template cases of its golden.json are copied unchanged (same tokenizer, so they still hold);
its golden prompts (`chat`, `long`) are reused by id.

What is written into OUT (the layout and golden format of tests/fixtures/README.md):
  config.json, generation_config.json, tokenizer.json, tokenizer_config.json (and any other side files)
  model-0000i-of-0000N.safetensors + model.safetensors.index.json   --shards N (tensors in name order)
      Every weight random (seeded: --seed), drawn per tensor from its name, so the same name gets the same
      values whatever else the model holds: norms 1 + N(0, 0.1), embeddings N(0, 1), DeepSeek-V3's
      e_score_correction_bias N(0, 0.05), everything else N(0, --init-std). Stored in the config's
      torch_dtype (bf16), except with FP8 (on when the base config's quantization_config says fp8, or
      --fp8): every 2-D weight matching --fp8-pattern is float8_e4m3fn with one float32 weight_scale_inv
      per weight_block_size block (128x128; the blocks at the right and bottom edges are partial when a
      dimension is no multiple of 128): scale = block amax / 448, stored w / scale.
      With num_nextn_predict_layers (DeepSeek-V3), that many multi-token-prediction layers follow the last
      layer (model.layers.L: a MoE decoder layer, enorm, hnorm, eh_proj, shared_head.norm), as in the
      release; Tandem ignores them and transformers has no module for them.
  golden.safetensors   {chat,long}.prompt_ids (I32), .prefill_logits [T, V] (F32), .gen_ids (I32) and
      .gen_logits [--new-tokens, V] (F32): greedy, row i is the logits that chose token i. From transformers in
      float32 with eager attention over the weights exactly as stored: bf16 widened, FP8 dequantized
      (fp8 value x weight_scale_inv in float32). The dequantized weights are loaded with from_pretrained
      from a float32 copy in the same per-expert Hugging Face layout, so transformers' own name conversion
      places them.
  golden.json          the base's, with this model's `loading` (from_pretrained's missing / unexpected /
      mismatched keys, all empty when every weight landed) and `prompts` (length, the largest relative
      difference between the KV-cached logits and a full recompute, the smallest top-1 margin, the logits'
      standard deviation).

Random tiny MoE models route some tokens on near-ties (two experts or groups whose scores differ by 1e-5):
rounding the weights (any lossy store type, even bf16 copies of FP8 weights) flips such a choice and that
token's logits then differ from the golden by 0.1-0.3, however right the conversion is. The report gives the
smallest routing margins over the golden prompts and how many routing decisions change with every weight
rounded to bf16; --stable-routing --max-tries N takes the first seed from --seed on that changes none.

Prints a report (the seed, the golden.json figures, the routing figures and the size) at the end. Needs
torch, transformers (5.x) and safetensors (the GPU machine has them); runs on the CPU by default (float32,
no TF32), deterministic: the same arguments write the same bytes.
"""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import zlib

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM

# The files of a fixture that this script writes itself; everything else in BASE is copied.
MADE = {"config.json", "golden.json", "golden.safetensors", "model.safetensors", "model.safetensors.index.json"}
SHARD = re.compile(r"model-\d+-of-\d+\.safetensors")
# DeepSeek-V3's release: attention projections (but kv_a_proj_with_mqa, kept in bf16 as in
# tiny-deepseekv3-fp8), every MLP / expert matrix, and the MTP layer's eh_proj are FP8; embeddings,
# lm_head, the router and the norms are not.
DEFAULT_FP8_PATTERN = (r"\.self_attn\.(q_proj|q_a_proj|q_b_proj|kv_b_proj|o_proj)\.weight$"
                       r"|\.mlp\..*(gate_proj|up_proj|down_proj)\.weight$|\.eh_proj\.weight$")
FP8_MAX = 448.0


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", help="fixture folder to take the config, tokenizer and prompts from")
    p.add_argument("--out", help="folder to write (created; must be empty or absent)")
    p.add_argument("--verify", metavar="FIXTURE",
                   help="instead: recompute FIXTURE's golden from its stored weights and print how far its "
                        "golden.safetensors is from it (checks this script's reference against a fixture's)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                   help="config.json override, e.g. hidden_size=192 or rope_scaling=null (repeatable)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--init-std", type=float, default=0.08, help="standard deviation of the weight matrices")
    p.add_argument("--fp8", choices=["auto", "on", "off"], default="auto",
                   help="quantize to float8_e4m3fn with block scales (auto: when the config's quantization_config is fp8)")
    p.add_argument("--fp8-pattern", default=DEFAULT_FP8_PATTERN, help="regex of the tensor names stored as FP8")
    p.add_argument("--stable-routing", action="store_true",
                   help="take the first seed from --seed on whose golden prompts route the same with every weight "
                        "rounded to bf16 (no routing near-tie that a lossy store type flips)")
    p.add_argument("--max-tries", type=int, default=1, help="seeds --stable-routing may try")
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--prompts", default="chat,long", help="golden prompts of BASE to reuse")
    p.add_argument("--new-tokens", type=int, default=24)
    p.add_argument("--device", default="cpu", help="where transformers runs (cpu, or cuda: TF32 is turned off)")
    args = p.parse_args()
    if not args.verify and not (args.base and args.out):
        p.error("--base and --out are needed (or --verify)")
    return args


def read_config(base, overrides):
    with open(os.path.join(base, "config.json")) as f:
        config = json.load(f)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            sys.exit(f"--set {item}: expected KEY=JSON")
        try:
            config[key] = json.loads(value)
        except json.JSONDecodeError:
            config[key] = value  # a bare string
    return config


def hf_config(config, layers):
    """The transformers config of the unquantized float32 model with `layers` decoder layers, read from a
    config.json as from_pretrained reads a checkpoint's."""
    fields = {k: v for k, v in config.items() if k not in ("quantization_config", "torch_dtype", "dtype")}
    fields["num_hidden_layers"] = layers
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(fields, f)
        return AutoConfig.from_pretrained(tmp)


def split_fused_experts(names):
    """transformers 5 keeps a layer's experts as 3-D gate_up_proj [E, 2I, H] and down_proj [E, H, I] and
    saves them per expert; should a version save them fused, they are split here into the Hub's names."""
    for name in [n for n in names if re.search(r"\.experts\.(gate_up_proj|down_proj)$", n)]:
        shape = names.pop(name)
        prefix, which = name.rsplit(".", 1)
        for e in range(shape[0]):
            if which == "gate_up_proj":
                names[f"{prefix}.{e}.gate_proj.weight"] = (shape[1] // 2, shape[2])
                names[f"{prefix}.{e}.up_proj.weight"] = (shape[1] // 2, shape[2])
            else:
                names[f"{prefix}.{e}.down_proj.weight"] = (shape[1], shape[2])
        print(f"note: {name} was saved fused; stored per expert", file=sys.stderr)


def tensor_names_and_shapes(config, layers):
    """Every tensor of the checkpoint as transformers saves it (the Hub layout: one tensor per expert)."""
    model = AutoModelForCausalLM.from_config(hf_config(config, layers), dtype=torch.float32)
    names = {}
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        for f in sorted(os.listdir(tmp)):
            if f.endswith(".safetensors"):
                for name, t in load_file(os.path.join(tmp, f)).items():
                    names[name] = tuple(t.shape)
    split_fused_experts(names)
    bad = {n: s for n, s in names.items() if len(s) > 2}
    if bad:
        sys.exit(f"tensors of more than 2 dimensions, which no Hub checkpoint of this family holds: {bad}")
    return names


def mtp_tensors(config, names):
    """DeepSeek-V3's multi-token-prediction layers: the decoder layer (already in `names`, built as layer L)
    plus enorm, hnorm, eh_proj [H, 2H] and shared_head.norm, as in the release (without its copies of
    embed_tokens and lm_head)."""
    h, first = config["hidden_size"], config["num_hidden_layers"]
    for m in range(first, first + config.get("num_nextn_predict_layers", 0)):
        p = f"model.layers.{m}."
        names[p + "enorm.weight"] = (h,)
        names[p + "hnorm.weight"] = (h,)
        names[p + "eh_proj.weight"] = (h, 2 * h)
        names[p + "shared_head.norm.weight"] = (h,)


def random_tensor(name, shape, seed, init_std):
    g = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
    x = torch.randn(shape, generator=g, dtype=torch.float32)
    if name.endswith("norm.weight"):
        return 1.0 + 0.1 * x
    if "embed_tokens" in name:
        return x
    if name.endswith("e_score_correction_bias"):
        return 0.05 * x
    return init_std * x


def quantize_fp8(w, block_rows, block_cols):
    """float8_e4m3fn values and float32 weight_scale_inv [ceil(rows/br), ceil(cols/bc)]; partial edge blocks
    take the amax of the values they hold."""
    rows, cols = w.shape
    sr, sc = -(-rows // block_rows), -(-cols // block_cols)
    padded = torch.zeros(sr * block_rows, sc * block_cols, dtype=torch.float32)
    padded[:rows, :cols] = w
    blocks = padded.view(sr, block_rows, sc, block_cols)
    amax = blocks.abs().amax(dim=(1, 3))
    scale = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax))
    q = (blocks / scale[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).view_as(padded)[:rows, :cols]
    return q.contiguous().to(torch.float8_e4m3fn), scale.contiguous()


def dequantize_fp8(q, scale_inv, block_rows, block_cols):
    rows, cols = q.shape
    s = scale_inv.repeat_interleave(block_rows, 0).repeat_interleave(block_cols, 1)[:rows, :cols]
    return q.to(torch.float32) * s


def storage_dtype(config):
    name = config.get("torch_dtype") or config.get("dtype") or "bfloat16"
    return {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[name]


def make_weights(config, args, seed):
    """(the tensors as stored, the float32 weights they stand for) by name."""
    layers = config["num_hidden_layers"]
    mtp = config.get("num_nextn_predict_layers", 0) if config["model_type"] == "deepseek_v3" else 0
    names = tensor_names_and_shapes(config, layers + mtp)
    if mtp:
        mtp_tensors(config, names)
    q = config.get("quantization_config") or {}
    fp8 = args.fp8 == "on" or (args.fp8 == "auto" and q.get("quant_method") == "fp8")
    block_rows, block_cols = q.get("weight_block_size", [128, 128])
    pattern = re.compile(args.fp8_pattern)
    dtype = storage_dtype(config)
    stored, weights = {}, {}
    for name in sorted(names):
        w = random_tensor(name, names[name], seed, args.init_std)
        if fp8 and w.dim() == 2 and pattern.search(name):
            values, scale = quantize_fp8(w, block_rows, block_cols)
            stored[name], stored[name + "_scale_inv"] = values, scale
            weights[name] = dequantize_fp8(values, scale, block_rows, block_cols)
        else:
            stored[name] = w.to(dtype).contiguous()
            weights[name] = stored[name].to(torch.float32)
    # The MTP layers are not part of transformers' model: the golden is of the first `layers` only.
    beyond = re.compile(r"model\.layers\.(\d+)\.")
    weights = {n: w for n, w in weights.items() if not (beyond.match(n) and int(beyond.match(n).group(1)) >= layers)}
    return stored, weights, fp8


def write_checkpoint(out, stored, shards):
    names = sorted(stored)
    per = -(-len(names) // shards)
    index = {}
    for i in range(shards):
        file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = names[i * per:(i + 1) * per]
        save_file({n: stored[n] for n in part}, os.path.join(out, file), metadata={"format": "pt"})
        index.update({n: file for n in part})
    total = sum(t.numel() * t.element_size() for t in stored.values())
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": index}, f, indent=2)
    return total


def weights_from_disk(folder, config):
    """The float32 weights a fixture's shards stand for (FP8 dequantized), its MTP layers left out."""
    disk = {}
    for f in sorted(os.listdir(folder)):
        if SHARD.fullmatch(f) or f == "model.safetensors":
            disk.update(load_file(os.path.join(folder, f)))
    block_rows, block_cols = (config.get("quantization_config") or {}).get("weight_block_size", [128, 128])
    layer = re.compile(r"model\.layers\.(\d+)\.")
    weights = {}
    for name, t in disk.items():
        m = layer.match(name)
        if name.endswith("_scale_inv") or (m and int(m.group(1)) >= config["num_hidden_layers"]):
            continue
        scale = disk.get(name + "_scale_inv")
        weights[name] = t.to(torch.float32) if scale is None else dequantize_fp8(t, scale, block_rows, block_cols)
    return weights


def load_reference(config, weights, device):
    """transformers' model over the float32 weights, loaded the way a checkpoint is."""
    with tempfile.TemporaryDirectory() as tmp:
        hf_config(config, config["num_hidden_layers"]).save_pretrained(tmp)
        save_file(weights, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
        model, info = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32, attn_implementation="eager",
                                                           output_loading_info=True)
    loading = {k: sorted(map(str, info.get(k, []))) for k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    loading = {"missing": loading["missing_keys"], "unexpected": loading["unexpected_keys"],
               "mismatched": loading["mismatched_keys"]}
    return model.to(device).eval(), loading


def rel_l2(a, b):
    return ((a - b).norm(dim=-1) / b.norm(dim=-1)).max().item()


@torch.no_grad()
def golden_of(model, prompt, new_tokens, device):
    ids = prompt.to(torch.long).to(device)[None]
    out = model(input_ids=ids, use_cache=True)
    prefill = out.logits[0].float()
    past, row = out.past_key_values, prefill[-1]
    gen_ids, gen_rows = [], []
    for i in range(new_tokens):
        token = int(row.argmax())
        gen_ids.append(token)
        gen_rows.append(row)
        if i + 1 < new_tokens:
            out = model(input_ids=torch.tensor([[token]], device=device), past_key_values=past, use_cache=True)
            past, row = out.past_key_values, out.logits[0, -1].float()
    gen = torch.stack(gen_rows)
    # The same rows recomputed without the cache: how far the cached path drifts.
    full = model(input_ids=torch.cat([ids, torch.tensor([gen_ids[:-1]], device=device)], dim=1), use_cache=False)
    full = full.logits[0].float()
    everything = torch.cat([prefill, gen])
    top2 = everything.topk(2, dim=-1).values
    stats = {"len": int(prompt.numel()),
             "kv_consistency_rel_err": max(rel_l2(gen, full[prompt.numel() - 1:]), rel_l2(prefill, full[:prompt.numel()])),
             "min_top1_margin": (top2[:, 0] - top2[:, 1]).min().item(),
             "logit_std": everything.std().item()}
    tensors = {"prompt_ids": prompt.to(torch.int32), "prefill_logits": prefill.cpu().contiguous(),
               "gen_ids": torch.tensor(gen_ids, dtype=torch.int32), "gen_logits": gen.cpu().contiguous()}
    return tensors, stats


def verify(args):
    with open(os.path.join(args.verify, "config.json")) as f:
        config = json.load(f)
    model, loading = load_reference(config, weights_from_disk(args.verify, config), args.device)
    stored = load_file(os.path.join(args.verify, "golden.safetensors"))
    result = {"loading": loading}
    for name in args.prompts.split(","):
        mine, _ = golden_of(model, stored[name + ".prompt_ids"], args.new_tokens, args.device)
        result[name] = {"prefill_rel_l2": rel_l2(mine["prefill_logits"], stored[name + ".prefill_logits"]),
                        "gen_ids_equal": torch.equal(stored[name + ".gen_ids"], mine["gen_ids"]),
                        "gen_rel_l2": rel_l2(mine["gen_logits"], stored[name + ".gen_logits"])}
    print(json.dumps({"verify " + os.path.basename(os.path.normpath(args.verify)): result}, indent=1))


def routing_of(model, config, ids, device):
    """The router's choice at every MoE layer and position of `ids` (one full forward): the chosen experts
    [T, k] (sorted) and the margins at the group cut and at the expert cut (score of the last chosen minus
    that of the first passed over; the choice is the sigmoid or softmax score plus any
    e_score_correction_bias, limited to the best groups for DeepSeek's group-limited routers)."""
    experts = config.get("n_routed_experts") or config.get("num_experts") or config.get("num_local_experts")
    gates = [(n, m) for n, m in model.named_modules() if re.search(r"\.(mlp|block_sparse_moe)\.gate$", n)]
    logits = {}

    def hook(name):
        def record(module, inputs, output):
            outs = [output] if torch.is_tensor(output) else [o for o in output if torch.is_tensor(o)]
            logits[name] = next(o for o in outs if o.shape[-1] == experts).detach().float().reshape(-1, experts)
        return record

    handles = [m.register_forward_hook(hook(n)) for n, m in gates]
    try:
        with torch.no_grad():
            model(input_ids=ids.to(torch.long).to(device)[None], use_cache=False)
    finally:
        for h in handles:
            h.remove()
    k, groups = config["num_experts_per_tok"], config.get("n_group") or 1
    best_groups, method = config.get("topk_group") or 1, config.get("topk_method")
    result = []
    for name, module in gates:
        x = logits[name]
        choice = torch.sigmoid(x) if config.get("scoring_func") == "sigmoid" else torch.softmax(x, dim=-1)
        bias = getattr(module, "e_score_correction_bias", None)
        if bias is not None:
            choice = choice + bias.float()
        group_margin = torch.full((x.shape[0],), float("inf"), device=x.device)
        if groups > 1 and method in ("noaux_tc", "group_limited_greedy") and best_groups < groups:
            per_group = choice.view(x.shape[0], groups, experts // groups)
            score = per_group.topk(2, dim=-1).values.sum(-1) if method == "noaux_tc" else per_group.amax(-1)
            ranked = score.sort(dim=-1, descending=True)
            group_margin = ranked.values[:, best_groups - 1] - ranked.values[:, best_groups]
            keep = torch.zeros_like(score, dtype=torch.bool).scatter(1, ranked.indices[:, :best_groups], torch.ones_like(ranked.indices[:, :best_groups], dtype=torch.bool))
            choice = choice.masked_fill(~keep.repeat_interleave(experts // groups, dim=1), float("-inf"))
        ranked = choice.sort(dim=-1, descending=True)
        expert_margin = ranked.values[:, k - 1] - ranked.values[:, k]
        expert_margin = torch.where(torch.isfinite(expert_margin), expert_margin, torch.full_like(expert_margin, float("inf")))
        result.append((ranked.indices[:, :k].sort(dim=-1).values.cpu(), group_margin.cpu(), expert_margin.cpu()))
    return result


def attempt(config, args, seed):
    """One model of `seed`: its tensors as stored, its golden, and how its routing holds up."""
    stored, weights, fp8 = make_weights(config, args, seed)
    model, loading = load_reference(config, weights, args.device)
    base_golden = load_file(os.path.join(args.base, "golden.safetensors"))
    golden, prompts, sequences = {}, {}, []
    for name in args.prompts.split(","):
        tensors, prompts[name] = golden_of(model, base_golden[name + ".prompt_ids"], args.new_tokens, args.device)
        golden.update({f"{name}.{k}": v for k, v in tensors.items()})
        sequences.append(torch.cat([tensors["prompt_ids"], tensors["gen_ids"][:-1]]))
    # The same model with every weight rounded to bf16 (what a bf16 copy of FP8 weights holds): a routing
    # decision it changes sits on a near-tie that any lossy store type may flip, so that the store's logits
    # there differ from the golden by far more than its representation error.
    rounded, _ = load_reference(config, {n: w.to(torch.bfloat16).to(torch.float32) for n, w in weights.items()}, args.device)
    changed = decisions = 0
    group_margin = expert_margin = float("inf")
    for ids in sequences:
        for (exact, gm, em), (near, _, _) in zip(routing_of(model, config, ids, args.device),
                                                 routing_of(rounded, config, ids, args.device)):
            changed += int((exact != near).any(dim=-1).sum())
            decisions += exact.shape[0]
            group_margin, expert_margin = min(group_margin, gm.min().item()), min(expert_margin, em.min().item())
    routing = {"decisions": decisions, "changed_by_bf16_rounding": changed, "min_group_margin": group_margin,
               "min_expert_margin": expert_margin}
    return stored, weights, fp8, model, loading, golden, prompts, routing


def main():
    args = parse_args()
    if args.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    if args.verify:
        return verify(args)
    if os.path.exists(args.out) and os.listdir(args.out):
        sys.exit(f"{args.out} is not empty")
    config = read_config(args.base, args.set)

    for seed in range(args.seed, args.seed + args.max_tries):
        stored, weights, fp8, model, loading, golden, prompts, routing = attempt(config, args, seed)
        print(f"seed {seed}: routing {json.dumps(routing)}", file=sys.stderr)
        if not args.stable_routing or routing["changed_by_bf16_rounding"] == 0:
            break
    else:
        sys.exit(f"no seed in [{args.seed}, {args.seed + args.max_tries}) routes the golden prompts the same with "
                 "the weights rounded to bf16; allow more --max-tries")

    os.makedirs(args.out, exist_ok=True)
    total = write_checkpoint(args.out, stored, args.shards)
    # The golden is of the shards as read back, which must be exactly the weights it was made with.
    from_disk = weights_from_disk(args.out, config)
    if from_disk.keys() != weights.keys() or any(not torch.equal(from_disk[n], w) for n, w in weights.items()):
        sys.exit("the shards do not read back as the weights the golden was made with")
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for f in sorted(os.listdir(args.base)):
        if f not in MADE and not SHARD.fullmatch(f) and os.path.isfile(os.path.join(args.base, f)):
            shutil.copy(os.path.join(args.base, f), os.path.join(args.out, f))
    save_file(golden, os.path.join(args.out, "golden.safetensors"))
    with open(os.path.join(args.base, "golden.json")) as f:
        meta = json.load(f)
    meta["prompts"], meta["loading"] = prompts, loading
    with open(os.path.join(args.out, "golden.json"), "w") as f:
        json.dump(meta, f, ensure_ascii=False)

    size = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    report = {os.path.basename(os.path.normpath(args.out)): {
        "seed": seed, "loading": loading, "prompts": prompts, "routing": routing, "bytes": total,
        "folder_bytes": size, "fp8": fp8, "fp8_tensors": sum(1 for t in stored.values() if t.dtype == torch.float8_e4m3fn),
        "attn_implementation": model.config._attn_implementation,
        "torch": torch.__version__, "transformers": __import__("transformers").__version__}}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
