#!/usr/bin/env python3
"""Expert Deferral's cost in quality: for every fixture's `long` prompt (teacher-forced prefill rows),
top-1 agreement and mean KL divergence of `--defer D` and `--skip D` against d = 0, for each D from 1
to k - 1. Prints a Markdown table. Needs numpy.

usage: deferral_quality.py --cli PATH --fixtures DIR [--device cpu|gpu]
"""
import argparse
import json
import os
import struct
import subprocess
import tempfile

import numpy as np


def prompt_ids(path):
    raw = open(path, 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    meta = json.loads(raw[8:8 + n])['long.prompt_ids']
    begin, end = meta['data_offsets']
    return np.frombuffer(raw[8 + n + begin:8 + n + end], dtype=np.int32)


def logits(cli, model, ids_file, device, extra, out):
    subprocess.run([cli, 'eval', '--model', model, '--ids-file', ids_file, '--new-tokens', '0', '--logits-out', out,
                    '--device', device] + extra, check=True, capture_output=True)
    return np.fromfile(out, dtype=np.float32)


def log_softmax(x):
    x = x - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--cli', required=True)
    p.add_argument('--fixtures', required=True)
    p.add_argument('--device', default='cpu')
    args = p.parse_args()
    print('| fixture | k | d | defer: top-1 | defer: KL | skip: top-1 | skip: KL |')
    print('|---|---:|---:|---:|---:|---:|---:|')
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(os.listdir(args.fixtures)):
            if not name.startswith('tiny-'):
                continue
            model = os.path.join(args.fixtures, name)
            config = json.load(open(os.path.join(model, 'config.json')))
            k = config['num_experts_per_tok']
            ids = prompt_ids(os.path.join(model, 'golden.safetensors'))
            ids_file = os.path.join(tmp, 'ids.txt')
            open(ids_file, 'w').write(' '.join(map(str, ids)))
            out = os.path.join(tmp, 'logits.bin')
            vocab = config['vocab_size']
            exact = log_softmax(logits(args.cli, model, ids_file, args.device, [], out).reshape(-1, vocab))
            for d in range(1, k):
                row = []
                for mode in ('--defer', '--skip'):
                    # teacher-forced: each prompt row computed as a decode step with deferral would be
                    got = log_softmax(logits(args.cli, model, ids_file, args.device, [mode, str(d), '--defer-prefill'],
                                             out).reshape(-1, vocab))
                    agree = float((got.argmax(1) == exact.argmax(1)).mean())
                    kl = float((np.exp(exact) * (exact - got)).sum(1).mean())
                    row += [f'{100 * agree:.1f}%', f'{kl:.2e}']
                print(f'| {name} | {k} | {d} | ' + ' | '.join(row) + ' |', flush=True)


if __name__ == '__main__':
    main()
