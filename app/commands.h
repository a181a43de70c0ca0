#pragma once
// The tandem-cli commands. Each takes the arguments after the command name and returns the exit code;
// user errors are thrown as tandem::Error and reported by main.
#include <string>
#include <vector>

using CommandArgs = std::vector<std::string>;

int runBenchMoe(const CommandArgs& args);
int runConvert(const CommandArgs& args);
int runEval(const CommandArgs& args);
int runGenerate(const CommandArgs& args);
int runChat(const CommandArgs& args);
int runBench(const CommandArgs& args);
int runTokenize(const CommandArgs& args);
int runDetokenize(const CommandArgs& args);
int runBenchTokenizer(const CommandArgs& args);
int runRenderChat(const CommandArgs& args);
#ifdef TANDEM_CLI_DOWNLOAD
int runDownload(const CommandArgs& args);
#endif
#ifdef TANDEM_CLI_SERVE
int runServe(const CommandArgs& args);
#endif
