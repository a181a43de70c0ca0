#pragma once
// The one exception type the engine throws for anything a user can cause: a bad or missing file,
// an unsupported model, a request that does not fit. The message is meant to be shown as is.
#include <stdexcept>
#include <string>

namespace tandem {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

}  // namespace tandem
