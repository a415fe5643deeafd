// Python bindings of the device profiler: on, off, and the records as
// plain tuples (torch_neuronx/profiler.py aggregates and writes traces).
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "nrt/dtype.h"
#include "nrt/profiler.h"
#include "python/profiler.h"

namespace py = pybind11;

namespace torch_neuronx {
namespace profiler {
namespace {

void check(nrt_status st) {
  if (st != NRT_SUCCESS) throw std::runtime_error(nrt_last_error_message());
}

using Record = std::tuple<std::string, int, int, int, bool, std::string, uint64_t, uint64_t, uint64_t, uint64_t,
                          uint64_t, uint64_t, uint64_t>;

// (name, device, stream, kind, failed, dtype ("" for tasks that are not
//  kernels), ticket, enqueue_ns, start_ns, end_ns, bytes, flops,
//  correlation), in the order the slots were taken.
std::vector<Record> read() {
  size_t n = 0;
  check(nrt_profiler_count(&n, nullptr));
  std::vector<nrt_activity> raw(n);
  size_t got = 0;
  if (n) check(nrt_profiler_read(0, n, raw.data(), &got));
  std::vector<Record> out;
  out.reserve(got);
  for (size_t i = 0; i < got; i++) {
    const nrt_activity &a = raw[i];
    std::string dtype = a.dtype >= 0 ? nrt_dtype_name(static_cast<nrt_dtype>(a.dtype)) : "";
    out.emplace_back(a.name, a.device, a.stream, a.kind, a.failed != 0, dtype, a.ticket, a.enqueue_ns, a.start_ns,
                     a.end_ns, a.bytes, a.flops, a.correlation);
  }
  return out;
}

}  // namespace

void bind(py::module_ &m) {
  m.def("_profiler_start", [] { check(nrt_profiler_start()); });
  m.def("_profiler_stop", [] {
    py::gil_scoped_release nogil;  // waits for the device
    check(nrt_profiler_stop());
  });
  m.def("_profiler_active", [] { return nrt_profiler_active(); });
  m.def("_profiler_read", [] { return read(); });
  m.def("_profiler_dropped", [] {
    size_t n = 0;
    uint64_t dropped = 0;
    check(nrt_profiler_count(&n, &dropped));
    return dropped;
  });
  m.def("_device_clock_ns", [] { return nrt_clock_ns(); });
}

}  // namespace profiler
}  // namespace torch_neuronx
