#!/usr/bin/env python3
"""A Hugging Face checkpoint folder with a real MoE model's expert shapes and random weights, for
timing `tandem-cli convert` where the real model (hundreds of GB) is not on the machine. Every layer is
a MoE layer; attention and vocabulary are small, since only the experts matter to the converter.

    python3 scripts/synthetic_checkpoint.py --shape qwen3-30b-a3b --layers 4 OUT_DIR
    python3 scripts/synthetic_checkpoint.py --shape deepseek-v3 --layers 1 --fp8 OUT_DIR

Needs numpy. Writes one shard per layer plus model.safetensors.index.json and config.json.
"""
import argparse
import json
import os

import numpy as np

SHAPES = {  # model_type, hidden, moe intermediate, experts, experts per token
    "qwen3-30b-a3b": ("qwen3_moe", 2048, 768, 128, 8),
    "deepseek-v2-lite": ("deepseek_v2", 2048, 1408, 64, 6),
    "deepseek-v3": ("deepseek_v3", 7168, 2048, 256, 8),
}
VOCAB, HEADS, HEAD_DIM = 1024, 4, 64
rng = np.random.default_rng(1)


# A tensor is (dtype, shape, a function making its bytes): shards are written one tensor at a time, so a
# layer of DeepSeek-V3's experts (11 GB in FP8) never has to fit in memory.
SIZES = {"BF16": 2, "F8_E4M3": 1, "F32": 4}


def bf16(shape):
    def make():
        bits = (rng.standard_normal(shape, dtype=np.float32) * 0.02).view(np.uint32)
        return (bits >> 16).astype(np.uint16).tobytes()
    return ("BF16", shape, make)


def fp8(shape):
    # e4m3fn codes with exponents 1..13 and either sign: finite (0x7f/0xff are NaN) and of moderate size.
    def make():
        signs = rng.integers(0, 2, size=shape, dtype=np.uint8) << 7
        return (rng.integers(0x08, 0x70, size=shape, dtype=np.uint8) | signs).tobytes()
    return ("F8_E4M3", shape, make)


def f32(shape, value):
    return ("F32", shape, lambda: np.full(shape, value, dtype=np.float32).tobytes())


def scales(shape):
    return f32([(shape[0] + 127) // 128, (shape[1] + 127) // 128], 1e-3)


def write_shard(path, tensors):
    header, offset = {}, 0
    for name, (dtype, shape, _) in tensors.items():
        size = SIZES[dtype] * int(np.prod(shape))
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        for _, _, make in tensors.values():
            f.write(make())


def config(shape, layers, fp8_experts):
    model_type, hidden, inter, experts, top_k = SHAPES[shape]
    c = {"model_type": model_type, "vocab_size": VOCAB, "hidden_size": hidden, "num_hidden_layers": layers,
         "num_attention_heads": HEADS, "num_key_value_heads": HEADS, "rms_norm_eps": 1e-6,
         "max_position_embeddings": 4096, "rope_theta": 10000.0, "tie_word_embeddings": False,
         "intermediate_size": inter * 4, "moe_intermediate_size": inter, "num_experts_per_tok": top_k}
    if model_type == "qwen3_moe":
        c.update(num_experts=experts, head_dim=HEAD_DIM, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[])
    else:
        c.update(n_routed_experts=experts, n_shared_experts=1, first_k_dense_replace=0, moe_layer_freq=1,
                 q_lora_rank=None, kv_lora_rank=64, qk_nope_head_dim=HEAD_DIM, qk_rope_head_dim=32, v_head_dim=HEAD_DIM,
                 n_group=1, topk_group=1, norm_topk_prob=False, routed_scaling_factor=1.0, scoring_func="softmax",
                 topk_method="greedy")
        if model_type == "deepseek_v3":
            c.update(scoring_func="sigmoid", topk_method="noaux_tc", norm_topk_prob=True, n_group=8, topk_group=4)
    if fp8_experts:
        c["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                    "weight_block_size": [128, 128]}
    return c


def layer_tensors(c, layer, fp8_experts):
    p = f"model.layers.{layer}."
    hidden, inter = c["hidden_size"], c["moe_intermediate_size"]
    t = {p + "input_layernorm.weight": bf16([hidden]), p + "post_attention_layernorm.weight": bf16([hidden])}
    if c["model_type"] == "qwen3_moe":
        for name, rows in (("q_proj", HEADS * HEAD_DIM), ("k_proj", HEADS * HEAD_DIM), ("v_proj", HEADS * HEAD_DIM)):
            t[p + f"self_attn.{name}.weight"] = bf16([rows, hidden])
        t[p + "self_attn.o_proj.weight"] = bf16([hidden, HEADS * HEAD_DIM])
        t[p + "self_attn.q_norm.weight"] = bf16([HEAD_DIM])
        t[p + "self_attn.k_norm.weight"] = bf16([HEAD_DIM])
        experts = c["num_experts"]
    else:
        rope, lora = c["qk_rope_head_dim"], c["kv_lora_rank"]
        t[p + "self_attn.q_proj.weight"] = bf16([HEADS * (HEAD_DIM + rope), hidden])
        t[p + "self_attn.kv_a_proj_with_mqa.weight"] = bf16([lora + rope, hidden])
        t[p + "self_attn.kv_a_layernorm.weight"] = bf16([lora])
        t[p + "self_attn.kv_b_proj.weight"] = bf16([HEADS * 2 * HEAD_DIM, lora])
        t[p + "self_attn.o_proj.weight"] = bf16([hidden, HEADS * HEAD_DIM])
        for name, shape in (("gate_proj", [inter, hidden]), ("up_proj", [inter, hidden]), ("down_proj", [hidden, inter])):
            t[p + f"mlp.shared_experts.{name}.weight"] = bf16(shape)
        experts = c["n_routed_experts"]
        if c["model_type"] == "deepseek_v3":
            t[p + "mlp.gate.e_score_correction_bias"] = f32([experts], 0.0)
    t[p + "mlp.gate.weight"] = bf16([experts, hidden])
    for e in range(experts):
        for name, shape in (("gate_proj", [inter, hidden]), ("up_proj", [inter, hidden]), ("down_proj", [hidden, inter])):
            key = p + f"mlp.experts.{e}.{name}.weight"
            if fp8_experts:
                t[key] = fp8(shape)
                t[key + "_scale_inv"] = scales(shape)
            else:
                t[key] = bf16(shape)
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--fp8", action="store_true", help="routed experts as DeepSeek-style FP8 with block scales")
    ap.add_argument("out")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    c = config(a.shape, a.layers, a.fp8)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    weight_map = {}
    shards = a.layers + 1
    for i in range(shards):
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        if i < a.layers:
            tensors = layer_tensors(c, i, a.fp8)
        else:
            tensors = {"model.embed_tokens.weight": bf16([VOCAB, c["hidden_size"]]),
                       "lm_head.weight": bf16([VOCAB, c["hidden_size"]]), "model.norm.weight": bf16([c["hidden_size"]])}
        write_shard(os.path.join(a.out, name), tensors)
        weight_map.update({t: name for t in tensors})
        print(f"wrote {name}", flush=True)
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=2)


if __name__ == "__main__":
    main()
