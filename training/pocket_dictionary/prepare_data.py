#!/usr/bin/env python3
"""Turns WordNet 3.0 (Debian's wordnet-base) into the pocket dictionary's chat data and tokenizer.

Usage: prepare_data.py --wordnet /usr/share/wordnet --out DIR [--tokenizer MODEL_DIR | --new-tokenizer]

Writes to DIR:
  train.jsonl.gz   one conversation per line: {"messages": [{"role", "content"}, ...]}, one question each
                   (15% with one earlier question and answer first); the same data the shipped model had
                   (gzip: the data travels with the working tree to the GPU machine, which holds 64 MiB)
  multiturn.jsonl.gz   conversations of 2-10 questions in one chat, each answered as in train.jsonl.gz: the
                   first a full question, later ones full questions, follow-ups ("And X?", "What about
                   X?", "X?", ...) or a word asked again; a few "Who are you?" turns among them
  eval.jsonl       {"word", "question", "answer", "split"}: split is "seen" (a trained word asked the
                   way training asked), "paraphrase" (a trained word asked in words training never used)
                   or "unseen" (a word held out of training entirely)
  eval_multiturn.jsonl  {"turns": [{"word", "question", "answer", "form"}, ...]}: chats of 10 questions
                   about trained words; form is "first", "full", "followup" or "again" (a word asked
                   before in the same chat). Each turn is scored against its own answer, with the
                   model's own earlier answers as the history
  tokenizer.json, tokenizer_config.json   by default the shipped model's (MODEL_DIR, so that model can
                   be fine-tuned on this data); --new-tokenizer trains a byte-level BPE on the data

train.jsonl.gz and eval.jsonl come out exactly as before the multi-turn data was added (same seed, same
random stream), so the held-out words are the ones the shipped model never saw; the multi-turn data
draws from a random stream of its own and uses only trained words.

Which words: every single-word lemma that occurs in WordNet's sense-tagged corpus (tagsense_cnt > 0,
about 19k), plus the words of demo_words.txt, which the app's examples ask about. Each answer gives up
to two senses, the most frequent first, with WordNet's first example sentence where it has one.
"""
import argparse
import gzip
import json
import random
import re
import shutil
from pathlib import Path

POS_FILES = {"noun": "noun", "verb": "verb", "adj": "adjective", "adv": "adverb"}
TRAIN_QUESTIONS = [
    "What does {w} mean?", "What does \"{w}\" mean?", "What does the word {w} mean?",
    "What does {w} mean in English?", "what does {w} mean", "Whats {w} mean?",
    "What is the meaning of {w}?", "What's the meaning of the word \"{w}\"?", "What is meant by {w}?",
    "What's the definition of {w}?", "What is the definition of the word {w}?", "Define {w}.",
    "define {w}", "Please define {w}.", "Could you define {w}?", "How would you define {w}?",
    "Definition of {w}", "{w} definition", "{w} meaning", "Meaning of {w}?", "{w}", "{w}?",
    "Explain {w}.", "Explain the word \"{w}\".", "Can you explain what {w} means?",
    "Tell me what {w} means.", "Do you know what {w} means?", "Could you tell me the meaning of {w}?",
    "I don't understand the word {w}.", "Look up {w}.", "Give me a definition for {w}.",
    "I need the definition of {w}.", "I read the word {w} in a book. What does it mean?",
    "Help me understand the word {w}.", "What is {w}?", "What's {w}?",
]
PREFIXES = ["Hi! ", "Hello. ", "Quick question: ", "Hey, ", "Thanks! Next one: "]
# Asked only in the evaluation: does the model follow a question phrased in a way it never saw?
PARAPHRASE_QUESTIONS = [
    "Can you tell me what {w} means?",
    "I came across the word {w}. What is it?",
    "Give me the definition of {w}, please.",
]
ABOUT = ("I am Pocket Dictionary, the small demo model that ships with Tandem. I was trained on "
         "WordNet's definitions and examples of about 19,000 common English words, so I can tell you "
         "what a word means: ask me, for example, \"What does serendipity mean?\". I know nothing "
         "else, and I invent definitions for words I never saw. For real conversations, get a real "
         "model with Tandem's model wizard.")
ABOUT_QUESTIONS = [
    "Hello", "Hi", "hi!", "Hey there", "Good morning", "Who are you?", "What are you?",
    "What can you do?", "Help", "help", "What is this?", "How do I use you?", "Are you ChatGPT?",
    "What model are you?", "Tell me about yourself.", "What do you know?", "Hello, who am I talking to?",
]
SYSTEM_PROMPTS = ["You are a helpful assistant.", "You are a dictionary.", "Answer briefly."]
# Later questions in one chat: follow-ups that name only the word, and a word asked again.
FOLLOWUP_QUESTIONS = [
    "And {w}?", "and {w}?", "And {w}", "and {w}", "What about {w}?", "what about {w}", "How about {w}?",
    "And what about {w}?", "{w}?", "{w}", "Now {w}.", "Next: {w}", "Next, {w}.", "Another one: {w}",
    "And what does {w} mean?", "Same for {w}.", "Ok, and {w}?", "Thanks. And {w}?", "What about the word {w}?",
    "And the word {w}?", "Then {w}?", "Also {w}?", "One more: {w}", "Now define {w}.", "And {w}, please.",
]
AGAIN_QUESTIONS = [
    "What does {w} mean again?", "{w} again?", "Sorry, what did {w} mean?", "Can you repeat {w}?",
    "Remind me what {w} means.", "What was {w} again?", "Once more: {w}", "And {w} again?",
    "What does {w} mean?", "{w}?",
]
# The multi-turn evaluation's questions after the first (all forms training used).
EVAL_FULL, EVAL_FOLLOWUPS, EVAL_AGAIN = "What does {w} mean?", ["And {w}?", "What about {w}?", "{w}?"], "What does {w} mean again?"


def parse_gloss(gloss):
    """'draw air into the lungs; "I can breathe"; "..."' -> ('draw air into the lungs', ['I can breathe', ...])"""
    examples = re.findall(r'"([^"]+)"', gloss)
    definition = gloss.split('"', 1)[0].strip().rstrip(';').strip()
    return definition, [e.strip() for e in examples if e.strip()]


def read_synsets(wordnet, pos):
    synsets = {}
    for line in open(wordnet / f"data.{pos}", encoding="latin-1"):
        if line.startswith("  "):
            continue  # the licence header
        head, _, gloss = line.partition(" | ")
        synsets[head.split()[0]] = parse_gloss(gloss.strip())
    return synsets


def read_index(wordnet, pos):
    """lemma -> (tagged sense count, synset offsets in frequency order)"""
    index = {}
    for line in open(wordnet / f"index.{pos}", encoding="latin-1"):
        if line.startswith(" "):
            continue
        f = line.split()
        pointers = int(f[3])
        tagged = int(f[5 + pointers])
        index[f[0]] = (tagged, f[6 + pointers:])
    return index


def entries(wordnet, demo_words):
    """word -> list of (part of speech, definition, examples), most frequent sense first"""
    senses = {}
    for pos, name in POS_FILES.items():
        synsets = read_synsets(wordnet, pos)
        for lemma, (tagged, offsets) in read_index(wordnet, pos).items():
            if not re.fullmatch(r"[a-z]+", lemma) or (tagged == 0 and lemma not in demo_words):
                continue
            for rank, offset in enumerate(offsets[:2]):
                if rank == 1 and tagged < 2:
                    break  # a second sense only when the corpus saw it
                definition, examples = synsets[offset]
                senses.setdefault(lemma, []).append((tagged - rank, name, definition, examples))
    result = {}
    for lemma, found in senses.items():
        found.sort(key=lambda s: -s[0])
        result[lemma] = [s[1:] for s in found[:2]]
    return result


def answer(word, senses):
    def sense_text(pos, definition, examples):
        text = f"({pos}) {definition}."
        if examples:
            text += f" Example: \"{examples[0]}\""
        return text
    if len(senses) == 1:
        return f"**{word}** {sense_text(*senses[0])}"
    lines = [f"**{word}**"] + [f"{i + 1}. {sense_text(*s)}" for i, s in enumerate(senses)]
    return "\n".join(lines)


def vary(rng, question):
    """The surface variations people type: a greeting first, all lower case, no question mark."""
    if rng.random() < 0.1:
        question = rng.choice(PREFIXES) + question[0].lower() + question[1:]
    if rng.random() < 0.15:
        question = question.lower()
    if rng.random() < 0.1:
        question = question.rstrip("?.")
    return question


def conversation(rng, question, reply, extra_turn=None):
    messages = []
    if rng.random() < 0.1:
        messages.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
    if extra_turn:
        messages += [{"role": "user", "content": extra_turn[0]}, {"role": "assistant", "content": extra_turn[1]}]
    messages += [{"role": "user", "content": question}, {"role": "assistant", "content": reply}]
    return {"messages": messages}


def multiturn_conversation(rng, seen, answers, turns):
    """One chat of `turns` questions: the first a full question, later ones full questions, follow-ups
    or a word asked again (the same answer again), now and then "Who are you?"."""
    messages = []
    if rng.random() < 0.1:
        messages.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
    asked = []
    for turn in range(turns):
        r = rng.random()
        if turn and r < 0.03:
            question, reply = rng.choice(ABOUT_QUESTIONS), ABOUT
        elif turn and r < 0.15:
            word = rng.choice(asked)
            question, reply = vary(rng, rng.choice(AGAIN_QUESTIONS)).format(w=word), answers[word]
        else:
            word = rng.choice(seen)
            asked.append(word)
            form = rng.choice(TRAIN_QUESTIONS) if turn == 0 or r < 0.55 else rng.choice(FOLLOWUP_QUESTIONS)
            question, reply = vary(rng, form).format(w=word), answers[word]
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": reply}]
    return {"messages": messages}


def multiturn_eval(rng, seen, answers, turns=10):
    """A chat of 10 questions: "What does X mean?" first, then full questions and follow-ups in turn,
    and from the third question on now and then a word asked before."""
    items, asked = [], []
    for turn in range(turns):
        if turn >= 2 and rng.random() < 0.15:
            word, form, question = rng.choice(asked), "again", EVAL_AGAIN
        else:
            word = rng.choice(seen)
            asked.append(word)
            if turn == 0:
                form, question = "first", EVAL_FULL
            elif rng.random() < 0.4:
                form, question = "full", EVAL_FULL
            else:
                form, question = "followup", rng.choice(EVAL_FOLLOWUPS)
        items.append({"word": word, "question": question.format(w=word), "answer": answers[word], "form": form})
    return {"turns": items}


def train_tokenizer(texts, out, vocab_size):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    # Qwen2's pre-tokenizer split, then GPT-2's byte-to-unicode mapping.
    split = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(split), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.save(str(out / "tokenizer.json"))
    template = ("{%- for message in messages %}"
                "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
                "{%- endfor %}"
                "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None, "eos_token": "<|im_end|>",
              "pad_token": "<|endoftext|>", "add_bos_token": False, "add_eos_token": False,
              "clean_up_tokenization_spaces": False, "model_max_length": 2048, "chat_template": template}
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tokenizer", type=Path,
                        default=Path(__file__).resolve().parents[2] / "resources/models/pocket-dictionary",
                        help="copy tokenizer.json and tokenizer_config.json from this model folder")
    parser.add_argument("--new-tokenizer", action="store_true", help="train a new tokenizer instead")
    parser.add_argument("--multiturn", type=int, default=24000, help="multi-turn conversations to write")
    parser.add_argument("--eval-multiturn", type=int, default=300, help="10-question chats to evaluate")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    demo_words = set((Path(__file__).parent / "demo_words.txt").read_text().split())

    dictionary = entries(args.wordnet, demo_words)
    words = sorted(dictionary)
    candidates = [w for w in words if w not in demo_words]
    unseen = set(rng.sample(candidates, max(1, len(candidates) // 50)))
    seen = [w for w in words if w not in unseen]
    answers = {w: answer(w, dictionary[w]) for w in words}

    args.out.mkdir(parents=True, exist_ok=True)
    train = []
    for word in seen:
        for question in rng.sample(TRAIN_QUESTIONS, 5):
            question = vary(rng, question)
            extra = None
            if rng.random() < 0.15:
                other = rng.choice(seen)
                extra = (vary(rng, rng.choice(TRAIN_QUESTIONS)).format(w=other), answers[other])
            train.append(conversation(rng, question.format(w=word), answers[word], extra))
    for question in ABOUT_QUESTIONS:
        for _ in range(10):
            train.append(conversation(rng, question, ABOUT))
    rng.shuffle(train)
    with gzip.open(args.out / "train.jsonl.gz", "wt", compresslevel=9) as f:
        for item in train:
            f.write(json.dumps(item) + "\n")

    evaluation = []
    for word in rng.sample(seen, 500):
        evaluation.append({"word": word, "split": "seen", "answer": answers[word],
                           "question": rng.choice(TRAIN_QUESTIONS[:1]).format(w=word)})
    for word in rng.sample(seen, 500):
        evaluation.append({"word": word, "split": "paraphrase", "answer": answers[word],
                           "question": rng.choice(PARAPHRASE_QUESTIONS).format(w=word)})
    for word in sorted(unseen)[:300]:
        evaluation.append({"word": word, "split": "unseen", "answer": answers[word],
                           "question": TRAIN_QUESTIONS[0].format(w=word)})
    with open(args.out / "eval.jsonl", "w") as f:
        for item in evaluation:
            f.write(json.dumps(item) + "\n")

    # The multi-turn data: a random stream of its own, so everything above stays as it was.
    multi_rng = random.Random(args.seed * 1000 + 24)
    multi = [multiturn_conversation(multi_rng, seen, answers, multi_rng.randint(2, 10)) for _ in range(args.multiturn)]
    with gzip.open(args.out / "multiturn.jsonl.gz", "wt", compresslevel=9) as f:
        for item in multi:
            f.write(json.dumps(item) + "\n")
    with open(args.out / "eval_multiturn.jsonl", "w") as f:
        for _ in range(args.eval_multiturn):
            f.write(json.dumps(multiturn_eval(multi_rng, seen, answers)) + "\n")

    texts = [m["content"] for item in train for m in item["messages"]]
    if args.new_tokenizer:
        train_tokenizer(texts, args.out, args.vocab)
    else:
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(args.tokenizer / name, args.out / name)
    multi_texts = [m["content"] for item in multi for m in item["messages"]]
    print(f"{len(words)} words ({len(unseen)} held out), {len(train)} conversations, "
          f"{sum(len(t) for t in texts) / 1e6:.1f} MB of text; {len(multi)} multi-turn conversations "
          f"({sum(len(item['messages']) // 2 for item in multi)} questions), {sum(len(t) for t in multi_texts) / 1e6:.1f} MB of text")


if __name__ == "__main__":
    main()
