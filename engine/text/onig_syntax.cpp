#include "text/onig_syntax.h"

#include <vector>

#include "tandem/error.h"

namespace tandem::text {
namespace {

// One bracketed character class of the pattern, split at its top-level "&&".
struct ClassParts {
    bool negated = false;
    std::vector<std::string> operands;  // the text of each operand
    std::vector<bool> operandIsNested;  // the operand is exactly one nested class "[...]"
    bool nestedInsideItems = false;     // a nested class mixed with other items: no PCRE2 spelling
    std::size_t end = 0;                // index just past the closing ']'
};

[[noreturn]] void unsupported(const std::string& where, std::string_view pattern, const char* what) {
    throw Error(where + ": the regex /" + std::string(pattern) + "/ uses " + what +
                ", which Tandem cannot translate for PCRE2; please report this tokenizer");
}

// Length of a POSIX class name such as "[:alpha:]" or "[:^space:]" at `i`, or 0.
std::size_t posixNameLength(std::string_view p, std::size_t i) {
    if (p.substr(i, 2) != "[:") return 0;
    std::size_t j = i + 2;
    if (j < p.size() && p[j] == '^') ++j;
    const std::size_t letters = j;
    while (j < p.size() && p[j] >= 'a' && p[j] <= 'z') ++j;
    return j > letters && p.substr(j, 2) == ":]" ? j + 2 - i : 0;
}

// Index just past the class that opens at `open`, treating escapes and POSIX names ("[:alpha:]") as
// atoms and nested classes as units.
std::size_t classEnd(std::string_view p, std::size_t open, const std::string& where) {
    std::size_t i = open + 1;
    if (i < p.size() && p[i] == '^') ++i;
    if (i < p.size() && p[i] == ']') ++i;  // a ']' first in a class is a literal
    while (i < p.size()) {
        if (p[i] == '\\') {
            i += 2;
        } else if (const std::size_t posix = posixNameLength(p, i)) {
            i += posix;
        } else if (p[i] == '[') {
            i = classEnd(p, i, where);
        } else if (p[i] == ']') {
            return i + 1;
        } else {
            ++i;
        }
    }
    unsupported(where, p, "an unclosed character class");
}

ClassParts splitClass(std::string_view p, std::size_t open, const std::string& where) {
    ClassParts parts;
    parts.end = classEnd(p, open, where);
    std::size_t i = open + 1;
    if (p[i] == '^') {
        parts.negated = true;
        ++i;
    }
    const std::size_t bodyEnd = parts.end - 1;
    std::string operand;
    bool sawNested = false, sawItem = false;
    const auto finishOperand = [&] {
        parts.operandIsNested.push_back(sawNested && !sawItem);
        parts.nestedInsideItems |= sawNested && sawItem;
        parts.operands.push_back(std::move(operand));
        operand.clear();
        sawNested = sawItem = false;
    };
    if (p[i] == ']') {  // the literal ']' first in the class
        operand += ']';
        sawItem = true;
        ++i;
    }
    while (i < bodyEnd) {
        if (p.substr(i, 2) == "&&") {
            finishOperand();
            i += 2;
        } else if (p[i] == '\\') {
            operand += p.substr(i, 2);
            sawItem = true;
            i += 2;
        } else if (const std::size_t posix = posixNameLength(p, i)) {
            operand += p.substr(i, posix);
            sawItem = true;
            i += posix;
        } else if (p[i] == '[') {
            const std::size_t nestedEnd = classEnd(p, i, where);
            operand += p.substr(i, nestedEnd - i);
            sawNested = true;
            i = nestedEnd;
        } else {
            operand += p[i];
            sawItem = true;
            ++i;
        }
    }
    finishOperand();
    return parts;
}

}  // namespace

std::string oniguramaToPcre2(std::string_view p, const std::string& where) {
    std::string out;
    out.reserve(p.size());
    std::size_t i = 0;
    while (i < p.size()) {
        if (p[i] == '\\') {
            out += p.substr(i, 2);
            i += 2;
            continue;
        }
        if (p[i] != '[') {
            out += p[i++];
            continue;
        }
        const ClassParts parts = splitClass(p, i, where);
        const bool plain = parts.operands.size() == 1 && !parts.operandIsNested[0] && !parts.nestedInsideItems;
        if (plain) {
            out += p.substr(i, parts.end - i);
            i = parts.end;
            continue;
        }
        if (parts.operands.size() == 1 || parts.nestedInsideItems)
            unsupported(where, p, "a character class nested inside another");
        // A character in every operand: the first one matches it, the others are lookaheads before it.
        std::string intersection;
        for (std::size_t k = 1; k < parts.operands.size(); ++k) {
            const std::string& operand = parts.operands[k];
            intersection += "(?=" + (parts.operandIsNested[k] ? operand : "[" + operand + "]") + ")";
        }
        intersection += parts.operandIsNested[0] ? parts.operands[0] : "[" + parts.operands[0] + "]";
        out += parts.negated ? "(?:(?!" + intersection + ")[\\s\\S])" : "(?:" + intersection + ")";
        i = parts.end;
    }
    return out;
}

}  // namespace tandem::text
