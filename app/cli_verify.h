#pragma once
// Packed stores are read in full once before they are trusted (tandem/store_check.h); these are the
// command line's side of it.
#include <string>

#include "commands.h"

// tandem-cli chat, generate and eval: when --model names a store that has not been verified, or has
// changed since (its record no longer matches), read it in full first with progress on stderr, and
// refuse it if it is damaged. --no-verify skips the full read (with a note); a store known to be
// damaged is refused all the same. Returns the arguments without --no-verify, for the command.
CommandArgs verifyModelFirst(const CommandArgs& args);

// tandem-cli convert --verify: reads the store in full, records the result, prints each damaged file.
// Returns the exit code (0 intact, 1 damaged).
int verifyStoreNow(const std::string& dir);
