#pragma once
// The one exception the interpreter throws inside itself. Value operations throw it without a position;
// the evaluator fills in the position of the innermost template node it was evaluating, and the public
// Template API turns it into a tandem::Error that names the line and column.
#include <exception>
#include <optional>
#include <string>
#include <utility>

namespace tandem::text::jinja {

struct SourcePos {
    int line = 0;    // 1-based
    int column = 0;  // 1-based, in code points
};

class TemplateError : public std::exception {
public:
    explicit TemplateError(std::string message, std::optional<SourcePos> pos = std::nullopt)
        : message_(std::move(message)), pos_(pos) {}
    const char* what() const noexcept override { return message_.c_str(); }
    const std::string& message() const { return message_; }
    const std::optional<SourcePos>& pos() const { return pos_; }
    void locate(SourcePos pos) {
        if (!pos_) pos_ = pos;
    }

private:
    std::string message_;
    std::optional<SourcePos> pos_;
};

// A syntax error found while reading the template, as opposed to one found while rendering it.
class TemplateSyntaxError : public TemplateError {
public:
    using TemplateError::TemplateError;
};

// `raise_exception(message)` from the template itself: the message is the template author's, shown as is.
class TemplateRaised : public TemplateError {
public:
    using TemplateError::TemplateError;
};

}  // namespace tandem::text::jinja
