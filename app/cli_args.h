#pragma once
// Options of one tandem-cli command: "--name value" (or "--name=value") pairs and bare "--flag"s, checked
// against what the command accepts so a typo is reported instead of ignored.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

class CliArgs {
public:
    // valueOptions take a value ("--model DIR"); flagOptions do not ("--json"); repeatedOptions take a
    // value and may be given several times ("--var a=1 --var b=2").
    CliArgs(const std::vector<std::string>& args, const std::set<std::string>& valueOptions,
            const std::set<std::string>& flagOptions = {}, const std::set<std::string>& repeatedOptions = {});

    std::string required(const std::string& name) const;
    std::optional<std::string> optional(const std::string& name) const;
    int integer(const std::string& name, int fallback) const;
    double number(const std::string& name, double fallback) const;
    bool flag(const std::string& name) const { return flags_.count(name) != 0; }
    // Every value of a repeated option, in command-line order.
    std::vector<std::string> repeated(const std::string& name) const;

private:
    std::map<std::string, std::string> values_;
    std::set<std::string> flags_;
    std::map<std::string, std::vector<std::string>> repeated_;
};
