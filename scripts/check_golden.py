#!/usr/bin/env python3
"""Runs `tandem-cli eval` on every fixture and prompt, on each requested device, and compares every
logits row with the transformers reference in golden.safetensors (and the devices with each other).
Prints one table row per (fixture, prompt, device). Used on the GPU machine, where the Qt test suites
are not built; needs only numpy.

usage: check_golden.py --cli PATH --fixtures DIR [--device cpu --device gpu] [--defer D] [--tolerance T]
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np


def read_safetensors(path):
    raw = open(path, 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    types = {'F32': np.float32, 'I32': np.int32}
    out = {}
    for name, meta in header.items():
        if name == '__metadata__':
            continue
        begin, end = meta['data_offsets']
        out[name] = np.frombuffer(raw[8 + n + begin:8 + n + end], dtype=types[meta['dtype']]).reshape(meta['shape'])
    return out


def run_eval(cli, model, ids, new_tokens, device, extra, tmp):
    ids_path = os.path.join(tmp, 'ids.txt')
    out_path = os.path.join(tmp, f'logits-{device}.bin')
    with open(ids_path, 'w') as f:
        f.write(' '.join(map(str, ids)))
    cmd = [cli, 'eval', '--model', model, '--ids-file', ids_path, '--new-tokens', str(new_tokens), '--logits-out',
           out_path, '--device', device] + extra
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f'{" ".join(cmd)} failed: {done.stderr.strip()}')
    logits = np.fromfile(out_path, dtype=np.float32)
    return logits, [int(t) for t in done.stdout.split()], done.stderr


def rel_l2(a, b):
    return np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--cli', required=True)
    p.add_argument('--fixtures', required=True)
    p.add_argument('--device', action='append', default=[])
    p.add_argument('--defer', type=int, default=0)
    p.add_argument('--tolerance', type=float, default=2e-2)
    args = p.parse_args()
    devices = args.device or ['cpu', 'gpu']
    # teacher-forced: every prompt row computed as a decode step with deferral would be
    extra = ['--defer', str(args.defer), '--defer-prefill'] if args.defer else []
    failures = 0
    print(f'{"fixture":22} {"prompt":6} {"device":6} {"worst rel L2":>12} {"median":>9} {"rows>tol":>8} {"greedy":>8} '
          f'{"vs cpu":>10}')
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(os.listdir(args.fixtures)):
            model = os.path.join(args.fixtures, name)
            if not name.startswith('tiny-'):
                continue
            golden = read_safetensors(os.path.join(model, 'golden.safetensors'))
            for prompt in ('chat', 'long'):
                ids = golden[f'{prompt}.prompt_ids'].tolist()
                gen_ids = golden[f'{prompt}.gen_ids'].tolist()
                ref = np.concatenate([golden[f'{prompt}.prefill_logits'], golden[f'{prompt}.gen_logits']])
                vocab = ref.shape[1]
                results = {}
                for device in devices:
                    logits, tokens, _ = run_eval(args.cli, model, ids, len(gen_ids), device, extra, tmp)
                    logits = logits.reshape(-1, vocab)
                    results[device] = logits
                    errors = rel_l2(logits, ref)
                    worst = float(errors.max())
                    # Greedy ids must match wherever the reference's top-1 margin exceeds the error.
                    agree = 'ok'
                    for i, (got, want) in enumerate(zip(tokens, gen_ids)):
                        if got != want:
                            row = np.sort(golden[f'{prompt}.gen_logits'][i])
                            margin = row[-1] - row[-2]
                            agree = f'step {i}' + ('' if margin < 0.05 else '!')
                            if margin >= 0.05:
                                failures += 1
                            break
                    vs_cpu = ''
                    if device != 'cpu' and 'cpu' in results:
                        vs_cpu = f'{float(rel_l2(logits, results["cpu"]).max()):.2e}'
                    tolerance = 1e-3 if device == 'cpu' else args.tolerance
                    over = int((errors > tolerance).sum())
                    if over and not args.defer:
                        failures += 1
                    print(f'{name:22} {prompt:6} {device:6} {worst:12.2e} {float(np.median(errors)):9.2e} '
                          f'{over:>4}/{len(errors):<3} {agree:>8} {vs_cpu:>10}', flush=True)
    print('all within tolerance' if failures == 0 else f'{failures} FAILURES')
    return 0 if failures == 0 else 1


if __name__ == '__main__':
    sys.exit(main())
