// Python bindings of torch_neuronx._C: device/stream/memory queries the
// Python package needs beyond what torch's generic accelerator API offers,
// and the op-accounting readers. Plain types only (no tensors), so this
// file stays free of the heavy torch/extension.h.
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <c10/core/Stream.h>
#include <c10/util/Exception.h>
#include <torch/csrc/Generator.h>

#include "distributed/bindings.h"
#include "python/compiler.h"
#include "python/profiler.h"
#include "registry/accounting.h"
#include "runtime/device.h"
#include "runtime/generator.h"

namespace py = pybind11;
using namespace torch_neuronx;

namespace {

// c10::Error -> RuntimeError keeping the message (pybind would print "Unknown");
// an out-of-range index a kernel found (torch.neuron.synchronize()) ->
// IndexError, as the CPU raises for it at the op.
template <typename F>
auto translate(F &&f) -> decltype(f()) {
  try {
    return f();
  } catch (const c10::OutOfMemoryError &e) {
    throw py::value_error(e.what_without_backtrace());
  } catch (const c10::IndexError &e) {
    throw py::index_error(e.what_without_backtrace());
  } catch (const c10::Error &e) {
    throw std::runtime_error(e.what_without_backtrace());
  }
}

py::dict device_properties(int device) {
  nrt_device_properties p;
  check(nrt_get_device_properties(device, &p), "neuron get_device_properties");
  py::dict d;
  d["name"] = std::string(p.name);
  d["index"] = p.index;
  d["physical_core"] = p.physical_core;
  d["core_count"] = p.core_count;
  d["total_memory"] = p.total_memory;
  d["worker_threads"] = p.worker_threads;
  return d;
}

py::dict memory_stats_raw(int device) {
  nrt_memory_stats s;
  check(nrt_memory_get_stats(device, &s), "neuron memory_stats");
  py::dict out;
  const char *pools[NRT_POOL_COUNT] = {"all", "small_pool", "large_pool"};
  auto put = [&](const char *name, const nrt_stat *st) {
    for (int p = 0; p < NRT_POOL_COUNT; ++p) {
      std::string base = std::string(name) + "." + pools[p] + ".";
      out[py::str(base + "current")] = st[p].current;
      out[py::str(base + "peak")] = st[p].peak;
      out[py::str(base + "allocated")] = st[p].allocated;
      out[py::str(base + "freed")] = st[p].freed;
    }
  };
  put("allocation", s.allocation);
  put("segment", s.segment);
  put("active", s.active);
  put("inactive_split", s.inactive_split);
  put("allocated_bytes", s.allocated_bytes);
  put("reserved_bytes", s.reserved_bytes);
  put("active_bytes", s.active_bytes);
  put("inactive_split_bytes", s.inactive_split_bytes);
  put("requested_bytes", s.requested_bytes);
  out["num_alloc_retries"] = s.num_alloc_retries;
  out["num_ooms"] = s.num_ooms;
  out["num_device_alloc"] = s.num_device_alloc;
  out["num_device_free"] = s.num_device_free;
  out["capacity"] = s.capacity;
  return out;
}

py::list env_table() {
  py::list rows;
  for (int i = 0; i < NRT_ENV_COUNT; ++i) {
    nrt_env_info info;
    check(nrt_env_describe(static_cast<nrt_env>(i), &info), "neuron env table");
    py::dict d;
    d["name"] = info.name;
    d["type"] = info.type;
    d["default"] = info.default_value;
    d["reader"] = info.reader;
    d["help"] = info.help;
    d["value"] = info.value ? py::object(py::str(info.value)) : py::object(py::none());
    rows.append(d);
  }
  return rows;
}

// Segments with their blocks as (address, size, requested, state) tuples.
py::list memory_snapshot(int device) {
  size_t nseg = 0, nblk = 0;
  std::vector<nrt_memory_segment_info> segs;
  std::vector<nrt_memory_block_info> blocks;
  do {  // the allocator may change between the sizing call and the fill
    segs.resize(nseg);
    blocks.resize(nblk);
    check(nrt_memory_snapshot(device, segs.data(), segs.size(), blocks.data(), blocks.size(), &nseg, &nblk),
          "neuron memory_snapshot");
  } while (nseg > segs.size() || nblk > blocks.size());
  py::list out;
  for (size_t s = 0; s < nseg; ++s) {
    py::dict d;
    d["address"] = segs[s].address;
    d["size"] = segs[s].size;
    d["pool"] = segs[s].pool;
    d["stream"] = segs[s].stream_index;
    py::list bl;
    for (size_t b = 0; b < segs[s].nblocks; ++b) {
      const nrt_memory_block_info &i = blocks[segs[s].first_block + b];
      bl.append(py::make_tuple(i.address, i.size, i.requested, static_cast<int>(i.state)));
    }
    d["blocks"] = bl;
    out.append(d);
  }
  return out;
}

py::dict host_memory_stats() {
  nrt_host_memory_stats s;
  check(nrt_host_memory_get_stats(&s), "neuron host_memory_stats");
  py::dict out;
  auto put = [&](const char *name, const nrt_stat &st) {
    std::string base = std::string(name) + ".";
    out[py::str(base + "current")] = st.current;
    out[py::str(base + "peak")] = st.peak;
    out[py::str(base + "allocated")] = st.allocated;
    out[py::str(base + "freed")] = st.freed;
  };
  put("allocations", s.allocations);
  put("allocated_bytes", s.allocated_bytes);
  return out;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "TorchNeuron native glue (runtime queries and op accounting)";
  m.def("_init", [] { translate([] { check(nrt_init(), "neuron init"); return 0; }); });
  m.def("_device_count", [] { return device_count(); });
  m.def("_get_device", [] { return static_cast<int>(current_device()); });
  m.def("_set_device", [](int d) {
    translate([&] { set_current_device(static_cast<c10::DeviceIndex>(d)); return 0; });
  });
  m.def("_exchange_device", [](int d) {
    return translate([&] {
      int old = current_device();
      if (d >= 0 && d != old) set_current_device(static_cast<c10::DeviceIndex>(d));
      return old;
    });
  });
  m.def("_device_properties", [](int d) { return translate([&] { return device_properties(d); }); });
  m.def("_synchronize", [](int d) {
    translate([&] {
      py::gil_scoped_release nogil;
      check(nrt_device_synchronize(d < 0 ? current_device() : d), "neuron synchronize");
      return 0;
    });
  });
  m.def("_memory_stats", [](int d) { return translate([&] { check_device_index(d); return memory_stats_raw(d); }); });
  m.def("_empty_cache", [] {
    translate([] {
      py::gil_scoped_release nogil;
      for (int d = 0; d < device_count(); ++d) check(nrt_empty_cache(d), "neuron empty_cache");
      return 0;
    });
  });
  m.def("_reset_peak", [](int d) { translate([&] { check_device_index(d); check(nrt_memory_reset_peak_stats(d), "reset"); return 0; }); });
  m.def("_reset_accumulated", [](int d) {
    translate([&] { check_device_index(d); check(nrt_memory_reset_accumulated_stats(d), "reset"); return 0; });
  });
  m.def("_mem_get_info", [](int d) {
    return translate([&] {
      check_device_index(d);
      size_t f = 0, t = 0;
      check(nrt_mem_get_info(d, &f, &t), "neuron mem_get_info");
      return std::make_pair(f, t);
    });
  });
  m.def("_set_memory_capacity", [](int d, uint64_t bytes) {
    translate([&] { check_device_index(d); check(nrt_set_memory_capacity(d, bytes), "set capacity"); return 0; });
  });
  m.def("_launch_blocking", [] { return nrt_launch_blocking() != 0; });
  m.def("_kernel_threads", [] { nrt_device_properties p; nrt_get_device_properties(0, &p); return p.worker_threads; });
  m.def("_default_generator", [](int d) {
    return translate([&] {
      return py::reinterpret_steal<py::object>(
          THPGenerator_initDefaultGenerator(default_generator(static_cast<c10::DeviceIndex>(d))));
    });
  });
  m.def("_native_ops", [] { return native_op_names(); });
  m.def("_executed_ops", [] { return executed_ops(); });
  m.def("_fallback_ops", [] { return fallback_ops(); });
  m.def("_clear_op_tracking", [] { clear_op_tracking(); });
  m.def("_env_table", [] { return translate([] { return env_table(); }); });
  m.def("_memory_snapshot", [](int d) { return translate([&] { check_device_index(d); return memory_snapshot(d); }); });
  m.def("_host_memory_stats", [] { return translate([] { return host_memory_stats(); }); });
  m.def("_device_busy_time", [](int d) {
    return translate([&] {
      uint64_t busy = 0, now = 0;
      check(nrt_device_busy_time(d, &busy, &now), "neuron utilization");
      return std::make_pair(busy, now);
    });
  });
  m.def("_stream_lookup", [](uintptr_t ptr) {
    return translate([&] {
      int dev = -1, idx = -1;
      check(nrt_stream_lookup(reinterpret_cast<const void *>(ptr), &dev, &idx), "neuron ExternalStream");
      return std::make_pair(dev, idx);
    });
  });
  m.def("_stream_pointer", [](int d, int64_t stream_id) {
    return translate([&] {
      nrt_stream *s = nullptr;
      check(nrt_stream_get(d, static_cast<int>(stream_id), &s), "neuron stream_handle");
      return reinterpret_cast<uintptr_t>(s);
    });
  });
  torch_neuronx::distributed::bind(m);  // torch.distributed backend "neuron"
  torch_neuronx::compiler::bind(m);     // torch.compile backend "neuron"
  torch_neuronx::profiler::bind(m);     // torch_neuronx.profiler
}
