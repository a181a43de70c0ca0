#!/usr/bin/env python3
"""Makes tests/fixtures/tiny-kimi-k2-int4: a tiny Kimi-K2-Thinking, a DeepSeek-V3 whose routed experts are
quantized with compressed-tensors as the release ships them, and the outputs of Hugging Face transformers on
it as the golden reference.

    /tmp/tvenv/bin/python scripts/make_compressed_tensors_fixture.py --base tests/fixtures/tiny-deepseekv3-fp8 \\
        --out tests/fixtures/tiny-kimi-k2-int4
    /tmp/tvenv/bin/python scripts/make_compressed_tensors_fixture.py --verify tests/fixtures/tiny-kimi-k2-int4

Needs torch, transformers (5.x), safetensors and compressed-tensors (pip install compressed-tensors): the
experts are quantized and packed by compressed-tensors' own functions (calculate_qparams, quantize,
pack_to_int32), and read back by its unpack_from_int32, so the layout is the package's, not this script's
idea of it.

The model: BASE's config (tiny-deepseekv3-fp8: hidden 128, MLA, 3 layers of which the first is dense) with
Kimi-K2's routing (n_group 1, topk_group 1, routed_scaling_factor 2.827, no MTP layer) and rope scaling,
8 routed experts (top 4) of width 64, a dense MLP of 256, model_type "kimi_k2" (Tandem reads it as
deepseek_v3, as the release's auto_map does; transformers is given deepseek_v3). Random seeded weights made
by make_fixture.py's Weights (the same names give the same values), stored in bf16, except every routed
expert matrix X.weight, which is stored as the release stores it:
    X.weight_packed  int32 [out, in / 8]  (pack_to_int32 of q in [-8, 7])
    X.weight_scale   bf16 [out, in / 32]  (symmetric minmax: group absmax / 7.5, rounded to bf16)
    X.weight_shape   int32 [2]
quantization_config is the release's: compressed-tensors, pack-quantized, one group of int 4-bit symmetric
weights in groups of 32, with `ignore` naming everything else (lm_head, attention, shared experts, the dense
MLP); routers (mlp.gate) are no Linear in the release's module tree and stay bf16 too.

The golden (golden.safetensors, golden.json: make_fixture.py's format, tests/fixtures/README.md) comes from
transformers in float32 with eager attention over the weights exactly as stored: bf16 widened, the experts
dequantized (q x scale in float32, which is exact). --verify recomputes it from the stored files.
"""
import argparse
import contextlib
import json
import os
import re
import shutil
import sys
import types

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixture as mf  # noqa: E402

from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32, unpack_from_int32  # noqa: E402
from compressed_tensors.quantization import QuantizationArgs  # noqa: E402
from compressed_tensors.quantization.lifecycle.forward import quantize  # noqa: E402
from compressed_tensors.quantization.utils import calculate_qparams  # noqa: E402

GROUP = 32
ROUTED = re.compile(r"\.mlp\.experts\.\d+\.(gate_proj|up_proj|down_proj)\.weight$")
ARGS = QuantizationArgs(num_bits=4, type="int", symmetric=True, strategy="group", group_size=GROUP)

# Kimi-K2-Thinking's config.json, at this fixture's widths.
KIMI = {
    "model_type": "kimi_k2",
    "architectures": ["DeepseekV3ForCausalLM"],
    "n_routed_experts": 8, "num_experts_per_tok": 4, "n_group": 1, "topk_group": 1,
    "moe_intermediate_size": 64, "intermediate_size": 256, "first_k_dense_replace": 1,
    "num_nextn_predict_layers": 0, "routed_scaling_factor": 2.827, "rope_theta": 50000.0,
    "max_position_embeddings": 262144,
    "rope_scaling": {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 64.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                     "original_max_position_embeddings": 4096, "type": "yarn"},
    "quantization_config": {
        "config_groups": {"group_0": {
            "input_activations": None, "output_activations": None, "targets": ["Linear"],
            "weights": {"actorder": None, "block_structure": None, "dynamic": False, "group_size": GROUP,
                        "num_bits": 4, "observer": "minmax", "observer_kwargs": {}, "strategy": "group",
                        "symmetric": True, "type": "int"}}},
        "format": "pack-quantized",
        "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"],
        "kv_cache_scheme": None, "quant_method": "compressed-tensors", "quantization_status": "compressed"},
    "torch_dtype": "bfloat16",
}


def reference_config(config):
    """The config transformers is given: deepseek_v3, unquantized."""
    return {**{k: v for k, v in config.items() if k != "quantization_config"}, "model_type": "deepseek_v3"}


def quantize_int4(w):
    """compressed-tensors' int4 of w [out, in]: q int8 [out, in] in [-8, 7] and bf16 scales [out, in / 32]."""
    rows, cols = w.shape
    if cols % GROUP:
        sys.exit(f"int4 groups of {GROUP} need an input width that is a multiple of {GROUP}, not {cols}")
    w = w.to(torch.bfloat16)  # the unquantized model's weights, whose dtype the scales take
    g = w.view(rows, cols // GROUP, GROUP)
    scale, zero = calculate_qparams(g.amin(-1), g.amax(-1), ARGS)
    scale = scale.to(torch.bfloat16)
    q = quantize(x=w, scale=scale, zero_point=zero, args=ARGS, dtype=torch.int8)
    return q, scale


def dequantize_int4(packed, scale, shape):
    q = unpack_from_int32(packed, 4, torch.Size(shape))
    return (q.view(shape[0], -1, GROUP).to(torch.float32) * scale.to(torch.float32)[..., None]).view(shape)


class Int4Weights(mf.Weights):
    """make_fixture's weights with the routed experts in compressed-tensors int4."""

    def is_int4(self, name):
        return ROUTED.search(name) is not None

    def stored(self, name):
        if not self.is_int4(name):
            return super().stored(name)
        q, scale = quantize_int4(mf.random_tensor(name, self.shapes[name], self.seed, self.init_std))
        base = name[:-len(".weight")] + ".weight"
        return {base + "_packed": pack_to_int32(q, 4), base + "_scale": scale.contiguous(),
                base + "_shape": torch.tensor(list(q.shape), dtype=torch.int32)}

    def float32(self, name):
        s = self.stored(name)
        if name + "_packed" in s:
            return dequantize_int4(s[name + "_packed"], s[name + "_scale"], self.shapes[name])
        return super().float32(name)

    def stored_names(self):
        plain = [n for n in self.shapes if not self.is_int4(n)]
        packed = [n + p for n in self.shapes if self.is_int4(n) for p in ("_packed", "_scale", "_shape")]
        return sorted(plain + packed)

    def base_name(self, stored_name):
        base = re.sub(r"_(packed|scale|shape)$", "", stored_name)
        return base if base in self.shapes else stored_name


def weights_from_disk(folder, config):
    """(name, float32 weight) of every tensor transformers' model holds, the experts unpacked by compressed-tensors."""
    files = sorted(f for f in os.listdir(folder) if mf.SHARD.fullmatch(f))
    with contextlib.ExitStack() as stack:
        handles = [stack.enter_context(safe_open(os.path.join(folder, f), framework="pt")) for f in files]
        where = {name: h for h in handles for name in h.keys()}
        for name in sorted(where):
            if name.endswith(("_scale", "_shape")):
                continue
            t = where[name].get_tensor(name)
            if name.endswith("_packed"):
                base = name[:-len("_packed")]
                shape = where[base + "_shape"].get_tensor(base + "_shape").tolist()
                yield base, dequantize_int4(t, where[base + "_scale"].get_tensor(base + "_scale"), shape)
            else:
                yield name, t.to(torch.float32)


@torch.no_grad()
def check_read_back(out, model):
    views = mf.hub_views(model)
    seen = set()
    for name, w in weights_from_disk(out, None):
        seen.add(name)
        if name not in views or not torch.equal(views[name], w):
            sys.exit(f"{name} does not read back as the weight the golden was made with")
    if seen != set(views):
        sys.exit(f"the shards lack {sorted(set(views) - seen)[:4]}, which the golden was made with")


def verify(folder, prompts, new_tokens):
    with open(os.path.join(folder, "config.json")) as f:
        config = reference_config(json.load(f))
    model, loading = mf.reference_model(config, weights_from_disk(folder, config), "cpu")
    stored = load_file(os.path.join(folder, "golden.safetensors"))
    result = {"loading": loading}
    for name in prompts:
        mine, _, _, _ = mf.golden_of(model, config, stored[name + ".prompt_ids"], new_tokens, "cpu")
        result[name] = {"prefill_rel_l2": mf.rel_l2(mine["prefill_logits"], stored[name + ".prefill_logits"]),
                        "gen_ids_equal": torch.equal(stored[name + ".gen_ids"], mine["gen_ids"]),
                        "gen_rel_l2": mf.rel_l2(mine["gen_logits"], stored[name + ".gen_logits"])}
    print(json.dumps({"verify " + os.path.basename(os.path.normpath(folder)): result}, indent=1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", help="fixture folder to take the config, tokenizer and prompts from")
    p.add_argument("--out", help="folder to write (created; must be empty or absent)")
    p.add_argument("--verify", metavar="FIXTURE", help="recompute FIXTURE's golden from its stored weights")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--new-tokens", type=int, default=24)
    args = p.parse_args()
    prompts = ["chat", "long"]
    if args.verify:
        return verify(args.verify, prompts, args.new_tokens)
    if not (args.base and args.out):
        p.error("--base and --out are needed (or --verify)")
    if os.path.exists(args.out) and os.listdir(args.out):
        sys.exit(f"{args.out} is not empty")

    with open(os.path.join(args.base, "config.json")) as f:
        config = {**json.load(f), **KIMI}
    reference = reference_config(config)
    options = types.SimpleNamespace(fp8="off", fp8_pattern=mf.DEFAULT_FP8_PATTERN, init_std=0.08, device="cpu",
                                    base=args.base, prompts=",".join(prompts), new_tokens=args.new_tokens)
    weights = Int4Weights(reference, options, args.seed)
    model, loading = mf.reference_model(reference, ((n, weights.float32(n)) for n in weights.reference_names()), "cpu")
    base_golden = load_file(os.path.join(args.base, "golden.safetensors"))
    golden, stats, sequences, exact = {}, {}, [], []
    for name in prompts:
        tensors, stats[name], scores, router_layers = mf.golden_of(model, reference, base_golden[name + ".prompt_ids"],
                                                                   args.new_tokens, "cpu")
        golden.update({f"{name}.{k}": v for k, v in tensors.items()})
        sequences.append(torch.cat([tensors["prompt_ids"], tensors["gen_ids"][:-1]]))
        exact.append(scores)

    os.makedirs(args.out, exist_ok=True)
    total = mf.write_checkpoint(args.out, weights, 2)
    check_read_back(args.out, model)
    routing = mf.routing_check(reference, options, weights, model, sequences, exact)

    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for f in sorted(os.listdir(args.base)):
        if f not in mf.MADE and not mf.SHARD.fullmatch(f) and os.path.isfile(os.path.join(args.base, f)):
            shutil.copy(os.path.join(args.base, f), os.path.join(args.out, f))
    save_file(golden, os.path.join(args.out, "golden.safetensors"))
    with open(os.path.join(args.base, "golden.json")) as f:
        meta = json.load(f)
    meta["prompts"], meta["loading"], meta["router_layers"], meta["routing"] = stats, loading, router_layers, routing
    with open(os.path.join(args.out, "golden.json"), "w") as f:
        json.dump(meta, f, ensure_ascii=False)
    size = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    print(json.dumps({os.path.basename(os.path.normpath(args.out)): {
        "seed": args.seed, "loading": loading, "prompts": stats, "routing": routing, "bytes": total,
        "folder_bytes": size, "int4_tensors": sum(1 for n in weights.shapes if weights.is_int4(n)),
        "torch": torch.__version__, "transformers": __import__("transformers").__version__}}, indent=1))


if __name__ == "__main__":
    main()
