// tandem-cli render-chat: the prompt text a model's chat template makes of a conversation.
#include <cstdio>
#include <iostream>
#include <iterator>

#include "cli_args.h"
#include "commands.h"
#include "tandem/chat.h"
#include "tandem/error.h"

int runRenderChat(const CommandArgs& argv) {
    const CliArgs args(argv, {"--model"}, {"--no-generation-prompt"}, {"--var"});
    std::vector<std::pair<std::string, tandem::JsonInput>> variables;
    for (const std::string& var : args.repeated("--var")) {
        const std::size_t eq = var.find('=');
        if (eq == std::string::npos || eq == 0) throw tandem::Error("--var expects NAME=JSON, not '" + var + "'");
        variables.push_back({var.substr(0, eq), {var.substr(eq + 1), "--var " + var.substr(0, eq)}});
    }
    const std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    const auto prompt = tandem::renderChatPrompt(args.required("--model"), {input, "standard input"}, variables,
                                                 !args.flag("--no-generation-prompt"));
    if (!prompt.warning.empty()) std::fprintf(stderr, "tandem-cli: warning: %s\n", prompt.warning.c_str());
    std::fwrite(prompt.text.data(), 1, prompt.text.size(), stdout);
    return 0;
}
