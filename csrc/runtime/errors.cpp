// Runtime status -> Python exception. c10's error types are what the
// Python bindings translate, so each status picks the one whose Python
// class callers expect (torch.OutOfMemoryError for an exhausted device).
#include <string>

#include "runtime/device.h"

namespace torch_neuronx {

[[noreturn]] void throw_status(nrt_status status, const char *what) {
  std::string detail = nrt_last_error_message();
  std::string msg = std::string(what) + ": " + nrt_status_string(status);
  if (!detail.empty()) msg += " (" + detail + ")";
  if (status == NRT_ERROR_OUT_OF_MEMORY) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, detail.empty() ? msg : detail);
  }
  if (status == NRT_ERROR_TIMEOUT || status == NRT_ERROR_PEER_FAILED) {  // a collective (torch.distributed)
    TORCH_CHECK_WITH(DistBackendError, false, msg);
  }
  if (status == NRT_ERROR_OUT_OF_RANGE) {
    // A kernel found an index (or a class target) outside its dim: the CPU
    // raises IndexError for these, so `except IndexError` works here too,
    // even though a device-resident index is only seen at the next sync.
    TORCH_CHECK_INDEX(false, msg);
  }
  if (status == NRT_ERROR_INVALID_DEVICE) {
    TORCH_CHECK(false, msg);
  }
  if (status == NRT_ERROR_INVALID_ARGUMENT && detail == "ZeroDivisionError") {
    TORCH_CHECK(false, "ZeroDivisionError");
  }
  TORCH_CHECK(false, msg);
}

}  // namespace torch_neuronx
