// tandem-cli: the engine from the command line. Wiring only: each command lives in its own file.
#include <algorithm>
#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "cli_verify.h"
#include "commands.h"
#include "stack_dump.h"
#include "tandem/build_info.h"
#include "tandem/engine.h"
#include "tandem/error.h"

namespace {

constexpr const char* kUsage = R"(usage: tandem-cli COMMAND [options]

commands:
  bench-moe --shape deepseek-v3|qwen3-30b-a3b|deepseek-v2-lite --experts bf16|int8|int4|mxfp4
            [--tokens N[,N...]] [--threads N] [--json] [--verify] [--kernels auto|gemv|gemm]
            [--gemm-min-rows N] [--experts-in-memory N] [--seconds S] [--sweep ROWS[,ROWS...]]
            [--defer D] [--phases] [--verify-shape ci|full]
  bench-moe --tile-peak [--threads N]
            Time one MoE layer of that model's shape (random weights and routing) on the CPU expert
            engine next to the memory bandwidth measured in the same run. --verify first checks the
            selected kernels (TANDEM_CPU_ISA) against the scalar ones; --sweep times GEMV against
            GEMM kernels at the given rows per expert; --defer D runs each layer as the GPU path's
            two parts with Expert Deferral (top-k minus D experts, then D). With --json the last
            line is a JSON object. --phases times the layer's phases on every thread (conversions,
            gate/up, down, barriers, idle) and prints each one's share. --tile-peak measures the AMX tile unit's throughput instead (one
            thread and all), the ceiling the AMX kernels' TFLOP/s compare with. --verify-shape checks the
            selected kernels against the scalar ones at the shape's widths instead, every expert where it
            lies in the layer (--experts-in-memory N: the first N): ci runs every expert with 1 row and
            three with 1..64, full every expert with 1..64 rows; both then the layer's decode.
  convert   --model DIR|FILE.gguf --out STORE --experts bf16|int8|int4 [--dense checkpoint|int8|bf16] [--threads N] [--verify]
            Pack a Hugging Face MoE checkpoint (bf16 or DeepSeek FP8) or a llama.cpp GGUF (qwen3moe,
            deepseek2, Mixtral; F32/F16/BF16/Q8_0/Q4_0/Q4_K/Q5_K/Q6_K/IQ4_XS; any part of a split
            file) into a Tandem store: the routed experts in the CPU kernels' layout, everything else
            unchanged (a GGUF's quantized dense tensors as bf16). Works in STORE.partial and renames
            it at the end; run the same command again to resume an interrupted conversion.
            --dense int8 writes the dense weights (attention, dense and shared MLPs, output head) as
            int8 with a scale per row, as --dense int8 would quantize them at load; bf16 rounds or
            widens them to bf16; checkpoint (default) keeps them as the input has them.
            --verify then reads the whole store back against its checksums; with --out and --verify
            alone it checks an existing store. Either way the result is recorded in
            STORE/tandem-verified.json, which a finished conversion also writes.
  download  REPO --out DIR [--revision R] [--include GLOB]... [--token T] [--endpoint URL] [--parallel N]
            Download a Hugging Face repository (e.g. Qwen/Qwen3-30B-A3B) into DIR: several files at once,
            each checked against the Hub's sha256 before it is moved into place, with retries. --include
            picks files by pattern ("*.json", "model-0000[1-2]*"). The token (for gated or private
            repositories) and the endpoint (a mirror) default to HF_TOKEN and HF_ENDPOINT. Ctrl-C keeps
            the partial files in DIR/.tandem-download; the same command resumes them.
  eval      --model DIR --ids-file FILE --new-tokens N --logits-out FILE [--threads N]
            [--device cpu|gpu|auto] [--gpu-memory SIZE] [--gpus N[,N...]|all] [--experts TYPE] [--dense int8|int4] [--kv-cache f32|int8] [--defer D | --skip D] [--defer-prefill] [--no-verify]
            [--forced-ids FILE] [--router-out FILE]
            Prefill the prompt ids in FILE, then decode N tokens greedily. Writes every logits row
            (prompt positions, then one row per generated token) as little-endian float32 to the
            --logits-out file and prints the generated ids. --forced-ids: teacher forcing, step i runs
            the i-th id of that file instead of the greedy choice (N defaults to their count; the ids
            printed are still each row's greedy choice). --router-out (CPU path): the router's choice
            scores at every position run, float32 [positions][MoE layers][experts].
  generate  --model DIR (--ids "ID ..." | --ids-file FILE | --prompts-file FILE) [--new-tokens N]
            [--temperature T] [--top-p P] [--top-k K] [--min-p P] [--repetition-penalty R]
            [--presence-penalty P] [--frequency-penalty F] [--seed S] [--threads N] [--context N]
            [--device cpu|gpu|auto] [--gpu-memory SIZE] [--gpus N[,N...]|all] [--experts TYPE] [--dense int8|int4] [--kv-cache f32|int8] [--defer D | --skip D] [--defer-prefill] [--no-verify]
            Generate from prompt ids, printing ids as they come and the speed at the end.
            --prompts-file holds one prompt per line; each gets a fresh session and one output line.
  chat      --model DIR [--system TEXT] [--stop TEXT]... [--no-think] [--reasoning-effort low|medium|high] [--max-tokens N]
            [--temperature T] [--top-p P] [--top-k K] [--min-p P] [--repetition-penalty R] [--seed S]
            [--threads N] [--context N] [--device cpu|gpu|auto] [--gpu-memory SIZE] [--gpus N[,N...]|all] [--experts TYPE] [--dense int8|int4] [--kv-cache f32|int8] [--defer D]
            [--defer-prefill] [--no-verify]
            An interactive chat with the model's own chat template: type a message, the answer streams
            (reasoning dimmed), then the speed; /reset, /system TEXT and /quit.
  bench     --model DIR|STORE | --synthetic deepseek-v2-lite|qwen3-30b-a3b|deepseek-v3-4l|glm-4.5-air|tiny
            [--experts TYPE] [--dense int8|int4] [--kv-cache f32|int8] [--prompt 512[,2048...]] [--depth N[,N...]] [--gen 128]
            [--defer D[,D...]] [--threads N] [--device cpu|gpu|auto] [--gpu-memory SIZE] [--gpus N[,N...]|all] [--streams S[,S...]]
            [--seed N] [--context N] [--json] [--no-verify] [--no-warmup]
            A model (or random weights of a real model's shapes): prefill, then decode, with the time
            split and the decode ceiling (measured bandwidth / routed-expert bytes per token), then a
            table of pp N and tg N rows as llama-bench prints them: "tg N @ dP" decodes after the P-token
            prompt, "tg N" from an empty context (as llama-bench's tg test); --depth N adds "tg N @ dN",
            decode after N tokens of context (as llama-bench's -d). Each prompt size is first run
            once untimed, as llama-bench's warm-up (--no-warmup: not). --streams 1,4,8 instead: for each
            count S, S sessions each prefill their own random --prompt, then decode --gen steps together;
            aggregate tok/s beside the roofline of the distinct routed experts a step reads for S sequences
            (counted from the routing on the CPU path, else estimated for uniform routing), at each
            --defer in turn.
  serve     --model DIR|STORE [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--name NAME]
            [--max-tokens N] [--max-body SIZE] [--max-requests N] [--cache-conversations N] [--batch N] [--prefill-chunk N]
            [--threads N] [--context N] [--device cpu|gpu|auto] [--gpu-memory SIZE] [--gpus N[,N...]|all] [--experts TYPE] [--dense int8|int4] [--kv-cache f32|int8] [--no-verify]
            Serve the model over OpenAI's HTTP API until Ctrl-C: POST /v1/chat/completions (through
            the model's chat template; streamed as server-sent events with "stream": true; reasoning
            apart as reasoning_content), POST /v1/completions, GET /v1/models (the model is NAME,
            default the folder's name), GET /health. Up to --batch N requests (4 on the CPU, 1 on the GPU)
            decode together, each step one pass for all of them; more wait in order. A new request's
            prompt is prefilled --prefill-chunk N tokens at a time between the running requests' decode
            steps (512 when --batch is over 1; 0: the whole prompt at once).
            Only this machine can connect unless --host names another address, which needs --api-key
            (or TANDEM_API_KEY): clients then send 'Authorization: Bearer KEY'. --port 0 takes a free
            port. Limits: max_tokens up to --max-tokens (4096), request bodies up to --max-body (16M),
            --max-requests (64) requests waiting or running; more are refused. The KV caches of
            --cache-conversations conversations are kept (4 on the CPU, 1 on the GPU): a request continues
            the one sharing its prompt's longest prefix (usage.prompt_tokens_details.cached_tokens); at
            least --batch are kept, one for each request decoding. On the GPU each of them holds a KV
            cache there: the plan reserves the larger of --batch and --cache-conversations at --context
            before it gives the routed experts the rest.
  tokenize  --model DIR [--add-special]
            Read UTF-8 text from standard input and print its token ids on one line; with
            --add-special the ids the model expects around a text (e.g. BOS) are included.
  detokenize --model DIR
            Read whitespace-separated token ids from standard input and write their text exactly,
            without adding a newline.
  bench-tokenizer --model DIR [--file TEXT] [--megabytes N]
            Encode N MB (default 8) of English prose, the --file (default Debian's GPL-3 text)
            repeated, on one thread and print the speed in MB/s.
  render-chat --model DIR [--no-generation-prompt] [--var NAME=JSON]...
            Read a JSON array of messages from standard input and print the prompt the model's chat
            template makes of it, byte for byte (no newline added). --var sets a template variable,
            e.g. --var enable_thinking=false or --var 'tools=[...]'.

  --device  where the dense layers run: the GPU when usable (auto), or cpu, or gpu (fail without one)
  --gpu-memory  GPU memory for routed experts (e.g. 24G, 800M): whole MoE layers, the last first, are
            computed on the GPU from a copy there; the rest on the CPU. Default (auto): what is free
            once the rest of the model and the context are counted; 0 keeps every expert on the CPU
  --gpus    which GPUs to run on, by number as nvidia-smi lists them: 1 for the second GPU, or several
            (0,1, or all) for a pipeline by layer over them, each holding its layers and the routed experts
            its memory leaves room for (not yet tried on a machine with two GPUs). Default: the GPU with
            the most memory, or TANDEM_GPU_DEVICES. A GPU the machine lacks runs on the CPU (auto) or
            fails (--device gpu)
  --experts how the routed experts run on the CPU: auto (a store's type; bf16 for a Hugging Face
            folder), bf16, int8, int4 (packed at load), or reference (float32, exact, slow)
  --dense   how the dense weights are held (attention, dense and shared MLPs, output head), on the
            CPU and the GPU: checkpoint (default: as the model has them) or int8 (a scale per row,
            quantized at load: half of bf16's bytes per token, slightly less exact; FP8 stays FP8
            on the GPU). A store converted with --dense int8 holds them in int8 already. int4 (CPU
            path only): groups of 32 weights with a scale, packed at load for the expert kernels, a
            quarter of bf16's bytes and less exact
  --kv-cache  how each conversation's KV cache holds keys and values: f32 (default, exact) or int8 (int8
            with a float scale per head and position, a quarter of the memory plus the scales, so about
            3.9x the context fits; attention reads a quarter of the bytes at long contexts). On the CPU
            and the GPU alike (the GPU also keeps the layer it computes in float32)
  --defer   Expert Deferral: the D lowest-weighted routed experts of a layer overlap the next layer
  --skip    drop the D lowest-weighted routed experts instead (for comparison with --defer)
  --defer-prefill  apply --defer or --skip to the prompt too (by default only decode defers, so the
            prompt's logits and cache are exact)
  --no-verify  eval, generate and chat read a store in full once before using it when it has not been
            verified (no tandem-verified.json, or a file changed since); this skips that read. A store
            found damaged is refused either way.
  Every option may also be written --name=value.
  --help    this text
  --version the version, git revision, GPU path (CUDA or none) and CPU kernels of this build
)";

struct Command {
    const char* name;
    int (*run)(const CommandArgs&);
    // A store given as --model is read in full first if it is not verified (cli_verify.h); --no-verify.
    bool verifiesModel = false;
};

constexpr Command kCommands[] = {
    {"bench-moe", runBenchMoe},
    {"convert", runConvert},
    {"eval", runEval, true},
    {"generate", runGenerate, true},
    {"chat", runChat, true},
    {"bench", runBench, true},
    {"tokenize", runTokenize},
    {"detokenize", runDetokenize},
    {"bench-tokenizer", runBenchTokenizer},
    {"render-chat", runRenderChat},
#ifdef TANDEM_CLI_DOWNLOAD
    {"download", runDownload},
#endif
#ifdef TANDEM_CLI_SERVE
    {"serve", runServe, true},
#endif
};

}  // namespace

int main(int argc, char** argv) {
    tandem::numberGpusAsNvidiaSmi();
    tandem::cli::installStackDumpIfAsked();
    const std::vector<std::string> rest(argv + std::min(argc, 2), argv + argc);
    const std::string command = argc > 1 ? argv[1] : "";
    try {
        for (const auto& c : kCommands)
            if (command == c.name) return c.run(c.verifiesModel ? verifyModelFirst(rest) : rest);
        if (command == "--version" || command == "-v" || command == "version") {
            std::fputs(tandem::describeBuild("tandem-cli").c_str(), stdout);
            return 0;
        }
#ifndef TANDEM_CLI_DOWNLOAD
        if (command == "download") {
            std::fputs("tandem-cli: this build has no download command (it was built without Qt Network); install "
                       "qt6-base-dev and build again\n", stderr);
            return 1;
        }
#endif
#ifndef TANDEM_CLI_SERVE
        if (command == "serve") {
            std::fputs("tandem-cli: this build has no serve command (it was built without cpp-httplib); install "
                       "libcpp-httplib-dev and build again\n", stderr);
            return 1;
        }
#endif
        if (command == "--help" || command == "-h" || command == "help") {
            std::fputs(kUsage, stdout);
            return 0;
        }
        std::fputs(command.empty() ? "tandem-cli: no command given\n\n" : ("tandem-cli: unknown command '" + command + "'\n\n").c_str(), stderr);
        std::fputs(kUsage, stderr);
        return 2;
    } catch (const tandem::Error& e) {
        std::fprintf(stderr, "tandem-cli: %s\n", e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "tandem-cli: out of memory; try a smaller model, a shorter context or fewer threads\n");
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tandem-cli: internal error: %s\n", e.what());
        return 1;
    }
}
