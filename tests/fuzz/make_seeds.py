#!/usr/bin/env python3
"""Writes the seed corpora in tests/fuzz/corpus/<target>/ from the repository's fixtures and templates,
plus hand-made hostile cases (issue 20's among them). Run from anywhere: python3 tests/fuzz/make_seeds.py.
The output is committed; rerun it when the fixtures change."""
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIX = os.path.join(ROOT, "tests", "fixtures")
CORPUS = os.path.join(HERE, "corpus")


def out(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def read(*parts):
    with open(os.path.join(*parts), "rb") as f:
        return f.read()


def chat_template():
    data = os.path.join(ROOT, "tests", "text", "data")
    for name in sorted(os.listdir(data)):
        if name.endswith(".jinja"):
            out("fuzz_chat_template", name, read(data, name))
    # one case per feature of the conformance cases: template, NUL, variables
    seen = set()
    for case in json.load(open(os.path.join(data, "jinja_cases.json"))):
        if case["feature"] in seen:
            continue
        seen.add(case["feature"])
        out("fuzz_chat_template", "case_" + case["feature"],
            case["template"].encode() + b"\0" + json.dumps(case.get("variables", {})).encode())
    hostile = {
        "intmin_floordiv": "{{ (-9223372036854775807 - 1) // -1 }}",
        "intmin_mod": "{{ (-9223372036854775807 - 1) % -1 }}{{ 2 ** 63 }}{{ 7 ** -1 }}",
        "namespace_self": "{% set ns = namespace(x=1) %}{% set ns.x = ns %}{{ ns }}",
        "list_self": "{% set a = [1] %}{% set _ = a.append(a) %}{{ a }}{{ a | tojson }}",
        "recursive_loop": "{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}",
        "nested_range": "{% for a in range(100000) %}{% for b in range(100000) %}{{ a }}{% endfor %}{% endfor %}",
        "string_repeat": "{{ 'a' * 10**10 }}",
        "format_width": "{{ '{:>4611686018427387904}'.format(1) }}",
        "format_percent": "{{ '%*d' % (4611686018427387904, 1) }}{{ '%.999999999f' % 1.5 }}",
        "macro_recursion": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "deep_parens": "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}",
        "deep_lists": "{{ " + "[" * 3000 + "]" * 3000 + " }}",
        "list_growth": "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
        "unicode_slicing": "{{ 'h\u00e9\U0001F600llo'[::-1] }}{{ 'abc'[-9223372036854775807:9223372036854775807:-3] }}",
        "affix_argument_types": "{{ 'hello'.endswith('x', 'lo') }}{{ 'hello'.startswith('h', 0, [1]) }}",
        "messages_context": "{% for m in messages %}{{ m.role | upper }}: {{ m.content if m.content is string else m.content | tojson }}\n{% endfor %}",
    }
    for name, text in hostile.items():
        out("fuzz_chat_template", "hostile_" + name, text)


def tokenizer_json():
    tok = json.loads(read(FIX, "tiny-qwen3moe", "tokenizer.json"))
    out("fuzz_tokenizer_json", "tiny_qwen3moe.json", json.dumps(tok, ensure_ascii=False))
    # a small byte-level BPE of the same shape, which mutations go through quickly
    small = dict(tok)
    vocab = dict(list(tok["model"]["vocab"].items())[:300])
    merges = [m for m in tok["model"]["merges"]
              if all(p in vocab for p in (m.split(" ") if isinstance(m, str) else m))][:40]
    small["model"] = dict(tok["model"], vocab=vocab, merges=merges)
    small["added_tokens"] = [dict(a, id=300 + i) for i, a in enumerate(tok["added_tokens"][:3])]
    out("fuzz_tokenizer_json", "small_bpe.json", json.dumps(small, ensure_ascii=False))
    # normalizer: a Sequence nested 200 deep; pre-tokenizer likewise
    deep = {"type": "NFC"}
    for _ in range(200):
        deep = {"type": "Sequence", "normalizers": [deep]}
    out("fuzz_tokenizer_json", "hostile_deep_normalizer.json", json.dumps(dict(small, normalizer=deep)))
    deep = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}
    for _ in range(200):
        deep = {"type": "Sequence", "pretokenizers": [deep]}
    out("fuzz_tokenizer_json", "hostile_deep_pretokenizer.json", json.dumps(dict(small, pre_tokenizer=deep)))
    out("fuzz_tokenizer_json", "hostile_deep_arrays.json", "[" * 20000 + "]" * 20000)
    bad = dict(small, added_tokens=[{"id": 2147483647, "content": "<x>", "special": True},
                                    {"id": -1, "content": "", "special": True}])
    out("fuzz_tokenizer_json", "hostile_added_ids.json", json.dumps(bad))
    # the largest int id alone (with -1 beside it, the -1 was refused first): overflowed the vocabulary size
    bad = dict(small, added_tokens=[{"id": 2147483647, "content": "<x>", "special": True}])
    out("fuzz_tokenizer_json", "hostile_added_id_max.json", json.dumps(bad))
    regex = json.loads(json.dumps(small))
    regex["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(a*)*b|\\p{Zzzz}|(?<=x)y|[\\x{110000}]"
    out("fuzz_tokenizer_json", "hostile_regex.json", json.dumps(regex))


def config_json():
    for name in sorted(os.listdir(FIX)):
        p = os.path.join(FIX, name, "config.json")
        if os.path.exists(p):
            gen = os.path.join(FIX, name, "generation_config.json")
            out("fuzz_config_json", name, read(p) + (b"\0" + read(gen) if os.path.exists(gen) else b""))
    cfg = json.loads(read(FIX, "tiny-qwen3moe", "config.json"))
    huge = dict(cfg, hidden_size=9223372036854775807, num_hidden_layers=18446744073709551615,
                num_experts=1e308, vocab_size=-1, intermediate_size=2147483648, head_dim=0)
    out("fuzz_config_json", "hostile_huge_numbers", json.dumps(huge))
    nan = json.dumps(cfg).replace('"rope_theta": ', '"rope_theta": "NaN", "x": ')
    out("fuzz_config_json", "hostile_nan_strings",
        nan + '\0{"temperature": "NaN", "top_p": 1e999, "top_k": -9223372036854775808, "eos_token_id": [1e20, -5, "x"]}')
    out("fuzz_config_json", "hostile_types", json.dumps(dict(cfg, num_attention_heads="8", rope_scaling=[1],
                                                          torch_dtype=None, architectures={})))
    out("fuzz_config_json", "hostile_deep", "{\"a\":" * 10000 + "1" + "}" * 10000)


# --- GGUF (v3), as llama.cpp writes it ---------------------------------------------------------
def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_value(kind, v):
    fmt = {"u32": ("<I", 4), "i32": ("<i", 5), "f32": ("<f", 6), "bool": ("<?", 7), "u64": ("<Q", 10)}
    if kind in fmt:
        f, t = fmt[kind]
        return struct.pack("<I", t) + struct.pack(f, v)
    if kind == "str":
        return struct.pack("<I", 8) + gguf_string(v)
    if kind == "strs":
        return struct.pack("<IIQ", 9, 8, len(v)) + b"".join(gguf_string(s) for s in v)
    if kind == "i32s":
        return struct.pack("<IIQ", 9, 5, len(v)) + b"".join(struct.pack("<i", x) for x in v)
    raise ValueError(kind)


def gguf(kvs, tensors, alignment=32):
    """kvs: [(key, kind, value)]; tensors: [(name, dims (ggml order), ggml type, data bytes)]."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for k, kind, v in kvs:
        head += gguf_string(k) + gguf_value(kind, v)
    offset, blobs = 0, b""
    for name, dims, ttype, data in tensors:
        head += gguf_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        head += struct.pack("<IQ", ttype, offset)
        pad = (-len(data)) % alignment
        blobs += data + b"\0" * pad
        offset += len(data) + pad
    head += b"\0" * ((-len(head)) % alignment)
    return head + blobs


def gguf_seeds():
    cfg = json.loads(read(FIX, "tiny-qwen3moe", "config.json"))
    tok = json.loads(read(FIX, "tiny-qwen3moe", "tokenizer.json"))
    a = "qwen3moe"
    meta = [("general.architecture", "str", a), ("general.name", "str", "fuzz"),
            (a + ".context_length", "u32", cfg["max_position_embeddings"]),
            (a + ".embedding_length", "u32", cfg["hidden_size"]),
            (a + ".feed_forward_length", "u32", cfg["intermediate_size"]),
            (a + ".attention.head_count", "u32", cfg["num_attention_heads"]),
            (a + ".rope.freq_base", "f32", cfg["rope_theta"]),
            (a + ".attention.layer_norm_rms_epsilon", "f32", cfg["rms_norm_eps"]),
            (a + ".expert_used_count", "u32", cfg["num_experts_per_tok"]),
            (a + ".block_count", "u32", cfg["num_hidden_layers"]),
            (a + ".attention.head_count_kv", "u32", cfg["num_key_value_heads"]),
            (a + ".attention.key_length", "u32", cfg["head_dim"]),
            (a + ".attention.value_length", "u32", cfg["head_dim"]),
            (a + ".expert_count", "u32", cfg["num_experts"]),
            (a + ".expert_feed_forward_length", "u32", cfg["moe_intermediate_size"])]
    vocab = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])[:300]
    tokens = [t for t, _ in vocab] + [x["content"] for x in tok["added_tokens"][:3]]
    types = [1] * len(vocab) + [3] * 3
    vocab_set = set(tokens)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    merges = [m for m in merges if all(p in vocab_set for p in m.split(" "))][:40]
    tk = [("tokenizer.ggml.model", "str", "gpt2"), ("tokenizer.ggml.pre", "str", "qwen2"),
          ("tokenizer.ggml.tokens", "strs", tokens), ("tokenizer.ggml.token_type", "i32s", types),
          ("tokenizer.ggml.merges", "strs", merges), ("tokenizer.ggml.eos_token_id", "u32", 300),
          ("tokenizer.ggml.add_bos_token", "bool", False),
          ("tokenizer.chat_template", "str", read(ROOT, "tests", "text", "data", "mixtral.jinja").decode())]
    f32 = lambda n: struct.pack("<%df" % n, *[0.5] * n)
    tensors = [("token_embd.weight", [8, 4], 0, f32(32)), ("output_norm.weight", [8], 0, f32(8)),
               ("blk.0.attn_q.weight", [8, 8], 1, b"\x00\x3c" * 64),  # F16
               ("blk.0.ffn_down_exps.weight", [32, 2, 2], 8, b"\x00" * (34 * 4))]  # Q8_0: 34 bytes a block
    out("fuzz_gguf", "qwen3moe_small.gguf", gguf(meta + tk, tensors))
    out("fuzz_gguf", "metadata_only.gguf", gguf(meta, []))
    out("fuzz_gguf", "empty_v3.gguf", gguf([], []))
    spm = [("tokenizer.ggml.model", "str", "llama"),
           ("tokenizer.ggml.tokens", "strs", ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % i for i in range(256)] + ["\u2581a", "b"]),
           ("tokenizer.ggml.scores", "strs", [])]
    out("fuzz_gguf", "spm_bad_scores.gguf", gguf([("general.architecture", "str", "llama")] + spm, []))
    hostile = b"GGUF" + struct.pack("<IQQ", 3, 0xFFFFFFFFFFFFFFFF, 1) + gguf_string("k") + struct.pack("<IIQ", 9, 9, 1 << 62)
    out("fuzz_gguf", "hostile_counts.gguf", hostile)
    overlap = gguf([("general.alignment", "u32", 0)],
                   [("a", [0xFFFFFFFF, 0xFFFFFFFF, 4], 0, f32(4)), ("a", [1], 30, f32(1))])
    out("fuzz_gguf", "hostile_dims.gguf", overlap)


# --- safetensors ------------------------------------------------------------------------------
def safetensors(header, data):
    h = json.dumps(header).encode()
    h += b" " * ((-len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + data


def safetensors_seeds():
    hdr = {"__metadata__": {"format": "pt"},
           "a.weight": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
           "b.bias": {"dtype": "BF16", "shape": [4], "data_offsets": [24, 32]},
           "c.scale": {"dtype": "F8_E4M3", "shape": [2, 2], "data_offsets": [32, 36]},
           "d.ids": {"dtype": "I64", "shape": [1], "data_offsets": [36, 44]},
           "e.empty": {"dtype": "F16", "shape": [0, 5], "data_offsets": [44, 44]}}
    out("fuzz_safetensors", "small.safetensors", safetensors(hdr, bytes(range(44))))
    out("fuzz_safetensors", "empty_header.safetensors", safetensors({}, b""))
    # the fixture's first shard, cut to its smallest tensors (their data only, offsets from 0)
    shard = read(FIX, "tiny-qwen3moe", "model-00001-of-00002.safetensors")
    n = struct.unpack("<Q", shard[:8])[0]
    full = json.loads(shard[8:8 + n])
    names = sorted((k for k in full if k != "__metadata__"),
                   key=lambda k: full[k]["data_offsets"][1] - full[k]["data_offsets"][0])[:6]
    cut, data = {}, b""
    for k in names:
        b, e = full[k]["data_offsets"]
        cut[k] = dict(full[k], data_offsets=[len(data), len(data) + e - b])
        data += shard[8 + n + b:8 + n + e]
    if "__metadata__" in full:
        cut["__metadata__"] = full["__metadata__"]
    out("fuzz_safetensors", "tiny_qwen3moe_cut.safetensors", safetensors(cut, data))
    out("fuzz_safetensors", "hostile_header_length.safetensors", struct.pack("<Q", 0xFFFFFFFFFFFFFFF0) + b"{}")
    bad = {"x": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 16]},
           "y": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]},
           "z": {"dtype": "I4", "shape": [-1], "data_offsets": [0, 18446744073709551615]}}
    out("fuzz_safetensors", "hostile_offsets.safetensors", safetensors(bad, b"\0" * 16))


if __name__ == "__main__":
    shutil.rmtree(CORPUS, ignore_errors=True)
    chat_template()
    tokenizer_json()
    config_json()
    gguf_seeds()
    safetensors_seeds()
