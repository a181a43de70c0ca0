#include "cli_args.h"

#include <cmath>

#include "tandem/error.h"

CliArgs::CliArgs(const std::vector<std::string>& args, const std::set<std::string>& valueOptions,
                 const std::set<std::string>& flagOptions, const std::set<std::string>& repeatedOptions) {
    for (std::size_t i = 0; i < args.size(); ++i) {
        // "--name=value" is "--name value" in one word.
        const std::size_t equals = args[i].rfind("--", 0) == 0 ? args[i].find('=') : std::string::npos;
        const std::string a = args[i].substr(0, equals);
        const auto value = [&]() -> std::string {
            if (equals != std::string::npos) return args[i].substr(equals + 1);
            if (i + 1 >= args.size()) throw tandem::Error("option " + a + " needs a value");
            return args[++i];
        };
        if (repeatedOptions.count(a)) {
            repeated_[a].push_back(value());
        } else if (valueOptions.count(a)) {
            values_[a] = value();
        } else if (flagOptions.count(a)) {
            if (equals != std::string::npos) throw tandem::Error("option " + a + " takes no value");
            flags_.insert(a);
        } else {
            throw tandem::Error("unknown option '" + a + "'");
        }
    }
}

std::vector<std::string> CliArgs::repeated(const std::string& name) const {
    const auto it = repeated_.find(name);
    return it == repeated_.end() ? std::vector<std::string>{} : it->second;
}

std::string CliArgs::required(const std::string& name) const {
    const auto it = values_.find(name);
    if (it == values_.end()) throw tandem::Error("missing required option " + name);
    return it->second;
}

std::optional<std::string> CliArgs::optional(const std::string& name) const {
    const auto it = values_.find(name);
    return it == values_.end() ? std::nullopt : std::optional(it->second);
}

int CliArgs::integer(const std::string& name, int fallback) const {
    const auto v = optional(name);
    if (!v) return fallback;
    try {
        std::size_t used = 0;
        const int n = std::stoi(*v, &used);
        if (used == v->size()) return n;
    } catch (const std::exception&) {
    }
    throw tandem::Error("option " + name + " expects a whole number, not '" + *v + "'");
}

double CliArgs::number(const std::string& name, double fallback) const {
    const auto v = optional(name);
    if (!v) return fallback;
    try {
        std::size_t used = 0;
        const double n = std::stod(*v, &used);
        if (used == v->size() && std::isfinite(n)) return n;
    } catch (const std::exception&) {
    }
    throw tandem::Error("option " + name + " expects a number, not '" + *v + "'");
}
