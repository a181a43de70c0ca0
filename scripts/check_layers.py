#!/usr/bin/env python3
"""Fails when a source file includes a folder above its own (docs/ARCHITECTURE.md, "Folders").

The layers, top to bottom; a folder may include itself and what the table allows, nothing else:

    app                 the executables: ui, hub, the engine's public API (tandem/) and the bench library
    ui/shell            builds and starts the desktop app (TandemApp, the screenshot): anything in ui/
    ui/widgets          the window and its views; they show models and call the controllers
    ui/wizard           the model wizard (its pages are widgets; opened by the window)
    ui/controllers      what the user does (model, chat, generation options): logic, no widgets
    ui/models           Qt item models over the store, the monitor and the engine's figures
    ui/settings         typed QSettings, the XDG folders (the load request's enums from ui/worker)
    ui/store, ui/monitor, ui/worker
                        SQLite; machine readings; the engine thread (EngineWorker, LoadedModel)
    ui/text, ui/chat    the engine's chat template behind ChatFormatter; Markdown split into blocks
    hub                 the Hugging Face client (Qt Network only): nothing of ours
    engine/bench        measurement tools (tandem-cli bench-moe, kernel checks): below the app only
    engine/runtime      Engine and Session, sampling, chat, runners and placement
    engine/convert      tandem-cli convert and the wizard's estimates
    engine/model        model families, the forward pass, weights, KV cache
    engine/text         tokenizer, chat templates
    engine/cpu          CPU kernels, thread pools
    engine/cuda         GPU kernels, buffers, cuBLAS
    engine/io           files and formats
    engine/include      the public API (tandem/): standard headers only

Run from anywhere: python3 scripts/check_layers.py [ROOT]. Prints every upward include with its file
and line and exits 1 if there is one; CI runs it (.ci/run) and tst_layers asserts it.
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))

# The folder of an include path as written ("io/gguf.h" -> engine/io; "tandem/engine.h" -> engine/include;
# "ui/widgets/x.h" -> ui/widgets; "hub/hub_client.h" -> hub): the first path component (ui's first two),
# resolved against the folders that own it.
ENGINE = ["bench", "runtime", "convert", "model", "text", "cpu", "cuda", "io"]
# ui's folders, bottom up: each may include the ones listed for it (those below it, never a peer).
UI_BELOW = {
    "ui/chat": set(),
    "ui/text": {"engine/include"},
    "ui/monitor": set(),
    "ui/store": {"engine/include"},
    "ui/worker": {"ui/text", "engine/include"},
}
UI_BELOW["ui/settings"] = {"ui/worker", "hub"} | UI_BELOW["ui/worker"]
UI_BELOW["ui/models"] = {"ui/store", "ui/monitor", "ui/worker"} | UI_BELOW["ui/store"] | UI_BELOW["ui/worker"]
UI_BELOW["ui/controllers"] = {"ui/models", "ui/settings", "ui/chat"} | UI_BELOW["ui/models"] | UI_BELOW["ui/settings"]
UI_BELOW["ui/wizard"] = {"ui/controllers"} | UI_BELOW["ui/controllers"]
UI_BELOW["ui/widgets"] = {"ui/wizard"} | UI_BELOW["ui/wizard"]
UI_BELOW["ui/shell"] = {"ui/widgets"} | UI_BELOW["ui/widgets"]
ALLOWED = {
    "app": set(UI_BELOW) | {"hub", "engine/include", "engine/bench"},
    **UI_BELOW,
    "hub": set(),
    "engine/bench": {"engine/include", "engine/runtime", "engine/model", "engine/cpu", "engine/io"},
    "engine/runtime": {"engine/include", "engine/convert", "engine/model", "engine/text", "engine/cpu", "engine/cuda",
                       "engine/io"},
    "engine/convert": {"engine/include", "engine/model", "engine/text", "engine/cpu", "engine/io"},
    "engine/model": {"engine/include", "engine/cpu", "engine/io"},
    "engine/text": {"engine/include", "engine/io"},
    "engine/cpu": {"engine/include", "engine/io"},
    "engine/cuda": {"engine/include", "engine/io"},
    "engine/io": {"engine/include"},
    "engine/include": set(),
}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SOURCE = (".h", ".cpp", ".cu", ".cuh")


def folder_of_file(rel):
    parts = rel.split(os.sep)
    if parts[0] in ("engine", "ui") and len(parts) > 2:
        return parts[0] + "/" + parts[1]
    return parts[0]


def folder_of_include(path, including):
    parts = path.split("/")
    first = parts[0]
    top = including.split("/")[0]
    if first == "tandem":
        return "engine/include"
    if first in ENGINE and top == "engine":
        return "engine/" + first
    if first in ENGINE and top in ("app", "ui", "hub") and os.path.isdir(os.path.join(ROOT, "engine", first)):
        return "engine/" + first
    if first == "ui" and len(parts) > 2:
        return "ui/" + parts[1]
    if first == "hub":
        return "hub"
    return None  # same folder (a file beside it), generated, or a test helper


def main():
    problems = []
    checked = 0
    for top in ["app", "ui", "hub", "engine"]:
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if not name.endswith(SOURCE):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, ROOT)
                own = folder_of_file(rel)
                if own not in ALLOWED:
                    continue
                checked += 1
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = folder_of_include(m.group(1), own)
                        if target and target != own and target not in ALLOWED[own]:
                            problems.append(f"{rel}:{number}: {own} includes {m.group(1)} ({target}), which is not below it")
    if checked == 0:
        print("check_layers: no source files found under " + ROOT, file=sys.stderr)
        return 1
    for p in problems:
        print(p)
    print(f"check_layers: {checked} files, {len(problems)} upward includes")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
