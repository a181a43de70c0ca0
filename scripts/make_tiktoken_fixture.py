#!/usr/bin/env python3
"""Makes tests/fixtures/tiktoken-kimi: a small tokenizer in the layout of Kimi-K2's Hugging Face release
(tiktoken.model + tokenizer_config.json + chat_template.jinja) and what the reference library, tiktoken,
makes of it, for the C++ tests of Tandem's tiktoken support (tests/text/tst_tiktoken.cpp).

    python3 -m venv /tmp/tkvenv && /tmp/tkvenv/bin/pip install tiktoken regex jinja2
    /tmp/tkvenv/bin/python scripts/make_tiktoken_fixture.py [--out tests/fixtures/tiktoken-kimi]

(written with tiktoken 0.14.0, regex 2026.11.19, jinja2 3.1.6; the output is deterministic)

The real tiktoken.model (163,584 ranks) cannot be fetched here, so this one is trained: byte-level BPE
merges, tiktoken style (a merge's result is a new rank), on the multilingual sample text below (English,
Chinese, Japanese, Korean, Cyrillic, Greek, Arabic, Hindi, code, numbers, emoji) until MERGES ranks exist. The 256 single bytes come first in GPT-2's byte order (printable ones first, as in
OpenAI's files, so rank != byte value), and a few words no merge reaches are appended so that the whole-
piece lookup tiktoken does before merging is exercised. Special tokens follow the ranks as in Kimi-K2:
the 256 ids after the last rank, named by tokenizer_config.json's added_tokens_decoder at Kimi's offsets
([BOS] +0, [EOS] +1, <|im_end|> +2, ..., [UNK] +254, [PAD] +255) and "<|reserved_token_ID|>" elsewhere.

Files written into OUT:
  tiktoken.model          "BASE64 RANK" per line, as load_tiktoken_bpe reads it
  tokenizer_config.json   Kimi-K2's fields: added_tokens_decoder, bos/eos/unk/pad, tokenizer_class, auto_map
  chat_template.jinja     tests/text/data/kimi_k2.jinja
  golden.json             pattern: Kimi's pat_str (tokenization_kimi.py), the pattern Tandem must match
                          encode: [{text, ids} or {parts, ids_rle}]  Kimi's encode(): the text cut into
                              400,000-character chunks and runs of at most 25,000 (non-)whitespace
                              characters, each encoded by tiktoken with allowed_special="all"; the long
                              cases give their text as [text, repeat] parts and their ids as [id, count] runs
                          decode: [{ids, text}]  tiktoken's decode (invalid UTF-8 -> U+FFFD)
                          chat: [{messages, text, ids}]  the template rendered as transformers does, encoded
  classes.json            for each character class of the pattern (its Rust regex syntax), the code points
                          tiktoken's regex engine puts in it, as [first, last] ranges: found by encoding
                          every code point with the class alone as the pattern and a bytes-only vocabulary
                          (tiktoken drops text its pattern does not match)
"""
import argparse
import base64
import collections
import json
import os
import random
import sys

import regex
import tiktoken

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "text", "data"))
import make_expected  # noqa: E402  (the jinja2 set-up of transformers' apply_chat_template)

# tokenization_kimi.py's TikTokenTokenizer.pat_str.
KIMI_PATTERN = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])

# The character classes of KIMI_PATTERN, whose membership classes.json records.
CLASSES = [
    r"[\p{Han}]",
    r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]",
    r"[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]",
    r"[^\r\n\p{L}\p{N}]",
    r"\p{N}",
    r"[^\s\p{L}\p{N}]",
    r"\s",
    r"\S",
    r"[\r\n]",
]

MERGES = 4000
NUM_RESERVED_SPECIAL_TOKENS = 256
# Kimi-K2's added_tokens_decoder, as offsets from the first id after the ranks (163584 in the release).
KIMI_SPECIAL_TOKENS = {
    0: "[BOS]", 1: "[EOS]", 2: "<|im_end|>", 3: "<|im_user|>", 4: "<|im_assistant|>",
    6: "<|start_header_id|>", 7: "<|end_header_id|>", 9: "[EOT]", 10: "<|im_system|>",
    11: "<|tool_calls_section_begin|>", 12: "<|tool_calls_section_end|>", 13: "<|tool_call_begin|>",
    14: "<|tool_call_argument_begin|>", 15: "<|tool_call_end|>", 17: "<|im_middle|>",
    18: "<|media_begin|>", 19: "<|media_content|>", 20: "<|media_end|>", 21: "<|media_pad|>",
    22: "<think>", 23: "</think>", 254: "[UNK]", 255: "[PAD]",
    # Not Kimi's: a special token of Latin-1 letters, which must decode as the text it is (a byte-level
    # decoder would take "«»" for the bytes 0xAB and 0xBB).
    100: "<|«café»|>",
}
# Marked "special": false, as K2-Thinking marks its think tags (decode(skip_special_tokens) keeps them).
NOT_SPECIAL = {"<think>", "</think>"}

# Words no chain of merges builds: tiktoken finds them only by looking the whole piece up first.
UNREACHABLE = [" qwxzq", "Zyzzyva", " 魑魅魍魉", "ẞẞẞ", "🦜🦜"]

CORPUS = """
Tandem runs large Mixture-of-Experts language models on one workstation. The GPU runs what is dense
and latency-critical (attention, shared experts, dense layers, router, lm_head); the CPU runs the routed
experts out of system RAM. CPU and GPU work in tandem on every token, so a 671B-parameter model runs on
one GPU plus a large-memory CPU. It's fast, isn't it? We'll see: they've measured 85% of the bandwidth
ceiling, and you'd expect more once the kernels are tuned. I'm sure we're close. DON'T PANIC. THEY'LL SEE.
The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs!
Tokenizers split text into words, then merge bytes into tokens by rank; the lowest rank merges first.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 256 1024 2048 4096 65536 3.14159 2.71828 1e-3 2e-2 -17 +23 50%
Dates: 2024-07-26, 2025-01-01 13:05:09, July 11, 2025. Prices: $19.99, €5, ¥1200, £3.50.

今天天气很好，我们一起去公园散步吧。人工智能正在改变世界，大型语言模型可以回答问题、写代码、翻译文章。
混合专家模型把计算分给多个专家，每个词元只激活其中少数几个专家，所以推理速度更快。
我们在一台工作站上运行这个模型：显卡负责注意力层，处理器负责路由专家。你好，世界！谢谢你的帮助。
中文分词和英文不同，中文没有空格，所以分词器需要学习常见的词语，比如“模型”、“专家”、“世界”。
北京是中国的首都。上海是一个国际化的大城市。长城、故宫和天坛都很有名。春眠不觉晓，处处闻啼鸟。
第1章 第2节 共3页 2025年7月11日 下午3点 价格100元 百分之五十 一二三四五六七八九十
这是一个测试句子，用来检查分词器是否正确处理标点符号：逗号、句号。问号？感叹号！引号「」《书名》。

東京は日本の首都です。こんにちは、世界！ひらがなとカタカナと漢字を使います。ありがとうございます。
안녕하세요, 세계! 한국어는 한글로 씁니다. 감사합니다.
Привет, мир! Москва — столица России. Съешь же ещё этих мягких французских булок да выпей чаю.
Γειά σου κόσμε! Η Αθήνα είναι η πρωτεύουσα της Ελλάδας. ΚΑΛΗΜΕΡΑ.
مرحبا بالعالم! اللغة العربية جميلة. שלום עולם! नमस्ते दुनिया! हिन्दी भाषा। สวัสดีชาวโลก
Ça va? Où est la gare? Naïve café, résumé, façade, Straße, Ærø, Øresund, ǅemal, Ǆ ǈ ǋ, e\u0301.

def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)

for (int i = 0; i < n; ++i) {
    sum += a[i] * b[i];  // dot product
}
std::vector<int> ids = tokenizer.encode("Hello", /*addSpecialTokens=*/true);
{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "4"}
if __name__ == "__main__":
    main()
SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name ORDER BY 2 DESC;
    <div class="container"><p>Hello &amp; welcome</p></div>

Emoji: 👋 😀 😂 🎉 ❤️ 👍 🚀 🔥 ✅ 🤖 👨‍👩‍👧 🇨🇳 🇩🇪 🏳️‍🌈 👋🏽 ⭐ ☕
Math: ∑ ∫ √ ∞ ≈ ≠ ≤ ≥ ± × ÷ π α β γ λ μ σ Ω → ← ↑ ↓ ⇒ ∀ ∃ ∈ ∉ ⊂ ∪ ∩
"""


def corpus_text():
    # The sample, plus more of its kind made by seeded choice so that words recur as in real text:
    # sentences of its words, Chinese phrases of its Han characters, numbers, syllable words.
    rng = random.Random(7)
    words = regex.findall(r"\S+", CORPUS)
    han = sorted(set(regex.findall(r"\p{Han}", CORPUS)))
    syllables = ["ka", "to", "ri", "ne", "mo", "sha", "ken", "ly", "tion", "er", "in", "qu", "str", "ph", "ing"]
    lines = [CORPUS]
    for _ in range(600):
        lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 14))))
        lines.append("".join(rng.choice(han) for _ in range(rng.randint(2, 8))) + rng.choice("，。、！？"))
        lines.append(str(rng.randint(0, 10 ** rng.randint(1, 7))) + rng.choice([",", ".", " ", "\n", "年"]))
        lines.append(" " + "".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))))
    return "\n".join(lines)


def gpt2_byte_order():
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    return printable + [b for b in range(256) if b not in printable]


def train_ranks(text, merges):
    """tiktoken-style BPE training: the most frequent adjacent pair (ties: the smallest bytes) becomes
    the next rank, until `merges` ranks were added or every piece is one token."""
    ranks = {bytes([b]): i for i, b in enumerate(gpt2_byte_order())}
    pieces = collections.Counter(p.encode("utf-8") for p in regex.findall(KIMI_PATTERN, text, flags=regex.V1))
    words = [([bytes([b]) for b in piece], count) for piece, count in pieces.items()]
    while len(ranks) < 256 + merges:
        pairs = collections.Counter()
        for parts, count in words:
            for a, b in zip(parts, parts[1:]):
                pairs[a, b] += count
        if not pairs:
            break
        best_count = max(pairs.values())
        a, b = min(pair for pair, count in pairs.items() if count == best_count)
        ranks[a + b] = len(ranks)
        for parts, _ in words:
            i = 0
            while i + 1 < len(parts):
                if parts[i] == a and parts[i + 1] == b:
                    parts[i:i + 2] = [a + b]
                i += 1
    for word in UNREACHABLE:
        ranks.setdefault(word.encode("utf-8"), len(ranks))
    return ranks


def special_tokens(num_base):
    return {KIMI_SPECIAL_TOKENS.get(i, f"<|reserved_token_{num_base + i}|>"): num_base + i
            for i in range(NUM_RESERVED_SPECIAL_TOKENS)}


def split_runs(s, longest):
    """Kimi's _split_whitespaces_or_nonwhitespaces: no piece holds more than `longest` whitespace or
    non-whitespace characters (str.isspace) in a row."""
    pieces, start, run, run_is_space = [], 0, 0, s[0].isspace() if s else False
    for i, ch in enumerate(s):
        if ch.isspace() != run_is_space:
            run, run_is_space = 1, ch.isspace()
        else:
            run += 1
            if run > longest:
                pieces.append(s[start:i])
                start, run = i, 1
    pieces.append(s[start:])
    return pieces


def kimi_encode(encoding, text):
    """TikTokenTokenizer.encode(text): tiktoken on chunks of at most 400,000 characters and runs of at
    most 25,000, special tokens allowed."""
    ids = []
    for i in range(0, len(text), 400_000):
        for piece in split_runs(text[i:i + 400_000], 25_000):
            ids += encoding.encode(piece, allowed_special="all")
    return ids


HARD_CASES = [
    "", "Hello, world!", "hello world", " leading space", "trailing space ", "a", " ", "\n",
    "你好，世界！今天天气很好。", "我爱Python编程和C++。Tandem的tokenizer很快",
    "中文abc中文", "ABC中DEF", "HelloWorld中文English混合テキストCamelCase",
    "I'm don't you'll they've we'd she's IT'S WE'LL I'D", "it'ſ THEY'Ve O'Neil's rock'n'roll ''s '",
    "1234567 3.14159 2025年7月11日 １２３ ١٢٣٤ ②③ ½ Ⅻ 〇〇七", "12345678901234567890",
    "a  b   c\t\td\n\n\ne  \n  f    ", "line1\r\nline2\rline3\n\n", "  \n\n  \t x", "x \u3000 y\u00a0z\u2003w",
    "a\u180eb \u180e\u180e c", "\u2028\u2029\u0085\x0b\x0c\x1c\x1d", "\t\t\tindented\n\t\tless\n",
    "👋🏽 🇩🇪 👨‍👩‍👧 ❤️‍🔥 😀😀😀 🦜🦜 🦜🦜🦜",
    "def f(x):\n    return x**2  # square\n", "    if (a != b && c <= d) { return -1; }\n",
    "naïve café résumé Ǆemal ǅemal ǈ e\u0301e\u0301 \u0301x",
    "Привет мир! Γειά σου κόσμε! مرحبا שלום नमस्ते สวัสดี", "こんにちは世界、東京。カタカナ々〇〻",
    "안녕하세요 세계", "ＡＢＣａｂｃ１２３！", "ǅungla ǅUNGLA Ǆungla",
    "、。「」（）：；！？", "\u3005\u3007\u3021\u303b\u2e80\u2f00",
    "\U00031350\U00031351 \U0002ebf0\U0002b739 \U00010d40\U00010d50\U00010d70 \U00016d43\U0001e4d0",
    "\U00020000\U0002a700 𠀀𪜀", "Zyzzyva qwxzq  qwxzq 魑魅魍魉  魑魅魍魉 ẞẞẞẞ",
    "<|im_user|>user<|im_middle|>Hi<|im_end|>", "[BOS]text[EOS]", "<|im_end|><|im_end|>",
    "before<|im_end|>after", "<|im_end|", "<|im_en", "|>", "<|reserved_token_{r5}|>x",
    "<think>reasoning</think>answer", "[UNK][PAD][EOT]", "<|«café»|> and «café»",
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
    "{\"city\": \"北京\"}<|tool_call_end|><|tool_calls_section_end|>",
    "email@example.com https://example.com/a?b=c&d=e#f", "C:\\Users\\name\\file.txt",
    "$19.99 €5 ¥1200 £3.50 50%", "∑∫√∞≈≠ → ⇒ ∀x∈S", "!!!???...---___***", " !!! ??? ...\n\n",
    "\r\n\r\n", "   \r\n", "x\n \n \ny", "It's 5 o'clock", "'s's's", "A'S", "ÀÉÎÕÜ àéîõü",
    "\u4e00\u9fff\u3400\uf900", "\ufeffBOM", "\u200b\u200c\u200d zero width", "\U0001f600\U0001f3fd\u200d",
]


def random_cases(rng, count):
    fragments = regex.findall(r"\S+|\s+", CORPUS) + [
        "<|im_end|>", "[BOS]", "<|im_middle|>", "'S", "'ll", "ſ", "\u0301", "\u180e", "\u3000", "\r\n", "\t",
        "𠀀", "\U00031350", "\U00010d45", "🦜", "👋🏽", "々", "〇", "１", "٣", "²", "Ⅻ", "ǅ", "ẞ", " ", "  ", "\n\n",
    ]
    cases = []
    for _ in range(count):
        cases.append("".join(rng.choice(fragments) for _ in range(rng.randint(1, 12))))
    return cases


# Long runs, where Kimi's encode cuts the text before tiktoken sees it: the text is the [text, repeat]
# parts joined.
LONG_CASES = [
    [["a", 30001]],                                # one run of letters, cut after 25,000 characters
    [[" ", 25001]],                                # whitespace runs are cut too
    [["中", 25010]],
    [["a", 20000], ["\x1c", 1], ["b", 20000]],    # \x1c is whitespace to str.isspace (not to \s): no cut
    [["a", 20000], ["\u180e", 1], ["b", 20000]],  # U+180E is not: one run of 40,001 characters, cut
    [["<|im_end|>", 1], ["x", 24995], ["<|im_end|>", 1], ["x", 24995]],  # special tokens count as run characters
    [["words ", 75000]],                           # 450,000 characters: a 400,000-character chunk ends in a word
]


def run_lengths(ids):
    runs = []
    for i in ids:
        if runs and runs[-1][0] == i:
            runs[-1][1] += 1
        else:
            runs.append([i, 1])
    return runs


def decode_cases(encoding, ranks, specials, rng):
    # Single ranks whose bytes are not UTF-8 on their own, pairs of them, every special token.
    partial = [r for b, r in ranks.items() if not valid_utf8(b)]
    cases = [[r] for r in partial[:40]]
    cases += [[rng.choice(partial), rng.choice(partial)] for _ in range(20)]
    cases.append(sorted(specials.values()))
    cases.append([ranks["中".encode()[:1]], ranks["中".encode()[1:2]], ranks["中".encode()[2:]]])
    cases.append([ranks["中".encode()[:1]], ranks[b"a"], ranks["中".encode()[1:2]]])
    cases.append([ranks["😀".encode()[:1]], ranks["😀".encode()[1:2]], ranks["😀".encode()[2:3]]])
    cases.append(list(range(len(ranks))))
    return [{"ids": ids, "text": encoding.decode(ids)} for ids in cases]


def valid_utf8(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def class_ranges(pattern):
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    probe = tiktoken.Encoding(name="probe", pat_str=pattern, mergeable_ranks={bytes([b]): b for b in range(256)},
                              special_tokens={})
    members = sorted(map(ord, bytes(probe.encode_ordinary(everything)).decode("utf-8")))
    ranges = []
    for c in members:
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return ranges


CONVERSATIONS = [
    [{"role": "user", "content": "你好！What's 2 + 2?"}],
    [{"role": "system", "content": "You are Kimi, an AI assistant created by Moonshot AI."},
     {"role": "user", "content": "Write a haiku about <|im_end|> tokens."},
     {"role": "assistant", "content": "Tokens stream like rain\n模型在思考\nthe answer appears"},
     {"role": "user", "content": "谢谢 🙏"}],
]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "tiktoken-kimi"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    ranks = train_ranks(corpus_text(), MERGES)
    num_base = len(ranks)
    specials = special_tokens(num_base)
    encoding = tiktoken.Encoding(name="tiktoken.model", pat_str=KIMI_PATTERN, mergeable_ranks=ranks,
                                 special_tokens=specials)

    with open(os.path.join(args.out, "tiktoken.model"), "w", encoding="ascii", newline="\n") as f:
        for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
            f.write(f"{base64.b64encode(token).decode()} {rank}\n")

    added = {str(num_base + offset): {"content": content, "lstrip": False, "normalized": False, "rstrip": False,
                                      "single_word": False, "special": content not in NOT_SPECIAL}
             for offset, content in sorted(KIMI_SPECIAL_TOKENS.items())}
    config = {
        "added_tokens_decoder": added,
        "additional_special_tokens": ["<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|start_header_id|>",
                                      "<|end_header_id|>", "[EOT]", "<|im_system|>", "<|im_middle|>"],
        "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]},
        "bos_token": "[BOS]",
        "clean_up_tokenization_spaces": False,
        "eos_token": "[EOS]",
        "extra_special_tokens": {},
        "model_max_length": 1000000000000000019884624838656,
        "pad_token": "[PAD]",
        "tokenizer_class": "TikTokenTokenizer",
        "unk_token": "[UNK]",
    }
    with open(os.path.join(args.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)
        f.write("\n")

    with open(os.path.join(ROOT, "tests", "text", "data", "kimi_k2.jinja"), encoding="utf-8") as f:
        template = f.read()
    with open(os.path.join(args.out, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(template)

    rng = random.Random(2025)
    texts = [t.replace("{r5}", str(num_base + 5)) for t in HARD_CASES] + random_cases(rng, 300)
    encode = [{"text": t, "ids": kimi_encode(encoding, t)} for t in texts]
    for case in encode:
        assert encoding.decode(case["ids"]) == case["text"], case["text"]
    for parts in LONG_CASES:
        text = "".join(part * repeat for part, repeat in parts)
        ids = kimi_encode(encoding, text)
        assert encoding.decode(ids) == text
        encode.append({"parts": parts, "ids_rle": run_lengths(ids)})
    tokens_for_chat = {"bos_token": "[BOS]", "eos_token": "[EOS]", "unk_token": "[UNK]", "pad_token": "[PAD]"}
    chat = []
    for messages in CONVERSATIONS:
        text = make_expected.apply_chat_template(template, tokens_for_chat, messages, True, {})
        chat.append({"messages": messages, "text": text, "ids": kimi_encode(encoding, text)})

    golden = {
        "generator": "scripts/make_tiktoken_fixture.py with tiktoken " + tiktoken.__version__,
        "pattern": KIMI_PATTERN,
        "num_base_tokens": num_base,
        "encode": encode,
        "decode": decode_cases(encoding, ranks, specials, rng),
        "chat": chat,
    }
    with open(os.path.join(args.out, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")

    classes = {pattern: class_ranges(pattern) for pattern in CLASSES}
    with open(os.path.join(args.out, "classes.json"), "w", encoding="utf-8") as f:
        json.dump(classes, f, separators=(",", ":"))
        f.write("\n")
    print(f"{args.out}: {num_base} ranks, {len(encode)} encode cases, {len(chat)} conversations")


if __name__ == "__main__":
    main()
