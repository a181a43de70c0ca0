#!/usr/bin/env python3
"""Batched decode end to end (issue 27): `tandem-cli serve --batch N` answers several greedy chat requests
at once exactly as it answers each alone. Starts the server on a free port (--device, --gpu-memory passed
on), asks each question alone, then every question twice at once, compares the texts and prints the
server's /health decode counters (batched steps, largest batch). Exits 1 on a difference, or when no step
was batched.

    python3 scripts/check_batched_decode.py --cli build/app/tandem-cli --model resources/models/pocket-dictionary --device gpu
"""
import argparse
import json
import re
import subprocess
import sys
import threading
import time
import urllib.request

QUESTIONS = ["river", "leather", "serendipity", "music", "harbor", "lantern"]


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cli", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--device", default="gpu")
    p.add_argument("--gpu-memory", default=None)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=96)
    args = p.parse_args()
    cmd = [args.cli, "serve", "--model", args.model, "--port", "0", "--device", args.device, "--batch", str(args.batch)]
    if args.gpu_memory:
        cmd += ["--gpu-memory", args.gpu_memory]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log, port = [], None
    try:
        deadline = time.time() + 300
        while port is None and time.time() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            log.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                port = int(m.group(1))
        if port is None:
            print("the server did not start:\n" + "".join(log[-20:]))
            return 1
        threading.Thread(target=lambda: [log.append(l) for l in server.stdout], daemon=True).start()

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=30) as r:
            model = json.loads(r.read())["data"][0]["id"]

        def ask(word):
            body = {"model": model, "messages": [{"role": "user", "content": f"What does {word} mean?"}],
                    "temperature": 0, "max_tokens": args.max_tokens}
            return post(port, body)["choices"][0]["message"]["content"]

        alone = {w: ask(w) for w in QUESTIONS}
        answers = [None] * (2 * len(QUESTIONS))

        def client(i):
            answers[i] = ask(QUESTIONS[i % len(QUESTIONS)])

        threads = [threading.Thread(target=client, args=(i,)) for i in range(len(answers))]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.time() - t0
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=30) as r:
            health = json.loads(r.read())
        differ = [i for i, a in enumerate(answers) if a != alone[QUESTIONS[i % len(QUESTIONS)]]]
        decode = health.get("decode", {})
        print(f"{len(answers)} requests at once in {seconds:.1f} s, {len(differ)} differ from their answer alone; "
              f"decode steps {decode.get('steps')}, batched {decode.get('batched_steps')}, largest batch {decode.get('largest_batch')}")
        for i in differ[:4]:
            w = QUESTIONS[i % len(QUESTIONS)]
            print(f"  {w}: alone {alone[w][:80]!r}\n  {' ' * len(w)}  batch {answers[i][:80]!r}")
        ok = not differ and (decode.get("batched_steps") or 0) > 0
        print("batched decode: " + ("same answers" if ok else "FAILED"))
        return 0 if ok else 1
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    sys.exit(main())
