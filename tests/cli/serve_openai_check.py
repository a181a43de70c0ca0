#!/usr/bin/env python3
"""tandem-cli serve as the official `openai` Python package sees it (run by tst_serve_openai, in a
virtual environment of its own with openai installed from the Python package index).

  serve_openai_check.py --base-url URL --model NAME --api-key KEY --expected TEXT [--question TEXT]
                        [--tools-base-url URL --tools-model NAME]

--expected is tandem-cli chat's greedy answer to --question on the same model. The tools server runs a
model whose chat template takes tools. Any failed check raises: the exit code is not 0.
"""
import argparse
import sys

import openai


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def expect_error(kind, call, what):
    try:
        call()
    except kind as e:
        return e
    raise AssertionError(f"{what}: no {kind.__name__}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--expected", required=True)
    parser.add_argument("--question", default="What does serendipity mean?")
    parser.add_argument("--tools-base-url")
    parser.add_argument("--tools-model")
    args = parser.parse_args()

    client = openai.OpenAI(base_url=args.base_url, api_key=args.api_key, max_retries=0, timeout=120)
    messages = [{"role": "user", "content": args.question}]

    # Models.
    models = [m.id for m in client.models.list()]
    check(models == [args.model], f"models: {models}")
    check(client.models.retrieve(args.model).id == args.model, "models.retrieve")

    # A chat answer, whole: tandem-cli chat's greedy answer, with its usage.
    reply = client.chat.completions.create(model=args.model, messages=messages, temperature=0, max_tokens=256)
    choice = reply.choices[0]
    check(choice.message.role == "assistant", f"role: {choice.message.role}")
    check(choice.message.content == args.expected, f"content: {choice.message.content!r} != {args.expected!r}")
    check(choice.finish_reason == "stop", f"finish_reason: {choice.finish_reason}")
    check(reply.model == args.model and reply.object == "chat.completion", "model/object")
    usage = reply.usage
    check(usage.prompt_tokens > 0 and usage.completion_tokens > 0, f"usage: {usage}")
    check(usage.total_tokens == usage.prompt_tokens + usage.completion_tokens, f"usage: {usage}")

    # The same, streamed: the deltas add up to it, and include_usage brings the same usage at the end.
    stream = client.chat.completions.create(model=args.model, messages=messages, temperature=0, max_tokens=256,
                                            stream=True, stream_options={"include_usage": True})
    parts, finish, streamed_usage, chunks = [], None, None, 0
    for chunk in stream:
        chunks += 1
        check(chunk.object == "chat.completion.chunk", f"chunk object: {chunk.object}")
        if chunk.usage is not None:
            streamed_usage = chunk.usage
        for c in chunk.choices:
            if c.delta.content:
                parts.append(c.delta.content)
            if c.finish_reason:
                finish = c.finish_reason
    check(chunks > 3, f"only {chunks} chunks")
    check("".join(parts) == args.expected, f"streamed: {''.join(parts)!r}")
    check(finish == "stop", f"streamed finish_reason: {finish}")
    check(streamed_usage is not None and streamed_usage.total_tokens == usage.total_tokens,
          f"streamed usage: {streamed_usage}")

    # Stop strings, max_tokens, a seed.
    cut = args.expected[: len(args.expected) // 2]
    stopper = args.expected[len(cut): len(cut) + 4]
    stopped = client.chat.completions.create(model=args.model, messages=messages, temperature=0, stop=[stopper])
    check(args.expected.startswith(stopped.choices[0].message.content), "stop: not a prefix")
    check(stopper not in stopped.choices[0].message.content, "stop: the stop string came through")
    short = client.chat.completions.create(model=args.model, messages=messages, temperature=0, max_tokens=2)
    check(short.choices[0].finish_reason == "length" and short.usage.completion_tokens == 2, f"max_tokens: {short}")
    sampled = [client.chat.completions.create(model=args.model, messages=messages, temperature=1.0, top_p=0.95,
                                              seed=7).choices[0].message.content for _ in range(2)]
    check(sampled[0] == sampled[1], f"seed: {sampled}")

    # A completion of the raw prompt (ChatML, as the Pocket Dictionary's template writes it).
    prompt = f"<|im_start|>user\n{args.question}<|im_end|>\n<|im_start|>assistant\n"
    completion = client.completions.create(model=args.model, prompt=prompt, temperature=0, max_tokens=256)
    check(completion.choices[0].text == args.expected, f"completion: {completion.choices[0].text!r}")
    text = "".join(c.choices[0].text for c in client.completions.create(model=args.model, prompt=prompt, temperature=0,
                                                                        max_tokens=256, stream=True) if c.choices)
    check(text == args.expected, f"streamed completion: {text!r}")

    # Tools: a template without them refuses them (400); one with them renders them (tool calls are not yet
    # parsed back: the model's text comes as content).
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                               "parameters": {"type": "object",
                                                              "properties": {"city": {"type": "string"}}}}}]
    e = expect_error(openai.BadRequestError,
                     lambda: client.chat.completions.create(model=args.model, messages=messages, tools=tools),
                     "tools on a template without them")
    check(e.code == "tools_not_supported", f"tools error: {e.code} {e}")
    if args.tools_base_url:
        tools_client = openai.OpenAI(base_url=args.tools_base_url, api_key=args.api_key, max_retries=0, timeout=120)
        with_tools = tools_client.chat.completions.create(
            model=args.tools_model, messages=[{"role": "user", "content": "Weather in Paris?"}], tools=tools,
            temperature=0, max_tokens=16)
        without = tools_client.chat.completions.create(
            model=args.tools_model, messages=[{"role": "user", "content": "Weather in Paris?"}], temperature=0,
            max_tokens=16)
        check(with_tools.usage.prompt_tokens > without.usage.prompt_tokens + 20, "the tools are not in the prompt")
        with_result = tools_client.chat.completions.create(model=args.tools_model, tools=tools, temperature=0,
                                                           max_tokens=16, messages=[
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"}])
        check(with_result.choices[0].finish_reason in ("stop", "length"), "a conversation with a tool result")

    # Errors, as the client's own exceptions.
    e = expect_error(openai.NotFoundError,
                     lambda: client.chat.completions.create(model="gpt-4o", messages=messages), "unknown model")
    check(e.code == "model_not_found", f"unknown model: {e.code}")
    e = expect_error(openai.BadRequestError,
                     lambda: client.chat.completions.create(model=args.model, messages=messages, temperature="hot"),
                     "temperature of the wrong type")
    check(e.param == "temperature", f"wrong type: {e.param}")
    expect_error(openai.BadRequestError,
                 lambda: client.chat.completions.create(model=args.model, messages=[]), "no messages")
    expect_error(openai.BadRequestError,
                 lambda: client.chat.completions.create(model=args.model, messages=messages, max_tokens=10**7),
                 "max_tokens over the limit")
    e = expect_error(openai.BadRequestError,
                     lambda: client.chat.completions.create(model=args.model, messages=messages, extra_body={"n": 3}),
                     "n of 3")
    check(e.param == "n", f"n: {e.param}")
    wrong = openai.OpenAI(base_url=args.base_url, api_key="not-the-key", max_retries=0, timeout=30)
    expect_error(openai.AuthenticationError, lambda: wrong.models.list(), "a wrong key")
    expect_error(openai.AuthenticationError,
                 lambda: wrong.chat.completions.create(model=args.model, messages=messages), "a wrong key (chat)")
    # A stream of an error: the error comes before any chunk.
    expect_error(openai.NotFoundError,
                 lambda: list(client.chat.completions.create(model="nope", messages=messages, stream=True)),
                 "unknown model, streamed")
    print(f"serve_openai_check: all checks passed with openai {openai.__version__}")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"serve_openai_check: FAILED: {e}", file=sys.stderr)
        sys.exit(1)
