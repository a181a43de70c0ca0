#include "cli_args.h"

#include "tandem/error.h"

CliArgs::CliArgs(const std::vector<std::string>& args, const std::set<std::string>& valueOptions,
                 const std::set<std::string>& flagOptions, const std::set<std::string>& repeatedOptions) {
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (repeatedOptions.count(a)) {
            if (i + 1 >= args.size()) throw tandem::Error("option " + a + " needs a value");
            repeated_[a].push_back(args[++i]);
        } else if (valueOptions.count(a)) {
            if (i + 1 >= args.size()) throw tandem::Error("option " + a + " needs a value");
            values_[a] = args[++i];
        } else if (flagOptions.count(a)) {
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
        if (used == v->size()) return n;
    } catch (const std::exception&) {
    }
    throw tandem::Error("option " + name + " expects a number, not '" + *v + "'");
}
