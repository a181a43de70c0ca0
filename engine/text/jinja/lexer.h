#pragma once
// Splits a template into tokens the way jinja2's lexer does with Hugging Face's settings:
// trim_blocks (a block tag eats the newline after it), lstrip_blocks (spaces before a block or comment
// tag on its own line go), `{%-`/`-%}` and friends, `{%+`/`+%}` to opt out, comments, {% raw %}, and
// the single trailing newline of the source dropped (keep_trailing_newline=False).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/error.h"

namespace tandem::text::jinja {

enum class TokenType { Data, VariableBegin, VariableEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Operator, Eof };

struct Token {
    TokenType type = TokenType::Eof;
    std::string text;  // data, name, the decoded string literal, or the operator
    std::int64_t integer = 0;
    double number = 0;
    SourcePos pos;
};

// Throws TemplateSyntaxError.
std::vector<Token> tokenize(std::string_view source);

// Describes a token for "unexpected ..." messages, as jinja2 does.
std::string describe(const Token& token);

}  // namespace tandem::text::jinja
