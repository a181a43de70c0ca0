// Prompt formats for models whose files carry no chat template, by config.json model_type. They follow
// the public formats of each family: ChatML (Qwen), DeepSeek-V3's <｜User｜>/<｜Assistant｜> turns, and
// Mistral's [INST] blocks.
#include "text/chat_template.h"

namespace tandem::text {
namespace {

constexpr std::string_view kChatMl =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}";

constexpr std::string_view kDeepSeek =
    "{{- bos_token }}"
    "{%- set ns = namespace(system='') %}"
    "{%- for message in messages if message['role'] == 'system' %}"
    "{%- set ns.system = ns.system + ('\\n\\n' if not loop.first else '') + message['content'] %}"
    "{%- endfor %}"
    "{{- ns.system }}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'user' %}{{- '<｜User｜>' + message['content'] }}"
    "{%- elif message['role'] == 'assistant' %}{{- '<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<｜Assistant｜>' }}{%- endif %}";

constexpr std::string_view kMistral =
    "{{- bos_token }}"
    "{%- set ns = namespace(system='') %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'system' %}{%- set ns.system = message['content'] + '\\n\\n' %}"
    "{%- elif message['role'] == 'user' %}{{- '[INST] ' + ns.system + message['content'] + ' [/INST]' }}{%- set ns.system = '' %}"
    "{%- elif message['role'] == 'assistant' %}{{- message['content'] + eos_token }}"
    "{%- endif %}"
    "{%- endfor %}";

}  // namespace

std::string_view fallbackChatTemplate(std::string_view modelType) {
    if (modelType == "qwen3_moe" || modelType == "qwen3" || modelType == "qwen2_moe" || modelType == "qwen2") return kChatMl;
    if (modelType == "deepseek_v3" || modelType == "deepseek_v2") return kDeepSeek;
    if (modelType == "mixtral" || modelType == "mistral") return kMistral;
    return {};
}

}  // namespace tandem::text
