#pragma once
// Options of one tandem-cli command: "--name value" pairs and bare "--flag"s, checked against what the
// command accepts so a typo is reported instead of ignored.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

class CliArgs {
public:
    // valueOptions take a value ("--model DIR"); flagOptions do not ("--json").
    CliArgs(const std::vector<std::string>& args, const std::set<std::string>& valueOptions,
            const std::set<std::string>& flagOptions = {});

    std::string required(const std::string& name) const;
    std::optional<std::string> optional(const std::string& name) const;
    int integer(const std::string& name, int fallback) const;
    double number(const std::string& name, double fallback) const;
    bool flag(const std::string& name) const { return flags_.count(name) != 0; }

private:
    std::map<std::string, std::string> values_;
    std::set<std::string> flags_;
};
