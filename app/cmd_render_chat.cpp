// tandem-cli render-chat: the prompt text a model's chat template makes of a conversation.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "commands.h"
#include "io/text_file.h"
#include "tandem/error.h"
#include "text/chat_template.h"

int runRenderChat(const CommandArgs& argv) {
    const CliArgs args(argv, {"--model"}, {"--no-generation-prompt"}, {"--var"});
    const auto chat = tandem::text::ChatTemplate::load(args.required("--model"));
    if (chat.isFallback()) std::fprintf(stderr, "tandem-cli: warning: %s\n", chat.warning().c_str());

    nlohmann::ordered_json variables = nlohmann::ordered_json::object();
    for (const std::string& var : args.repeated("--var")) {
        const std::size_t eq = var.find('=');
        if (eq == std::string::npos || eq == 0) throw tandem::Error("--var expects NAME=JSON, not '" + var + "'");
        try {
            variables[var.substr(0, eq)] = tandem::io::parseJson<nlohmann::ordered_json>(var.substr(eq + 1), "--var " + var.substr(0, eq));
        } catch (const nlohmann::json::exception&) {
            throw tandem::Error("--var " + var.substr(0, eq) + ": '" + var.substr(eq + 1) +
                                "' is not JSON (write strings in quotes, e.g. --var 'reasoning_effort=\"high\"')");
        }
    }

    const std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    nlohmann::ordered_json messages;
    try {
        messages = tandem::io::parseJson<nlohmann::ordered_json>(input, "standard input");
    } catch (const nlohmann::json::exception& e) {
        throw tandem::Error("standard input is not a JSON array of messages: " + std::string(e.what()));
    }
    const std::string prompt = chat.render(messages, !args.flag("--no-generation-prompt"), variables);
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    return 0;
}
