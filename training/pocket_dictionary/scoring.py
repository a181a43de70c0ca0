"""How well the pocket dictionary's answers match WordNet: shared by train.py and evaluate.py."""


def first_definition(answer):
    line = answer.split("\n")[1] if answer.count("\n") else answer
    return line.split(") ", 1)[1].split(" Example:")[0]


def token_f1(a, b):
    a, b = a.lower().split(), b.lower().split()
    common = sum(min(a.count(w), b.count(w)) for w in set(a))
    if common == 0:
        return 0.0
    p, r = common / len(a), common / len(b)
    return 2 * p * r / (p + r)


def score(items, outputs):
    """Per split: exact (the whole answer), definition (the first sense's definition appears), token F1."""
    table = {}
    for item, out in zip(items, outputs):
        s = table.setdefault(item["split"], {"n": 0, "exact": 0, "definition": 0, "f1": 0.0})
        s["n"] += 1
        s["exact"] += out.strip() == item["answer"]
        s["definition"] += first_definition(item["answer"]) in out
        s["f1"] += token_f1(out, item["answer"])
    for s in table.values():
        s["exact"] /= s["n"]
        s["definition"] /= s["n"]
        s["f1"] /= s["n"]
    return table
