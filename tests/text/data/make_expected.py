#!/usr/bin/env python3
"""Writes the expected outputs the chat-template tests compare against, using Python's jinja2 set up
exactly as Hugging Face transformers sets it up for apply_chat_template:

    ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                  extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"]  = json.dumps(x, ensure_ascii=False, indent=..., separators=..., sort_keys=...)
    env.globals["raise_exception"] raises TemplateError(message)
    env.globals["strftime_now"](fmt) = datetime.now().strftime(fmt)   (here: a fixed time, see NOW)

and rendering with messages=..., tools=..., documents=..., add_generation_prompt=..., the tokenizer's
special tokens (bos_token, eos_token, ...) and any extra variables, as apply_chat_template does.

Run from this folder (needs `pip install jinja2`; written with jinja2 3.1.6):
    python3 make_expected.py
It rewrites model_cases.json (the real templates in *.jinja, several conversations each) and
jinja_cases.json (one group of small templates per language feature). The C++ tests need no Python.
"""
import datetime
import json
import os

import jinja2
import jinja2.ext
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
# strftime_now() returns this time in the tests (the C++ test fixes its clock to the same moment).
NOW = datetime.datetime(2024, 7, 26, 13, 5, 9)


class AssistantTracker(Extension):
    """HF's {% generation %} tag; for rendering it only outputs its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def hf_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = hf_environment()


def outcome(render):
    try:
        return {"text": render()}
    except Exception as e:  # the C++ side must fail too, with the same message
        return {"error": str(e), "error_type": type(e).__name__}


def apply_chat_template(source, special_tokens, messages, add_generation_prompt, extra):
    """transformers' render_jinja_template: tools and documents are always passed (None by default)."""
    kwargs = {**special_tokens, **{k: v for k, v in extra.items() if k not in ("tools", "documents")}}
    template = ENV.from_string(source)
    return template.render(messages=messages, tools=extra.get("tools"), documents=extra.get("documents"),
                           add_generation_prompt=add_generation_prompt, **kwargs)


# ---- conversations for the real templates -------------------------------------------------------

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
        "days": {"type": "integer", "description": "Forecast days"}},
        "required": ["city"]}}}
SEARCH_TOOL = {"type": "function", "function": {
    "name": "search_docs", "description": "Search the documentation.",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string", "description": "What to look for"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "limit": {"type": "number", "default": 10},
        "filters": {"type": "object", "properties": {"lang": {"type": "string"}, "exact": {"type": "boolean"}},
                    "required": ["lang"]},
        "mode": {"oneOf": [{"type": "string", "description": "named mode"}, {"type": "integer"}]},
        "note": {"type": "string", "nullable": True},
        "ids": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}}}},
        "anything": {"type": ["string", "number"]}},
        "required": ["query"]}}}
TIME_TOOL = {"type": "function", "function": {"name": "get_time", "description": "Current time.",
                                              "parameters": {"type": "object", "properties": {}}}}

USER = [{"role": "user", "content": "What is a mixture of experts?"}]
MULTI_TURN = [
    {"role": "system", "content": "You are a terse assistant."},
    {"role": "user", "content": "Name three prime numbers."},
    {"role": "assistant", "content": "2, 3, 5."},
    {"role": "user", "content": "And the next one? 你好 👍 \"quoted\" \\ back\\slash\n\tindented"},
]
REASONING = [
    {"role": "user", "content": "Is 91 prime?"},
    {"role": "assistant", "content": "<think>\n91 = 7 * 13.\n</think>\n\nNo, 91 = 7 × 13."},
    {"role": "user", "content": "And 97?"},
]


GPT_OSS_THINKING = [
    {"role": "user", "content": "Is 91 prime?"},
    {"role": "assistant", "thinking": "91 = 7 * 13.", "content": "No, 91 = 7 × 13."},
    {"role": "user", "content": "And 97?"},
    {"role": "assistant", "thinking": "No divisor up to 9.", "content": "Yes, 97 is prime."},
    {"role": "user", "content": "Thanks! 👍"},
]
GPT_OSS_TOOL_ROUNDS = [
    {"role": "system", "content": "Use the tools."},
    {"role": "user", "content": "Weather and time in Lima?"},
    {"role": "assistant", "thinking": "Weather first.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Lima", "days": 1}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"temp_c\": 18}"},
    {"role": "assistant", "thinking": "Now the time.", "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c2", "content": "12:00"},
]


def tool_conversation(arguments_as_string, call_id="call00001", content=""):
    args = {"city": "Paris", "days": 2}
    return [
        {"role": "system", "content": "You can look up the weather."},
        {"role": "user", "content": "Weather in Paris for two days?"},
        {"role": "assistant", "content": content, "tool_calls": [{
            "id": call_id, "type": "function",
            "function": {"name": "get_weather",
                         "arguments": json.dumps(args) if arguments_as_string else args}}]},
        {"role": "tool", "tool_call_id": call_id, "content": "{\"temp_c\": 21.5, \"sky\": \"clear\"}"},
        {"role": "assistant", "content": "Clear, 21.5 °C."},
        {"role": "user", "content": "Thanks!"},
    ]


def model_cases():
    qwen = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    deepseek = {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"}
    kimi = {"bos_token": "[BOS]", "eos_token": "[EOS]", "unk_token": "[UNK]", "pad_token": "[PAD]"}
    llama = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
    mistral = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    gpt_oss = {"bos_token": "<|startoftext|>", "eos_token": "<|return|>", "pad_token": "<|endoftext|>"}
    glm = {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}

    qwen_tools = tool_conversation(False)
    qwen_tools.insert(4, {"role": "tool", "tool_call_id": "call00002", "content": "second result"})
    qwen_reasoning = REASONING[:2] + [{"role": "user", "content": "<tool_response>\nx\n</tool_response>"}]

    cases = [
        ("qwen3.jinja", qwen, "single user", USER, True, {}),
        ("qwen3.jinja", qwen, "multi-turn with system", MULTI_TURN, True, {}),
        ("qwen3.jinja", qwen, "thinking disabled", MULTI_TURN, True, {"enable_thinking": False}),
        ("qwen3.jinja", qwen, "thinking enabled", USER, True, {"enable_thinking": True}),
        ("qwen3.jinja", qwen, "reasoning kept after last query", REASONING[:2], False, {}),
        ("qwen3.jinja", qwen, "reasoning in history", REASONING, True, {}),
        ("qwen3.jinja", qwen, "tool response as last query", qwen_reasoning, True, {}),
        ("qwen3.jinja", qwen, "reasoning_content field", [USER[0], {"role": "assistant", "content": "Routed experts.",
                                                                    "reasoning_content": "\nThink briefly.\n"}], False, {}),
        ("qwen3.jinja", qwen, "tools and tool calls", qwen_tools, True, {"tools": [WEATHER_TOOL, TIME_TOOL]}),
        ("qwen3.jinja", qwen, "tools without system", USER, True, {"tools": [WEATHER_TOOL]}),

        ("deepseek_v3.jinja", deepseek, "single user", USER, True, {}),
        ("deepseek_v3.jinja", deepseek, "multi-turn with system", MULTI_TURN, True, {}),
        ("deepseek_v3.jinja", deepseek, "two system messages", [MULTI_TURN[0], {"role": "system", "content": "Be kind."}] + USER, True, {}),
        ("deepseek_v3.jinja", deepseek, "reasoning stripped", REASONING, True, {}),
        ("deepseek_v3.jinja", deepseek, "tool calls", tool_conversation(True, content=None), True, {}),
        ("deepseek_v3.jinja", deepseek, "tool call with content and two calls", [
            USER[0], {"role": "assistant", "content": "Let me check.", "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}},
                {"type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
            {"role": "tool", "content": "sunny"}, {"role": "tool", "content": "noon"}], True, {}),
        ("deepseek_v3.jinja", deepseek, "no generation prompt", MULTI_TURN[:3], False, {}),

        ("deepseek_v3_1.jinja", deepseek, "single user, thinking off", USER, True, {}),
        ("deepseek_v3_1.jinja", deepseek, "thinking on", MULTI_TURN, True, {"thinking": True}),
        ("deepseek_v3_1.jinja", deepseek, "reasoning stripped", REASONING, True, {"thinking": True}),
        ("deepseek_v3_1.jinja", deepseek, "tool calls", tool_conversation(True, content=None), True, {}),
        ("deepseek_v3_1.jinja", deepseek, "assistant prefix", [USER[0], {"role": "assistant", "content": "Mixture", "prefix": True}],
         False, {"thinking": True}),

        ("deepseek_r1.jinja", deepseek, "single user", USER, True, {}),
        ("deepseek_r1.jinja", deepseek, "multi-turn with system", MULTI_TURN, True, {}),
        ("deepseek_r1.jinja", deepseek, "reasoning stripped", REASONING, True, {}),
        ("deepseek_r1.jinja", deepseek, "tool outputs", [USER[0], {"role": "tool", "content": "a"},
                                                          {"role": "tool", "content": "b"},
                                                          {"role": "assistant", "content": "done"}], True, {}),
        ("deepseek_r1.jinja", deepseek, "ends on a tool output", [USER[0], {"role": "tool", "content": "a"}], True, {}),

        ("kimi_k2.jinja", kimi, "single user", USER, True, {}),
        ("kimi_k2.jinja", kimi, "multi-turn with system", MULTI_TURN, True, {}),
        ("kimi_k2.jinja", kimi, "content parts and tools", [
            {"role": "user", "content": [{"type": "text", "text": "Describe "}, {"type": "image", "image": "x.png"},
                                          {"type": "text", "text": " please."}]},
            {"role": "tool", "content": "ok"}], True, {"tools": [WEATHER_TOOL]}),

        ("kimi_k2_thinking.jinja", kimi, "single user", USER, True, {}),
        ("kimi_k2_thinking.jinja", kimi, "multi-turn with system", MULTI_TURN, True, {}),
        ("kimi_k2_thinking.jinja", kimi, "tool calls with reasoning", [
            {"role": "user", "content": "Weather in Oslo?", "name": "alice"},
            {"role": "assistant", "content": "", "reasoning_content": "Need the tool.", "tool_calls": [
                {"id": "functions.get_weather:0", "type": "function",
                 "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
            {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "-3 °C"},
            {"role": "assistant", "content": "It is -3 °C.", "reasoning_content": "Report it."},
            {"role": "user", "content": "And tomorrow?"},
            {"role": "assistant", "content": "", "reasoning_content": "Again.", "tool_calls": [
                {"id": "functions.get_weather:1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"days\": 2}"}}]},
            {"role": "tool", "tool_call_id": "functions.get_weather:1", "content": [{"type": "text", "text": "-5 °C"}]},
        ], True, {"tools": [WEATHER_TOOL]}),

        ("llama3.jinja", llama, "single user", USER, True, {}),
        ("llama3.jinja", llama, "multi-turn with system", MULTI_TURN, True, {}),
        ("llama3.jinja", llama, "custom date", USER, True, {"date_string": "01 Jan 2025"}),
        ("llama3.jinja", llama, "tools in first user message", tool_conversation(False), True,
         {"tools": [WEATHER_TOOL, SEARCH_TOOL]}),
        ("llama3.jinja", llama, "tools in system message", tool_conversation(False), True,
         {"tools": [WEATHER_TOOL], "tools_in_user_message": False}),
        ("llama3.jinja", llama, "builtin tools", [
            {"role": "user", "content": "Search for MoE papers."},
            {"role": "assistant", "tool_calls": [{"type": "function", "function": {
                "name": "brave_search", "arguments": {"query": "mixture of experts", "count": "5"}}}]},
            {"role": "ipython", "content": {"results": ["a", "b"]}},
            {"role": "assistant", "content": "Found two."}], True,
         {"builtin_tools": ["brave_search", "code_interpreter", "wolfram_alpha"]}),
        ("llama3.jinja", llama, "two tool calls are refused", [USER[0], {"role": "assistant", "tool_calls": [
            {"function": {"name": "a", "arguments": {}}}, {"function": {"name": "b", "arguments": {}}}]}], True, {}),

        ("mixtral.jinja", mistral, "single user", USER, True, {}),
        ("mixtral.jinja", mistral, "multi-turn", MULTI_TURN[1:], True, {}),
        ("mixtral.jinja", mistral, "system is refused", MULTI_TURN, True, {}),
        ("mixtral.jinja", mistral, "roles must alternate", [USER[0], USER[0]], True, {}),

        ("mistral_nemo.jinja", mistral, "single user", USER, True, {}),
        ("mistral_nemo.jinja", mistral, "system goes into the last user turn", MULTI_TURN, True, {}),
        ("mistral_nemo.jinja", mistral, "tools and tool calls", tool_conversation(False, "abc123XYZ")[1:], True,
         {"tools": [WEATHER_TOOL, TIME_TOOL]}),
        ("mistral_nemo.jinja", mistral, "bad tool call id", tool_conversation(False, "short")[1:], True, {}),
        ("mistral_nemo.jinja", mistral, "roles must alternate", [USER[0], USER[0]], True, {}),

        ("glm4_6.jinja", glm, "single user", USER, True, {}),
        ("glm4_6.jinja", glm, "multi-turn with system", MULTI_TURN, True, {}),
        ("glm4_6.jinja", glm, "thinking disabled", MULTI_TURN, True, {"enable_thinking": False}),
        ("glm4_6.jinja", glm, "reasoning in history", REASONING, True, {}),
        ("glm4_6.jinja", glm, "reasoning_content after the last query", [USER[0], {
            "role": "assistant", "content": "Routed experts.", "reasoning_content": "\nThink briefly.\n"}], False, {}),
        ("glm4_6.jinja", glm, "tools and tool calls", tool_conversation(False), True, {"tools": [WEATHER_TOOL, TIME_TOOL]}),
        ("glm4_6.jinja", glm, "two tool responses and content parts", [
            {"role": "user", "content": [{"type": "text", "text": "Weather "}, {"type": "text", "text": "and time?"}]},
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "units": ["C"]}}},
                {"type": "function", "function": {"name": "get_time", "arguments": {}}}]},
            {"role": "tool", "content": "sunny"}, {"role": "tool", "content": "noon"}], True, {"tools": [WEATHER_TOOL]}),

        ("gpt_oss.jinja", gpt_oss, "single user", USER, True, {}),
        ("gpt_oss.jinja", gpt_oss, "developer message and effort", MULTI_TURN, True, {"reasoning_effort": "high"}),
        ("gpt_oss.jinja", gpt_oss, "model identity", USER, True, {"model_identity": "You are Tandem."}),
        ("gpt_oss.jinja", gpt_oss, "tools and a tool call", [
            {"role": "user", "content": "Weather in Lima?"},
            {"role": "assistant", "thinking": "Call the tool.", "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Lima"}}}]},
            {"role": "tool", "content": "{\"temp_c\": 18}"},
        ], True, {"tools": [WEATHER_TOOL, SEARCH_TOOL, TIME_TOOL]}),
        ("gpt_oss.jinja", gpt_oss, "final answer after tool call", [
            {"role": "user", "content": "Weather in Lima?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Lima\"}"}}]},
            {"role": "tool", "content": "18 C"},
            {"role": "assistant", "content": "18 °C in Lima.", "thinking": "Answer."},
        ], False, {"tools": [WEATHER_TOOL]}),
        ("gpt_oss.jinja", gpt_oss, "builtin tools", USER, True, {"builtin_tools": ["browser", "python"]}),
        ("gpt_oss.jinja", gpt_oss, "system prompt", [{"role": "system", "content": "Answer in French."}] + USER, True, {}),
        ("gpt_oss.jinja", gpt_oss, "developer role", [{"role": "developer", "content": "Be brief."}] + USER, True,
         {"reasoning_effort": "low"}),
        ("gpt_oss.jinja", gpt_oss, "multi-turn thinking is dropped", GPT_OSS_THINKING, True, {"reasoning_effort": "low"}),
        ("gpt_oss.jinja", gpt_oss, "last thinking kept without generation prompt", GPT_OSS_THINKING[:4], False,
         {"reasoning_effort": "medium"}),
        ("gpt_oss.jinja", gpt_oss, "no generation prompt after a user turn", MULTI_TURN, False, {}),
        ("gpt_oss.jinja", gpt_oss, "two tool rounds with thinking", GPT_OSS_TOOL_ROUNDS, True,
         {"tools": [WEATHER_TOOL, TIME_TOOL], "reasoning_effort": "high"}),
        ("gpt_oss.jinja", gpt_oss, "tool rounds then a final answer", GPT_OSS_TOOL_ROUNDS + [
            {"role": "assistant", "content": "Lima: 18 °C at noon.", "thinking": "Both known."},
            {"role": "user", "content": "Thanks"}], True, {"tools": [WEATHER_TOOL, TIME_TOOL]}),
        ("gpt_oss.jinja", gpt_oss, "tools with builtin tools and identity", USER, True,
         {"tools": [SEARCH_TOOL], "builtin_tools": ["python"], "model_identity": "You are Tandem.",
          "reasoning_effort": "low"}),
        ("gpt_oss.jinja", gpt_oss, "content and thinking with a tool call are refused", [
            USER[0], {"role": "assistant", "content": "a", "thinking": "b", "tool_calls": [
                {"type": "function", "function": {"name": "get_time", "arguments": {}}}]}], True, {}),
        ("gpt_oss.jinja", gpt_oss, "tool result without a call is refused", [
            USER[0], {"role": "tool", "content": "orphan"}], True, {}),
        ("gpt_oss.jinja", gpt_oss, "channel tags are refused", [
            {"role": "user", "content": "x"}, {"role": "assistant", "content": "<|channel|>final<|message|>y"}], True, {}),
    ]
    out = []
    for template, tokens, name, messages, agp, extra in cases:
        source = open(os.path.join(HERE, template), encoding="utf-8").read()
        case = {"template": template, "name": name, "special_tokens": tokens, "messages": messages,
                "add_generation_prompt": agp, "extra": extra}
        case.update(outcome(lambda: apply_chat_template(source, tokens, messages, agp, extra)))
        out.append(case)
    return out


# ---- one group of small templates per language feature ------------------------------------------

FEATURES = {
    "if_elif_else": [
        ("{% if x > 2 %}big{% elif x > 1 %}mid{% else %}small{% endif %}", {"x": 2}),
        ("{% if x > 2 %}big{% elif x > 1 %}mid{% else %}small{% endif %}", {"x": 0}),
        ("{% if not items %}empty{% endif %}|{% if items %}full{% endif %}", {"items": []}),
        ("{% if a and b or c %}y{% else %}n{% endif %}", {"a": 1, "b": 0, "c": "x"}),
    ],
    "for_loop_variables": [
        ("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
         "{{ loop.revindex }}{{ loop.revindex0 }};{% endfor %}", {}),
        ("{% for x in [1, 2, 3] %}[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %}", {}),
        ("{% for x in range(5) %}{{ loop.cycle('odd', 'even') }} {% endfor %}", {}),
        ("{% for x in [1, 1, 2, 3, 3] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}", {}),
        ("{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.depth }}{{ a }}{{ b }}{{ loop.index }} {% endfor %}{% endfor %}", {}),
        ("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {"d": {"b": 1, "a": [2]}}),
        ("{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}", {"d": {"z": None, "y": True}}),
        ("{% for k in d %}{{ k }}{% endfor %}", {"d": {"q": 1, "p": 2}}),
        ("{% for x in items recursive %}{{ x.n }}{% if x.c %}({{ loop(x.c) }}){% endif %}{% endfor %}",
         {"items": [{"n": 1, "c": [{"n": 2, "c": [{"n": 3}]}]}, {"n": 4}]}),
    ],
    "for_else_and_filter": [
        ("{% for x in [] %}{{ x }}{% else %}nothing{% endfor %}", {}),
        ("{% for x in none_value %}{{ x }}{% else %}undefined is empty{% endfor %}", {}),
        ("{% for x in range(10) if x is odd %}{{ x }}/{{ loop.index }}/{{ loop.length }} {% endfor %}", {}),
        ("{% for x in [1, 2] if x > 5 %}{{ x }}{% else %}all filtered{% endfor %}", {}),
    ],
    "break_continue": [
        ("{% for x in range(10) %}{% if x == 4 %}{% break %}{% endif %}{% if x is even %}{% continue %}{% endif %}{{ x }}{% endfor %}", {}),
    ],
    "generation_tag": [
        ("{% for m in ms %}{% if loop.index is odd %}{% generation %}<{{ m }}>{% endgeneration %}{% else %}{{ m }}{% endif %}{% endfor %}",
         {"ms": ["a", "b", "c"]}),
    ],
    "set_and_scoping": [
        ("{% set a, b = 'xy' %}{{ b }}{{ a }}", {}),
        ("{% set t = 1, 2 %}{{ t }}", {}),
        ("{% set x = 1 %}{% for i in [1, 2, 3] %}{% set x = x + i %}[{{ x }}]{% endfor %}{{ x }}", {}),
        ("{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}", {}),
        ("{% for i in [1, 2] %}{{ z }}{% set z = i %}|{% endfor %}{{ z }}", {}),
        ("{% set messages = messages[1:] %}{{ messages|length }}", {"messages": [1, 2, 3]}),
        ("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", {}),
        # jinja2 resolves names when compiling: a name the top level assigns is that level's variable
        # throughout, undefined until assigned, for the loops and macros inside it too.
        ("{{ x }}{% set x = 2 %}{{ x }}", {"x": "X"}),
        ("{% macro m() %}[{{ x }}]{% endmacro %}{{ m() }}{% set x = 2 %}{{ m() }}", {"x": "X"}),
        ("{% for i in [1] %}[{{ x }}]{% endfor %}{% set x = 2 %}{{ x }}", {"x": "X"}),
        ("{% if false %}{% set x = 2 %}{% endif %}[{{ x }}]{% for i in [1] %}[{{ x }}]{% endfor %}", {"x": "X"}),
        ("{% for i in [1] %}{% for j in [1] %}[{{ x }}]{% endfor %}{% set x = 3 %}{% endfor %}[{{ x }}]", {"x": "X"}),
        ("{% for i in [] %}{% else %}{% set y = 1 %}{% endfor %}[{{ y }}]", {}),
        ("{% set range = 1 %}{{ range }}{% macro m() %}{{ range(2)|list }}{% endmacro %}", {}),
    ],
    "block_set": [
        ("{% set x %}  a {{ 1 + 1 }}\n{% endset %}[{{ x }}]", {}),
        ("{% set x | upper | trim %} abc {% endset %}[{{ x }}]", {}),
    ],
    "namespace": [
        ("{% set ns = namespace(count=0, names=[]) %}{% for m in ms %}{% set ns.count = ns.count + 1 %}{% endfor %}"
         "{{ ns.count }} {{ ns }} {{ ns.missing is defined }}", {"ms": ["a", "b"]}),
        ("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns['a'] }}", {}),
        ("{% set d = {} %}{% set d.x = 1 %}", {}),
    ],
    "macros": [
        ("{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}"
         "{{ greet('Ann') }} {{ greet('Bo', greeting='Hi') }} {{ greet(name='Cy') }}", {}),
        ("{% macro m(a) %}{{ a }}|{{ varargs }}|{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }}", {}),
        ("{% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }} {{ m }} {{ m.name }}", {}),
        ("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}", {}),
        ("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, b=2) }}", {}),
        ("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
        ("{% macro m() %}{{ y }}{% endmacro %}{{ m() }}{% set y = 5 %}{{ m() }}", {}),
        ("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}"
         "{% call wrap('b') %}bold {{ 1 }}{% endcall %}", {}),
        ("{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
         "{% call(item) each([1, 2]) %}<{{ item }}>{% endcall %}", {}),
    ],
    "whitespace_control": [
        ("a  {{- ' b ' -}}  c", {}),
        ("a\n  {%- if true %}\nb\n  {%- endif %}\nc", {}),
        ("a\n    {% if true %}\n    b\n    {% endif %}\nc\n", {}),
        ("a\n    {%+ if true %}\n    b\n    {%+ endif +%}\nc", {}),
        ("{% for x in [1, 2] %}\n  {{ x }}\n{% endfor %}\n", {}),
        ("line\n    {# note #}\nnext {#- trim -#}   after", {}),
        ("x {{ 1 }}\n  {{ 2 }}\n", {}),
        ("{% raw %}  {{ not parsed }} {% endraw %}|", {}),
        ("a\r\nb\rc\n\n", {}),
    ],
    "comments": [
        ("a{# a comment with {{ braces }} and %} #}b", {}),
        ("{#- stripped -#}  x  {# kept #}", {}),
    ],
    "filter_tojson": [
        ("{{ v|tojson }}", {"v": {"b": [1, 2.5, None, True], "a": "é\"\\\n\u2028\x01", "c": {}}}),
        ("{{ v|tojson(indent=2) }}", {"v": {"b": [1, {"x": []}], "a": "q"}}),
        ("{{ v|tojson(indent=4) }}", {"v": [{"name": "get_weather", "parameters": {"type": "object"}}]}),
        ("{{ v|tojson(ensure_ascii=true) }}", {"v": "é 😀"}),
        ("{{ v|tojson(separators=(',', ':')) }}|{{ v|tojson(sort_keys=true) }}", {"v": {"b": 1, "a": [1, 2]}}),
        ("{{ 1.0|tojson }} {{ 1e20|tojson }} {{ (1, 2)|tojson }} {{ none|tojson }}", {}),
        ("{{ x|tojson }}", {}),
    ],
    "filter_string": [
        ("{{ '  pad  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'Hello'|upper }}|{{ 'Hello'|lower }}", {}),
        ("{{ 'hello wORLD'|capitalize }}|{{ \"they're bill's-friend (x)\"|title }}", {}),
        ("{{ 'aaa'|replace('a', 'b') }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 123|replace('2', 'x') }}", {}),
        ("{{ 42|string + '!' }}|{{ none|string }}|{{ [1, 'a']|string }}|{{ 'x'|safe }}", {}),
        ("{{ 'one two  three'|wordcount }}|{{ 'abc'|center(9) }}|", {}),
        ("{{ 'a\nb\n\nc'|indent }}|{{ 'a\nb'|indent(2, first=true) }}|{{ 'a\n\nb'|indent('> ', blank=true) }}", {}),
        ("{{ 'abcdefghijklmnop qrstuvwxyz'|truncate(12) }}|{{ 'a b c d e f g h'|truncate(9, true) }}", {}),
        ("{{ '%s is %d years' % ('Ann', 30) }}|{{ '%-5s|%5.2f|%x' % ('ab', 3.14159, 255) }}|{{ '%(a)s' % {'a': 1} }}", {}),
        ("{{ '%s, %s'|format('a', 'b') }}|{{ '<&>'|escape }}", {}),
    ],
    "filter_length_default": [
        ("{{ [1, 2, 3]|length }} {{ 'héllo'|length }} {{ {'a': 1}|count }} {{ x|length }}", {}),
        ("{{ x|default('fallback') }}|{{ ''|default('e') }}|{{ ''|default('e', true) }}|{{ none|d('n') }}|{{ 0|d(5, boolean=true) }}", {}),
    ],
    "filter_sequences": [
        ("{{ ['a', 'b']|join }}|{{ [1, 2]|join(', ') }}|{{ users|join('/', attribute='name') }}",
         {"users": [{"name": "x"}, {"name": "y"}]}),
        ("{{ [3, 1]|first }} {{ [3, 1]|last }} {{ 'xyz'|first }} {{ []|first }}|{{ {'k': 1}|first }}", {}),
        ("{{ 'abc'|list }} {{ {'a': 1}|list }} {{ (1, 2)|list }} {{ x|list }}", {}),
        ("{{ [1, 2, 3]|reverse|list }} {{ 'abc'|reverse }} {{ (1, 2)|reverse|join }} {{ {'a': 1, 'b': 2}|reverse|list }}", {}),
        ("{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ [1, 3, 2]|sort(reverse=true) }}", {}),
        ("{{ users|sort(attribute='age')|map(attribute='name')|join(',') }}",
         {"users": [{"name": "a", "age": 30}, {"name": "b", "age": 20}, {"name": "c", "age": 30}]}),
        ("{{ ['a', 'A', 'b', 'a']|unique|list }} {{ ['a', 'A']|unique(case_sensitive=true)|list }}", {}),
        ("{{ {'b': 1, 'A': 2, 'c': 0}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value', reverse=true) }}", {}),
        ("{{ [1, 2, 3]|sum }} {{ [1.5, 2]|sum }} {{ items|sum(attribute='n') }} {{ [3, 9, 1]|max }} {{ ['b', 'A']|min }}",
         {"items": [{"n": 1}, {"n": 2}]}),
        ("{{ {'a': 1}|items|list }} {{ x|items|list }}", {}),
        ("{{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3]|batch(2, 'x')|list }}", {}),
        ("{{ [1, 2]|select|length }}", {}),
        ("{% if []|select %}generator is true{% endif %}", {}),
        ("{% set g = [1, 2, 3]|select %}{{ g|first }} {{ g|list }} {{ g|list }}", {}),
    ],
    "filter_select_map": [
        ("{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }}",
         {"ms": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]}),
        ("{{ ms|rejectattr('role', '==', 'user')|list }} {{ ms|selectattr('tool')|list }}",
         {"ms": [{"role": "user"}, {"role": "tool", "tool": True}]}),
        ("{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('divisibleby', 3)|list }} {{ [0, 1, '']|select|list }}", {}),
        ("{{ [1, 2]|map('string')|map('upper')|list }} {{ ['a', 'b']|map('replace', 'a', 'z')|list }}", {}),
        ("{{ ds|map(attribute='a.b')|list }} {{ ds|map(attribute='x', default='-')|list }} {{ [[1, 2]]|map(attribute='1')|list }}",
         {"ds": [{"a": {"b": 1}}, {"a": {"b": 2}, "x": 3}]}),
    ],
    "filter_numbers": [
        ("{{ '42'|int + 1 }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ '0x1F'|int(base=16) }} {{ 3.9|int }} {{ true|int }}", {}),
        ("{{ '2.5'|float }} {{ 'nope'|float }} {{ 3|float }} {{ ' 1e3 '|float }}", {}),
        ("{{ -3|abs }} {{ -2.5|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 7|round }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(1, 'floor') }}", {}),
    ],
    "tests_types": [
        ("{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ 0 is none }}", {}),
        ("{{ 'a' is string }} {{ 1 is string }} {{ {} is mapping }} {{ [] is mapping }}", {}),
        ("{{ [] is iterable }} {{ 'a' is iterable }} {{ 1 is iterable }} {{ x is iterable }} {{ {} is sequence }} {{ 1 is sequence }}", {}),
        ("{{ 1 is number }} {{ 1.5 is number }} {{ true is number }} {{ 'a' is number }}", {}),
        ("{{ 1 is integer }} {{ true is integer }} {{ 1.0 is float }} {{ 1 is float }}", {}),
        ("{{ true is boolean }} {{ 1 is boolean }} {{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }}", {}),
        ("{{ range is callable }} {{ 'a'.upper is callable }} {{ 'a' is callable }}", {}),
        ("{% if enable_thinking is defined and enable_thinking is false %}off{% else %}on{% endif %}", {"enable_thinking": False}),
        ("{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'length' is filter }} {{ 'odd' is test }}", {}),
    ],
    "tests_values": [
        ("{{ 3 is odd }} {{ 3 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }}", {}),
        ("{{ 2 is in [1, 2] }} {{ 'b' is in 'abc' }} {{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 1 is ne 1 }}", {}),
        ("{{ 1 is lt 2 }} {{ 1 is gt 2 }} {{ 2 is ge 2 }} {{ 2 is le 1 }} {{ 1 is lessthan 3 }} {{ 3 is greaterthan 1 }}", {}),
        ("{{ x is not defined }} {{ 1 is not odd }} {{ none is sameas none }}", {}),
    ],
    "string_methods": [
        ("{{ 'hello'.startswith('he') }} {{ 'hello'.endswith(('x', 'lo')) }} {{ 'hello'.startswith('l', 2) }}", {}),
        ("{{ 'a,b,,c'.split(',') }} {{ '  a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ ' a b '.rsplit(None, 1) }}", {}),
        ("[{{ '  x  '.strip() }}][{{ '  x  '.lstrip() }}][{{ '  x  '.rstrip() }}][{{ '\n\nx\n'.strip('\n') }}][{{ 'xyx'.strip('x') }}]", {}),
        ("{{ 'aXa'.replace('a', 'b') }} {{ 'aaa'.replace('a', 'b', 1) }} {{ 'ab'.replace('', '-') }}", {}),
        ("{{ 'MiXed'.upper() }} {{ 'MiXed'.lower() }} {{ 'hello wORLD'.title() }} {{ 'hello wORLD'.capitalize() }} {{ 'É'.lower() }}", {}),
        ("{{ 'banana'.count('a') }} {{ 'banana'.count('an', 2) }} {{ 'banana'.find('n') }} {{ 'banana'.rfind('n') }} {{ 'banana'.find('x') }}", {}),
        ("{{ ', '.join(['a', 'b']) }} {{ ''.join('xyz') }}", {}),
        ("{{ '{} and {}'.format('a', 'b') }} {{ '{0}{0}'.format('x') }} {{ '{name}: {n:>4}'.format(name='k', n=7) }} {{ '{:.2f}'.format(3.14159) }}", {}),
        ("{{ 'x'.zfill(3) }} {{ 'ab'.ljust(4, '.') }}| {{ 'a=b=c'.partition('=') }} {{ 'a\nb\r\nc'.splitlines() }} {{ 'pre_x'.removeprefix('pre_') }}", {}),
        ("{{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ ' '.isspace() }} {{ 'ab'.isupper() }} {{ 'Ab1'.isalnum() }}", {}),
        ("{{ ', '.join([1, 2]) }}", {}),
    ],
    "dict_methods": [
        ("{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 0) }} {{ d.items() }} {{ d.keys() }} {{ d.values() }} {{ d.keys()|list }}",
         {"d": {"a": 1, "b": "two"}}),
        ("{{ d.items is callable }} {{ d['items'] }} {{ d.items()|list }} {{ d.get is callable }}", {"d": {"items": [1]}}),
        ("{{ 'a' in d }} {{ 'z' not in d }} {{ d|length }}", {"d": {"a": None}}),
    ],
    "list_methods_sandbox": [
        ("{{ [1, 2, 1].count(1) }} {{ [1, 2].index(2) }} {{ [1].append }}|{{ [1].append is defined }}", {}),
        ("{% set xs = [1] %}{% set _ = xs.append(2) %}{{ xs }}", {}),
        ("{% set d = {'a': 1} %}{{ d.update({'b': 2}) }}", {}),
        ("{{ ''.__class__ }}|{{ d.__class__ is defined }}", {"d": {}}),
        ("{{ range(100001)|length }}", {}),
    ],
    "slicing": [
        ("{{ xs[1:] }} {{ xs[:-1] }} {{ xs[::-1] }} {{ xs[::2] }} {{ xs[-2:] }} {{ xs[1:3] }} {{ xs[5:9] }} {{ xs[::-2] }}",
         {"xs": [0, 1, 2, 3, 4]}),
        ("{{ 'héllo wörld'[::-1] }} {{ 'abc'[1] }} {{ 'abc'[-1] }} {{ (1, 2, 3)[1:] }}", {}),
        ("{% for m in messages[::-1] %}{{ m }}{% endfor %}", {"messages": ["a", "b", "c"]}),
    ],
    "operators": [
        ("{{ 'a' in 'abc' }} {{ 'x' not in 'abc' }} {{ 2 in [1, 2] }} {{ 3 not in [1, 2] }} {{ 'a' in x }}", {}),
        ("{{ 'a' ~ 1 ~ none ~ x ~ [1] }}", {}),
        ("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7.5 // 2 }} {{ 7.5 % 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 2 ** 3 ** 2 }}", {}),
        ("{{ 1 + 2 * 3 - 4 / 2 }} {{ (1 + 2) * 3 }} {{ -x_num + +2 }} {{ 'ab' * 2 }} {{ [0] * 3 }} {{ [1] + [2] }} {{ 10 / 4 }}", {"x_num": 5}),
        ("{{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' != 'b' }} {{ 1 < 2 <= 2 < 3 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ (1, 2) == [1, 2] }}", {}),
        ("{{ none or 'x' }} {{ 0 and 1 }} {{ 1 and 'y' }} {{ not 0 }} {{ not 'a' }} {{ [] or {} }}", {}),
        ("{{ 1 < 'a' }}", {}),
        ("{{ 'a' + 1 }}", {}),
        ("{{ 1 / 0 }}", {}),
    ],
    "conditional_expression": [
        ("{{ 'yes' if x else 'no' }} {{ 'a' if false }}| {{ 'a' if false else 'b' if true else 'c' }}", {"x": [0]}),
    ],
    "string_literals": [
        ("{{ 'it\\'s' }} {{ \"say \\\"hi\\\"\" }} {{ 'tab\\tend' }} {{ 'nl\\nend' }} {{ '\\\\' }} {{ '\\x41\\u00e9\\U0001F600\\101' }} {{ '\\d' }}", {}),
        ("{{ 'adjacent' ' strings' \"concat\" }} {{ 'multi\nline' }}", {}),
    ],
    "attribute_and_item_lookup": [
        ("{{ m.role }} {{ m['role'] }} {{ m.missing }}|{{ m['missing'] }}|{{ m.missing is defined }}", {"m": {"role": "user"}}),
        ("{{ xs.0 }} {{ xs[1] }} {{ xs[-1] }} {{ xs[5] }}|{{ 'abc'.1 }}", {"xs": [10, 20, 30]}),
        ("{{ none.x }}|{{ none.x is defined }}", {}),
        ("{{ m.a.b }}", {"m": {}}),
        ("{{ undefined_name.attr }}", {}),
        ("{{ m['a']['b'] }}", {"m": {}}),
        ("{{ xs[9].y }}", {"xs": [1]}),
    ],
    "undefined": [
        ("[{{ missing }}] {{ missing is defined }} {{ missing|default('d') }} {{ missing == missing }} {{ missing != none }}", {}),
        ("{% if missing %}t{% else %}f{% endif %}{% for x in missing %}x{% endfor %}{{ missing|length }}", {}),
        ("{{ missing + 1 }}", {}),
        ("{{ missing() }}", {}),
        ("{{ missing[0] }}", {}),
    ],
    "values_printing": [
        ("{{ 1.0 }} {{ 3.14 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1.5e-7 }} {{ -0.0 }} {{ 0.1 + 0.2 }} {{ 1e400 }}", {}),
        ("{{ 42 }} {{ -7 }} {{ true }} {{ false }} {{ none }} {{ 4 / 2 }} {{ 2 * 1.5 }}", {}),
        ("{{ [1, 'a', none, true, 1.0, [], {}] }} {{ {'k': 'v', 'n': [1]} }} {{ (1,) }} {{ (1, 'b') }} {{ () }}", {}),
        ("{{ ['it\\'s', 'say \"hi\"', 'both \\' \"', 'nl\\n', 'é\\u00a0\\u200b\\x7f', '\\\\'] }}", {}),
        ("{{ v }}", {"v": {"float": 2.0, "int": 2, "nested": [{"x": None}], "s": "it's"}}),
    ],
    "truthiness": [
        ("{% for v in [0, 1, '', 'a', [], [0], {}, {'a': 1}, none, 0.0, 0.5] %}{{ 'T' if v else 'F' }}{% endfor %}", {}),
    ],
    "globals": [
        ("{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }} {{ dict(a=1, b=[2]) }}", {}),
        ("{% set j = joiner(' | ') %}{% for x in 'abc' %}{{ j() }}{{ x }}{% endfor %}", {}),
        ("{% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }}", {}),
        ("{{ strftime_now('%Y-%m-%d %H:%M:%S %d %B %Y %a %b') }}", {}),
        ("{{ raise_exception('Only user and assistant roles are supported!') }}", {}),
    ],
    "syntax_errors": [
        ("{% if x %}unclosed", {}),
        ("{{ 1 + }}", {}),
        ("{% for x in %}{% endfor %}", {}),
        ("{% endif %}", {}),
        ("{{ x|no_such_filter }}", {}),
        ("{{ x is no_such_test }}", {}),
        ("{% if false %}{{ x|no_such_filter }}{% endif %}ok", {}),
        ("{% unknown_tag %}", {}),
        ("{{ 'unterminated }}", {}),
        ("{% break %}", {}),
        ("{{ (1, 2 }}", {}),
        ("{% set 1 = 2 %}", {}),
    ],
}


def jinja_cases():
    out = []
    for feature, cases in FEATURES.items():
        for source, variables in cases:
            case = {"feature": feature, "template": source, "variables": variables}
            case.update(outcome(lambda: ENV.from_string(source).render(**variables)))
            out.append(case)
    return out


def write(name, data):
    with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    write("model_cases.json", model_cases())
    write("jinja_cases.json", jinja_cases())
    print("jinja2", jinja2.__version__)
