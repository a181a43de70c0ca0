#!/usr/bin/env python3
"""Makes a fixture model for tests/fixtures: a tiny checkpoint with random weights in the on-disk layout
of the public releases, and the outputs of Hugging Face transformers on it as the golden reference.

    python3 scripts/make_fixture.py --base tests/fixtures/tiny-deepseekv3-fp8 --out OUT/tiny-deepseekv3-fp8-edge \
        --set hidden_size=192 --set moe_intermediate_size=96 --set intermediate_size=320 \
        --set n_routed_experts=8 --set topk_group=3 --seed 16
    python3 scripts/make_fixture.py --verify tests/fixtures/tiny-deepseekv3-fp8    # the reference check
    python3 scripts/make_fixture.py --preset qwen3-30b-a3b-3l --out /work/realwidth/qwen3-30b-a3b-3l

(tiny-deepseekv3-fp8-edge: 8 experts rather than 16 keep the folder under 4 MB; seed 16 is the second seed
from 0 that --stable-routing accepts, see tests/fixtures/README.md.)

--preset NAME makes a real-width checkpoint (PRESETS below: Qwen3-30B-A3B, DeepSeek-V3 with FP8 and
DeepSeek-V2-Lite widths, a few layers, the tiny fixture's tokenizer and vocabulary): the preset supplies
--base, the --set overrides (given ones are applied after it), --init-std and --shards. These are GBs:
write them outside the repository. At these sizes nothing is held twice: each tensor is made from its name
when it is needed (filling the model, writing a shard), so the peak memory is transformers' float32 model
plus a few of the largest tensor's temporaries (measured peaks: qwen3-30b-a3b-3l 8.0 GB, deepseek-v2-lite-3l
6.0 GB, deepseek-v3-2l-fp8 19.6 GB, whose 18432 x 7168 FP8 dense matrices are quantized in float32).

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
      (fp8 value x weight_scale_inv in float32). transformers' own name conversion places them: each
      checkpoint tensor is copied into its view of the model's tensors that transformers' save-time
      conversion gives (revert_weight_conversion, the inverse of from_pretrained's: fused expert tensors
      split per expert, renamed keys), one tensor at a time.
      {chat,long}.router_scores [MoE layers, P, E] (F32): the reference's routing choice scores (softmax or
      sigmoid of the router logits, plus DeepSeek-V3's e_score_correction_bias, before any group limit) at
      the P = len(prompt_ids) + len(gen_ids) - 1 positions of prompt_ids + gen_ids[:-1] (one forward without
      the cache): prefill row t is position t, gen row i position T - 1 + i. scripts/check_golden.py takes
      the top-k margins from them.
  golden.json          the base's, with this model's `loading` (the checkpoint names transformers' model
      lacks (unexpected), those it holds but the checkpoint does not (missing), shapes that differ
      (mismatched): all empty when every weight landed), `router_layers` (the layer of each row of
      router_scores), `routing` (as in the report below) and `prompts` (length, the largest relative
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
import contextlib
import json
import math
import os
import re
import resource
import shutil
import sys
import tempfile
import zlib

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM
from transformers.core_model_loading import revert_weight_conversion
from transformers.initialization import no_init_weights

# The files of a fixture that this script writes itself; everything else in BASE is copied.
MADE = {"config.json", "golden.json", "golden.safetensors", "model.safetensors", "model.safetensors.index.json"}
SHARD = re.compile(r"model-\d+-of-\d+\.safetensors")
# DeepSeek-V3's release: attention projections (but kv_a_proj_with_mqa, kept in bf16 as in
# tiny-deepseekv3-fp8), every MLP / expert matrix, and the MTP layer's eh_proj are FP8; embeddings,
# lm_head, the router and the norms are not.
DEFAULT_FP8_PATTERN = (r"\.self_attn\.(q_proj|q_a_proj|q_b_proj|kv_b_proj|o_proj)\.weight$"
                       r"|\.mlp\..*(gate_proj|up_proj|down_proj)\.weight$|\.eh_proj\.weight$")
FP8_MAX = 448.0
# gpt-oss's fused expert matrices as transformers holds them: gate_up_proj [E, H, 2I] (gate and up columns
# interleaved), down_proj [E, I, H]; its release stores them transposed ([E, out, in]) in MXFP4.
MXFP4_EXPERTS = re.compile(r"\.mlp\.experts\.(gate_up_proj|down_proj)$")
# FP4 e2m1: a nibble's sign bit 3 and magnitude index (bits 0-2).
FP4_MAGNITUDES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "fixtures")

# Real widths (each model's config.json on the Hub), a few layers, the base fixture's 1024-token vocabulary
# and tokenizer. init_std keeps hidden x init_std^2 near the tiny fixtures' 0.8 (128 x 0.08^2), so the
# logits spread as theirs do (std ~0.9).
PRESETS = {
    # Qwen/Qwen3-30B-A3B: 3 of 48 layers; 1.81 G expert weights, 3.6 GB in bf16, 7.3 GB as float32.
    "qwen3-30b-a3b-3l": {"base": "tiny-qwen3moe", "init_std": 0.02, "shards": 4, "set": {
        "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128,
        "num_experts_per_tok": 8, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
        "num_hidden_layers": 3}},
    # deepseek-ai/DeepSeek-V3 with its FP8 128x128 blocks: 1 dense + 1 MoE layer, 64 of the 256 routed
    # experts (8 groups of 8, 4 kept, top-8), no MTP layer (tiny-deepseekv3-fp8 has one); 3.7 G weights,
    # 3.8 GB on disk, 14.6 GB as float32.
    "deepseek-v3-2l-fp8": {"base": "tiny-deepseekv3-fp8", "init_std": 0.01, "shards": 4, "set": {
        "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048, "n_routed_experts": 64,
        "n_shared_experts": 1, "num_experts_per_tok": 8, "n_group": 8, "topk_group": 4, "first_k_dense_replace": 1,
        "num_hidden_layers": 2, "num_nextn_predict_layers": 0, "num_attention_heads": 128, "num_key_value_heads": 128,
        "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}},
    # deepseek-ai/DeepSeek-V2-Lite (MLA without q LoRA, softmax router, 2 shared experts): 1 dense + 2 MoE
    # layers of its 64 experts, top-6; 1.2 G weights, 2.4 GB in bf16, 4.8 GB as float32.
    "deepseek-v2-lite-3l": {"base": "tiny-deepseekv2", "init_std": 0.02, "shards": 4, "set": {
        "hidden_size": 2048, "intermediate_size": 10944, "moe_intermediate_size": 1408, "n_routed_experts": 64,
        "n_shared_experts": 2, "num_experts_per_tok": 6, "first_k_dense_replace": 1, "num_hidden_layers": 3,
        "num_attention_heads": 16, "num_key_value_heads": 16, "q_lora_rank": None, "kv_lora_rank": 512,
        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}},
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", help="fixture folder to take the config, tokenizer and prompts from")
    p.add_argument("--out", help="folder to write (created; must be empty or absent)")
    p.add_argument("--preset", choices=sorted(PRESETS),
                   help="a real-width checkpoint: supplies --base, --set overrides, --init-std and --shards")
    p.add_argument("--verify", metavar="FIXTURE",
                   help="instead: recompute FIXTURE's golden from its stored weights and print how far its "
                        "golden.safetensors is from it (checks this script's reference against a fixture's)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                   help="config.json override, e.g. hidden_size=192 or rope_scaling=null (repeatable)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--init-std", type=float, help="standard deviation of the weight matrices (0.08; a preset's own)")
    p.add_argument("--fp8", choices=["auto", "on", "off"], default="auto",
                   help="quantize to float8_e4m3fn with block scales (auto: when the config's quantization_config is fp8)")
    p.add_argument("--fp8-pattern", default=DEFAULT_FP8_PATTERN, help="regex of the tensor names stored as FP8")
    p.add_argument("--stable-routing", action="store_true",
                   help="take the first seed from --seed on whose golden prompts route the same with every weight "
                        "rounded to bf16 (no routing near-tie that a lossy store type flips)")
    p.add_argument("--max-tries", type=int, default=1, help="seeds --stable-routing may try")
    p.add_argument("--shards", type=int, help="safetensors shards (2; a preset's own)")
    p.add_argument("--prompts", default="chat,long", help="golden prompts of BASE to reuse")
    p.add_argument("--new-tokens", type=int, default=24)
    p.add_argument("--device", default="cpu", help="where transformers runs (cpu, or cuda: TF32 is turned off)")
    args = p.parse_args()
    preset = PRESETS.get(args.preset, {})
    if preset:
        args.base = args.base or os.path.join(FIXTURES, preset["base"])
        args.set = [f"{k}={json.dumps(v)}" for k, v in preset["set"].items()] + args.set
    args.init_std = args.init_std if args.init_std is not None else preset.get("init_std", 0.08)
    args.shards = args.shards or preset.get("shards", 2)
    if not args.verify and not (args.base and args.out):
        p.error("--base (or --preset) and --out are needed (or --verify)")
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


def hub_views(model):
    """Every tensor of transformers' model under its name in a Hub checkpoint, as a view into the model's
    own tensors: the state dict through transformers' save-time conversion (revert_weight_conversion,
    which save_pretrained applies: fused expert tensors split per expert, keys renamed), the inverse of
    how from_pretrained places a checkpoint's tensors. Copying a checkpoint tensor into its view loads it,
    one tensor at a time, with no copy of the model's size (from_pretrained stacks a layer's experts from
    copies of them: 2x the experts' float32 size at real widths)."""
    state = model.state_dict()
    # The conversion makes each chunk of a fused gate_up_proj contiguous, a copy; without that it is a view.
    contiguous = torch.Tensor.contiguous
    torch.Tensor.contiguous = lambda self, *args, **kwargs: self
    try:
        views = revert_weight_conversion(model, dict(state))
    finally:
        torch.Tensor.contiguous = contiguous
    if not any(t.is_meta for t in state.values()):
        owners = {t.untyped_storage().data_ptr() for t in state.values()}
        copies = sorted(n for n, v in views.items() if v.untyped_storage().data_ptr() not in owners)
        if copies:
            sys.exit(f"transformers' conversion gives copies, not views, for {copies[:4]}...: this script cannot "
                     "load through them; load with from_pretrained instead")
    return views


def tensor_names_and_shapes(config, layers):
    """Every tensor of the checkpoint as transformers saves it (the Hub layout: one tensor per expert), from
    a model on the meta device (nothing allocated)."""
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config(config, layers), dtype=torch.float32)
    names = {name: tuple(t.shape) for name, t in hub_views(model).items()}
    if config["model_type"] != "gpt_oss":  # gpt-oss's release keeps each layer's experts fused
        split_fused_experts(names)
    bad = {n: s for n, s in names.items() if len(s) > 2 and not MXFP4_EXPERTS.search(n)}
    if bad:
        sys.exit(f"tensors of more than 2 dimensions, which no Hub checkpoint of this family holds: {bad}")
    return names


def mtp_tensors(config, names):
    """DeepSeek-V3's and GLM-4.5's multi-token-prediction layers: the decoder layer (already in `names`, built as layer L)
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


def quantize_mxfp4(w):
    """gpt-oss's release format of a fused expert tensor w [E, in, out] (transformers' layout): its transpose
    [E, out, in] in groups of 32 inputs, `blocks` uint8 [E, out, in/32, 16] (element 2b of a group in the low
    nibble of byte b, 2b + 1 in the high one) and `scales` uint8 [E, out, in/32] (E8M0: 2^(s - 127)), each
    group's scale the smallest power of two that brings its largest magnitude within 6, values rounded to
    the nearest e2m1 value (ties to the even index)."""
    t = w.transpose(1, 2).contiguous()
    e, rows, cols = t.shape
    if cols % 32:
        sys.exit(f"MXFP4 needs the input width ({cols}) to be a multiple of 32")
    g = t.view(e, rows, cols // 32, 32)
    amax = g.abs().amax(dim=-1).clamp(min=2.0 ** -120)
    exp = torch.ceil(torch.log2(amax / 6.0)).clamp(-127, 127)
    scaled = g / torch.pow(2.0, exp)[..., None]
    grid = torch.tensor(FP4_MAGNITUDES)
    index = (scaled.abs()[..., None] - grid).abs().argmin(dim=-1)  # argmin takes the first (even) on a tie
    nibble = (index | torch.where(scaled < 0, 8, 0)).to(torch.uint8)
    blocks = (nibble[..., 0::2] | (nibble[..., 1::2] << 4)).contiguous()
    return blocks, (exp + 127).to(torch.uint8).contiguous()


def dequantize_mxfp4(blocks, scales):
    """The float32 tensor [E, in, out] (transformers' layout) that MXFP4 blocks and scales stand for."""
    lut = torch.tensor(FP4_MAGNITUDES + [-m for m in FP4_MAGNITUDES])
    lo, hi = lut[(blocks & 15).long()], lut[(blocks >> 4).long()]
    values = torch.stack((lo, hi), dim=-1).flatten(-2)  # [E, out, groups, 32]
    values = values * torch.pow(2.0, scales.to(torch.float32) - 127)[..., None]
    return values.flatten(-2).transpose(1, 2).contiguous()


def storage_dtype(config):
    name = config.get("torch_dtype") or config.get("dtype") or "bfloat16"
    return {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[name]


class Weights:
    """The checkpoint's tensors of one seed, each made from its name when asked for (random_tensor), so that
    at most one is in memory at a time: a real-width checkpoint is GBs, and the float32 model beside it."""

    def __init__(self, config, args, seed):
        self.layers = config["num_hidden_layers"]
        mtp = config.get("num_nextn_predict_layers", 0) if config["model_type"] in ("deepseek_v3", "glm4_moe") else 0
        self.shapes = tensor_names_and_shapes(config, self.layers + mtp)
        if mtp:
            mtp_tensors(config, self.shapes)
        q = config.get("quantization_config") or {}
        self.fp8 = args.fp8 == "on" or (args.fp8 == "auto" and q.get("quant_method") == "fp8")
        self.mxfp4 = q.get("quant_method") == "mxfp4"
        self.block = q.get("weight_block_size", [128, 128])
        self.pattern = re.compile(args.fp8_pattern)
        self.dtype = storage_dtype(config)
        self.seed, self.init_std = seed, args.init_std

    def is_fp8(self, name):
        return self.fp8 and len(self.shapes[name]) == 2 and self.pattern.search(name) is not None

    def is_mxfp4(self, name):
        return self.mxfp4 and MXFP4_EXPERTS.search(name) is not None

    def stored(self, name):
        """{name: the tensor as stored} plus {name_scale_inv: its block scales} when it is FP8; gpt-oss's
        MXFP4 experts as {name_blocks, name_scales}."""
        w = random_tensor(name, self.shapes[name], self.seed, self.init_std)
        if self.is_mxfp4(name):
            blocks, scales = quantize_mxfp4(w)
            return {name + "_blocks": blocks, name + "_scales": scales}
        if self.is_fp8(name):
            values, scale = quantize_fp8(w, *self.block)
            return {name: values, name + "_scale_inv": scale}
        return {name: w.to(self.dtype).contiguous()}

    def float32(self, name):
        """The float32 weight the stored tensor stands for (FP8 dequantized)."""
        s = self.stored(name)
        if name + "_blocks" in s:
            return dequantize_mxfp4(s[name + "_blocks"], s[name + "_scales"])
        if name + "_scale_inv" in s:
            return dequantize_fp8(s[name], s[name + "_scale_inv"], *self.block)
        return s[name].to(torch.float32)

    def stored_names(self):
        plain = [n for n in self.shapes if not self.is_mxfp4(n)]
        mx = [n + suffix for n in self.shapes if self.is_mxfp4(n) for suffix in ("_blocks", "_scales")]
        return sorted(plain + mx + [n + "_scale_inv" for n in self.shapes if self.is_fp8(n)])

    def reference_names(self):
        """The tensors of transformers' model: the MTP layers (index >= num_hidden_layers) are not part of it."""
        return [n for n in sorted(self.shapes) if not beyond_layers(n, self.layers)]

    def base_name(self, stored_name):
        """The weight a stored tensor belongs to (a weight_scale_inv belongs to its weight)."""
        base = re.sub(r"(_scale_inv|_blocks|_scales)$", "", stored_name)
        return base if base in self.shapes else stored_name


def beyond_layers(name, layers):
    m = re.match(r"model\.layers\.(\d+)\.", name)
    return m is not None and int(m.group(1)) >= layers


def write_checkpoint(out, weights, shards):
    """The shards (stored tensors in name order, split evenly by count) and the index, one shard in memory
    at a time. Returns the bytes of all tensors."""
    names = weights.stored_names()
    per = -(-len(names) // shards)
    index, total = {}, 0
    for i in range(shards):
        file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = names[i * per:(i + 1) * per]
        made = {}
        for base in dict.fromkeys(weights.base_name(n) for n in part):
            made.update(weights.stored(base))
        tensors = {n: made[n] for n in part}
        del made
        save_file(tensors, os.path.join(out, file), metadata={"format": "pt"})
        total += sum(t.numel() * t.element_size() for t in tensors.values())
        index.update({n: file for n in part})
        del tensors
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": index}, f, indent=2)
    return total


def weights_from_disk(folder, config):
    """(name, float32 weight) for every tensor of a checkpoint folder that transformers' model holds (FP8
    dequantized, the MTP layers left out), read one at a time."""
    block_rows, block_cols = (config.get("quantization_config") or {}).get("weight_block_size", [128, 128])
    files = sorted(f for f in os.listdir(folder) if SHARD.fullmatch(f) or f == "model.safetensors")
    with contextlib.ExitStack() as stack:
        handles = [stack.enter_context(safe_open(os.path.join(folder, f), framework="pt")) for f in files]
        where = {name: h for h in handles for name in h.keys()}
        for name in sorted(where):
            if name.endswith("_scale_inv") or beyond_layers(name, config["num_hidden_layers"]):
                continue
            if name.endswith("_scales") and name[:-len("_scales")] + "_blocks" in where:
                continue
            t = where[name].get_tensor(name)
            if name.endswith("_blocks"):
                base = name[:-len("_blocks")]
                yield base, dequantize_mxfp4(t, where[base + "_scales"].get_tensor(base + "_scales"))
                continue
            scale = name + "_scale_inv"
            if scale in where:
                yield name, dequantize_fp8(t, where[scale].get_tensor(scale), block_rows, block_cols)
            else:
                yield name, t.to(torch.float32)


def reference_model(config, named_weights, device):
    """transformers' model in float32 with eager attention, every tensor copied from named_weights ((name,
    float32 tensor) pairs in the checkpoint's names) into its view of the model (hub_views). Every tensor of
    the model starts as NaN, so one that no checkpoint name reaches cannot pass unnoticed."""
    with no_init_weights():
        model = AutoModelForCausalLM.from_config(hf_config(config, config["num_hidden_layers"]), dtype=torch.float32,
                                                 attn_implementation="eager")
    state = model.state_dict()
    for t in state.values():
        t.fill_(float("nan"))
    views = hub_views(model)
    unexpected, mismatched, seen = [], [], set()
    for name, w in named_weights:
        view = views.get(name)
        if view is None:
            unexpected.append(name)
        elif tuple(view.shape) != tuple(w.shape):
            mismatched.append(name)
        else:
            view.copy_(w)
            seen.add(name)
    loading = {"missing": sorted(set(views) - seen), "unexpected": sorted(unexpected), "mismatched": sorted(mismatched)}
    unset = [n for n, t in state.items() if torch.isnan(t).any()]
    if unset and not (loading["missing"] or loading["mismatched"]):
        sys.exit(f"the model's {unset[:4]} were not reached by any checkpoint name")
    return model.to(device).eval(), loading


def rel_l2(a, b):
    return ((a - b).norm(dim=-1) / b.norm(dim=-1)).max().item()


class RouterLogits:
    """Records the router logits of every MoE layer during a forward pass (hooks on the gate modules, in
    layer order): logits[i] is [tokens, experts] of gates[i]."""

    def __init__(self, model, config):
        self.experts = config.get("n_routed_experts") or config.get("num_experts") or config.get("num_local_experts")
        self.gates = [(n, m) for n, m in model.named_modules() if re.search(r"\.(mlp|block_sparse_moe)\.(gate|router)$", n)]
        self.logits = {}

    def layers(self):
        return [int(re.search(r"layers\.(\d+)\.", n).group(1)) for n, _ in self.gates]

    def __enter__(self):
        def hook(name):
            def record(module, inputs, output):
                outs = [output] if torch.is_tensor(output) else [o for o in output if torch.is_tensor(o)]
                self.logits[name] = next(o for o in outs if o.shape[-1] == self.experts).detach().float().reshape(-1, self.experts)
            return record
        self.handles = [m.register_forward_hook(hook(n)) for n, m in self.gates]
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()

    def choice_scores(self, config):
        """Per MoE layer, the scores the choice ranks: softmax or sigmoid of the logits, plus any
        e_score_correction_bias (before any group limit)."""
        out = []
        for name, module in self.gates:
            x = self.logits[name]
            choice = torch.sigmoid(x) if config.get("scoring_func") == "sigmoid" else torch.softmax(x, dim=-1)
            bias = getattr(module, "e_score_correction_bias", None)
            out.append(choice + bias.float() if bias is not None else choice)
        return out


@torch.no_grad()
def golden_of(model, config, prompt, new_tokens, device):
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
    # The same rows recomputed without the cache: how far the cached path drifts; the router's scores at
    # every position are recorded on the way.
    with RouterLogits(model, config) as router:
        full = model(input_ids=torch.cat([ids, torch.tensor([gen_ids[:-1]], device=device)], dim=1), use_cache=False)
    full = full.logits[0].float()
    scores = router.choice_scores(config)
    everything = torch.cat([prefill, gen])
    top2 = everything.topk(2, dim=-1).values
    stats = {"len": int(prompt.numel()),
             "kv_consistency_rel_err": max(rel_l2(gen, full[prompt.numel() - 1:]), rel_l2(prefill, full[:prompt.numel()])),
             "min_top1_margin": (top2[:, 0] - top2[:, 1]).min().item(),
             "logit_std": everything.std().item()}
    tensors = {"prompt_ids": prompt.to(torch.int32), "prefill_logits": prefill.cpu().contiguous(),
               "gen_ids": torch.tensor(gen_ids, dtype=torch.int32), "gen_logits": gen.cpu().contiguous()}
    if scores:
        tensors["router_scores"] = torch.stack(scores).cpu().contiguous()
    return tensors, stats, scores, router.layers()


def verify(args):
    with open(os.path.join(args.verify, "config.json")) as f:
        config = json.load(f)
    model, loading = reference_model(config, weights_from_disk(args.verify, config), args.device)
    stored = load_file(os.path.join(args.verify, "golden.safetensors"))
    result = {"loading": loading}
    for name in args.prompts.split(","):
        mine, _, _, _ = golden_of(model, config, stored[name + ".prompt_ids"], args.new_tokens, args.device)
        result[name] = {"prefill_rel_l2": rel_l2(mine["prefill_logits"], stored[name + ".prefill_logits"]),
                        "gen_ids_equal": torch.equal(stored[name + ".gen_ids"], mine["gen_ids"]),
                        "gen_rel_l2": rel_l2(mine["gen_logits"], stored[name + ".gen_logits"])}
        if name + ".router_scores" in stored:
            result[name]["router_scores_max_abs_diff"] = (mine["router_scores"] - stored[name + ".router_scores"]).abs().max().item()
    print(json.dumps({"verify " + os.path.basename(os.path.normpath(args.verify)): result}, indent=1))


def routing_decisions(config, choice):
    """The router's choice from its choice scores [T, E]: the chosen experts [T, k] (sorted) and the margins
    at the group cut and at the expert cut (score of the last chosen minus that of the first passed over;
    limited to the best groups for DeepSeek's group-limited routers). scripts/check_golden.py repeats this
    in numpy."""
    experts = choice.shape[-1]
    k, groups = config["num_experts_per_tok"], config.get("n_group") or 1
    best_groups, method = config.get("topk_group") or 1, config.get("topk_method")
    group_margin = torch.full((choice.shape[0],), float("inf"), device=choice.device)
    if groups > 1 and method in ("noaux_tc", "group_limited_greedy") and best_groups < groups:
        per_group = choice.view(choice.shape[0], groups, experts // groups)
        score = per_group.topk(2, dim=-1).values.sum(-1) if method == "noaux_tc" else per_group.amax(-1)
        ranked = score.sort(dim=-1, descending=True)
        group_margin = ranked.values[:, best_groups - 1] - ranked.values[:, best_groups]
        keep = torch.zeros_like(score, dtype=torch.bool).scatter(1, ranked.indices[:, :best_groups], torch.ones_like(ranked.indices[:, :best_groups], dtype=torch.bool))
        choice = choice.masked_fill(~keep.repeat_interleave(experts // groups, dim=1), float("-inf"))
    ranked = choice.sort(dim=-1, descending=True)
    expert_margin = ranked.values[:, k - 1] - ranked.values[:, k]
    expert_margin = torch.where(torch.isfinite(expert_margin), expert_margin, torch.full_like(expert_margin, float("inf")))
    return ranked.indices[:, :k].sort(dim=-1).values.cpu(), group_margin.cpu(), expert_margin.cpu()


@torch.no_grad()
def router_scores_of(model, config, ids, device):
    """The choice scores of every MoE layer at every position of `ids` (one forward without the cache)."""
    with RouterLogits(model, config) as router:
        model(input_ids=ids.to(torch.long).to(device)[None], use_cache=False)
    return router.choice_scores(config)


@torch.no_grad()
def round_to_bf16(model):
    """Every weight rounded to bf16 in place, a slice at a time: a fused expert tensor is GBs (DeepSeek-V3's
    widths: 7.5 GB), and rounding it whole would hold two more copies of it."""
    for t in model.state_dict().values():
        if t.is_floating_point():
            for part in (t.view(-1).split(1 << 24) if t.is_contiguous() else [t]):
                part.copy_(part.to(torch.bfloat16).to(t.dtype))


def make_golden(config, args, seed):
    """One model of `seed`: its weights, transformers' model of them and its golden."""
    weights = Weights(config, args, seed)
    model, loading = reference_model(config, ((n, weights.float32(n)) for n in weights.reference_names()), args.device)
    base_golden = load_file(os.path.join(args.base, "golden.safetensors"))
    golden, prompts, sequences, exact = {}, {}, [], []
    for name in args.prompts.split(","):
        tensors, prompts[name], scores, router_layers = golden_of(model, config, base_golden[name + ".prompt_ids"],
                                                                  args.new_tokens, args.device)
        golden.update({f"{name}.{k}": v for k, v in tensors.items()})
        sequences.append(torch.cat([tensors["prompt_ids"], tensors["gen_ids"][:-1]]))
        exact.append(scores)
    return weights, model, loading, golden, prompts, sequences, exact, router_layers


def routing_check(config, args, weights, model, sequences, exact):
    """How the routing holds up: the same model with every weight rounded to bf16 (what a bf16 copy of FP8
    weights holds): a routing decision it changes sits on a near-tie that any lossy store type may flip, so
    that the store's logits there differ from the golden by far more than its representation error. Rounds
    the model in place (one float32 model in memory); when every weight is bf16 already nothing changes."""
    rounding_changes = weights.fp8 or weights.dtype != torch.bfloat16
    if rounding_changes:
        round_to_bf16(model)
    changed = decisions = 0
    group_margin = expert_margin = float("inf")
    for ids, scores in zip(sequences, exact):
        rounded = router_scores_of(model, config, ids, args.device) if rounding_changes else scores
        for s_exact, s_rounded in zip(scores, rounded):
            chosen, gm, em = routing_decisions(config, s_exact)
            near, _, _ = routing_decisions(config, s_rounded)
            changed += int((chosen != near).any(dim=-1).sum())
            decisions += chosen.shape[0]
            group_margin, expert_margin = min(group_margin, gm.min().item()), min(expert_margin, em.min().item())
    # A margin that never arose (one group: no group choice) is null, as JSON has no infinity.
    finite = lambda m: m if math.isfinite(m) else None
    return {"decisions": decisions, "changed_by_bf16_rounding": changed, "min_group_margin": finite(group_margin),
            "min_expert_margin": finite(expert_margin)}


@torch.no_grad()
def check_read_back(out, config, model):
    """The shards as read back must be exactly the weights the golden was made with: those in the model."""
    views = hub_views(model)
    seen = set()
    for name, w in weights_from_disk(out, config):
        seen.add(name)
        if name not in views or not torch.equal(views[name], w.to(views[name].device)):
            sys.exit(f"{name} does not read back as the weight the golden was made with")
    if seen != set(views):
        sys.exit(f"the shards lack {sorted(set(views) - seen)[:4]}, which the golden was made with")


def peak_rss_gib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


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
        weights, model, loading, golden, prompts, sequences, exact, router_layers = make_golden(config, args, seed)
        attn = model.config._attn_implementation
        # Written and read back before the routing check, which rounds the model's weights.
        os.makedirs(args.out, exist_ok=True)
        total = write_checkpoint(args.out, weights, args.shards)
        check_read_back(args.out, config, model)
        routing = routing_check(config, args, weights, model, sequences, exact)
        del model
        print(f"seed {seed}: routing {json.dumps(routing)}", file=sys.stderr)
        if not args.stable_routing or routing["changed_by_bf16_rounding"] == 0:
            break
        for f in os.listdir(args.out):
            os.remove(os.path.join(args.out, f))
    else:
        sys.exit(f"no seed in [{args.seed}, {args.seed + args.max_tries}) routes the golden prompts the same with "
                 "the weights rounded to bf16; allow more --max-tries")

    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for f in sorted(os.listdir(args.base)):
        if f not in MADE and not SHARD.fullmatch(f) and os.path.isfile(os.path.join(args.base, f)):
            shutil.copy(os.path.join(args.base, f), os.path.join(args.out, f))
    save_file(golden, os.path.join(args.out, "golden.safetensors"))
    with open(os.path.join(args.base, "golden.json")) as f:
        meta = json.load(f)
    meta["prompts"], meta["loading"], meta["router_layers"], meta["routing"] = prompts, loading, router_layers, routing
    with open(os.path.join(args.out, "golden.json"), "w") as f:
        json.dump(meta, f, ensure_ascii=False)

    size = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    report = {os.path.basename(os.path.normpath(args.out)): {
        "seed": seed, "loading": loading, "prompts": prompts, "routing": routing, "bytes": total,
        "folder_bytes": size, "fp8": weights.fp8,
        "fp8_tensors": sum(1 for n in weights.shapes if weights.is_fp8(n)),
        "attn_implementation": attn, "peak_rss_gib": round(peak_rss_gib(), 2),
        "torch": torch.__version__, "transformers": __import__("transformers").__version__}}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
