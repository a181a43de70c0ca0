#pragma once
// Helpers shared by the tandem-cli commands.
#include <string>
#include <vector>

// Whitespace-separated token ids; `where` names the source in errors.
std::vector<int> parseIds(const std::string& text, const std::string& where);
std::vector<int> readIdsFile(const std::string& path);
// Prints ids space-separated on one line.
void printIds(const std::vector<int>& ids);
