// Errors inside the runtime are C++ exceptions carrying a cf_status code; capi.cpp turns
// them into the per-thread error slot at the ABI boundary, so nothing below it needs to
// know about the slot (and nothing can abort the host process).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

#include "cofactor/runtime.h"

namespace cf {

class Error : public std::runtime_error {
  public:
    Error(cf_status code, const std::string &message) : std::runtime_error(message), code_(code) {}
    cf_status code() const { return code_; }

  private:
    cf_status code_;
};

// fail(CF_ERR_..., "wire ", w, " out of range") -- builds the message from its pieces.
template <class... Args> [[noreturn]] void fail(cf_status code, const Args &...args) {
    std::ostringstream os;
    (os << ... << args);
    throw Error(code, os.str());
}

} // namespace cf
