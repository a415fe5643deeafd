// Python bindings of the graph compiler for torch.compile(backend="neuron")
// (torch_neuronx/compiler/): a capture of real launches on the current
// stream (nrt/capture.h), the compiler (nrt/compiler.h) and programs
// (nrt/program.h). Pointers cross as integers; the Python side owns the
// tensors and hands their storages' addresses in. No compute here.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "nrt/capture.h"
#include "nrt/compiler.h"
#include "nrt/graph.h"
#include "nrt/program.h"
#include "python/compiler.h"
#include "runtime/device.h"

namespace py = pybind11;

namespace torch_neuronx {
namespace compiler {
namespace {

// A failed runtime call -> RuntimeError carrying the runtime's message,
// which for capture and compile failures names the op and the user's
// source line.
void raise(nrt_status st, const char *what) {
  if (st == NRT_SUCCESS) return;
  std::string detail = nrt_last_error_message();
  std::string msg = std::string(what) + ": " + nrt_status_string(st);
  if (!detail.empty()) msg += ": " + detail;
  throw std::runtime_error(msg);
}

struct Graph {
  nrt_graph *g = nullptr;
  ~Graph() { nrt_graph_destroy(g); }
};

struct Program {
  nrt_program *p = nullptr;
  ~Program() { nrt_program_release(p); }
};

// An open capture; destroyed unfinished (an exception in the traced
// function), it is aborted so the device can capture again.
struct Capture {
  nrt_capture *c = nullptr;
  ~Capture() {
    if (c) nrt_capture_abort(c);
  }
  nrt_capture *get() {
    if (!c) throw std::runtime_error("neuron capture: the capture has ended");
    return c;
  }
};

std::string take_string(char *s) {
  std::string out = s ? s : "";
  free(s);
  return out;
}

py::dict report_dict(const nrt_compile_report &r) {
  py::dict d;
  d["nodes_in"] = r.nodes_in;
  d["nodes_dead"] = r.nodes_dead;
  d["nodes_fused"] = r.nodes_fused;
  d["fused_steps"] = r.fused_steps;
  d["steps"] = r.steps;
  d["eliminated_buffers"] = r.eliminated_buffers;
  d["intermediate_bytes"] = r.intermediate_bytes;
  d["arena_bytes"] = r.arena_bytes;
  d["seconds"] = r.seconds;
  d["text"] = take_string(nrt_compile_report_format(&r));
  return d;
}

std::shared_ptr<Capture> capture_begin(int device) {
  auto cap = std::make_shared<Capture>();
  nrt_stream *s = current_nrt_stream(static_cast<c10::DeviceIndex>(device));
  raise(nrt_capture_begin(s, &cap->c), "neuron capture");
  return cap;
}

std::shared_ptr<Graph> capture_end(Capture &cap, uint64_t seed, uint64_t base, uint64_t advance) {
  auto g = std::make_shared<Graph>();
  nrt_capture *c = cap.get();
  cap.c = nullptr;  // nrt_capture_end frees it, on success and failure alike
  raise(nrt_capture_end(c, seed, base, advance, &g->g), "neuron capture");
  return g;
}

std::tuple<std::shared_ptr<Program>, py::dict> compile(const Graph &g, const std::string &flags,
                                                        const std::string &name) {
  nrt_compile_options o;
  nrt_compile_options_default(&o);
  o.name = name.c_str();
  raise(nrt_compile_options_parse(flags.c_str(), &o), "neuron compiler flags");
  auto p = std::make_shared<Program>();
  nrt_compile_report r{};
  nrt_status st;
  {
    py::gil_scoped_release nogil;
    st = nrt_compile(g.g, &o, &p->p, &r);
  }
  raise(st, "neuron compile");
  return {p, report_dict(r)};
}

// One run on the device's current stream: the arena comes from the caching
// allocator on that stream and goes back right after the enqueue (reuse is
// stream-ordered, so the next user waits for this run).
void run(Program &prog, int device, const std::vector<uintptr_t> &slots, uint64_t seed, uint64_t offset) {
  nrt_stream *s = current_nrt_stream(static_cast<c10::DeviceIndex>(device));
  std::vector<void *> ptrs(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) ptrs[i] = reinterpret_cast<void *>(slots[i]);
  int64_t arena_bytes = nrt_program_arena_bytes(prog.p);
  void *arena = nullptr;
  if (arena_bytes > 0) raise(nrt_malloc(static_cast<size_t>(arena_bytes), s, &arena), "neuron program arena");
  nrt_program_run_args a{ptrs.data(), static_cast<int>(ptrs.size()), arena, seed, offset};
  nrt_status st = nrt_program_run(prog.p, s, &a);
  if (arena) nrt_free(arena);
  raise(st, "neuron program run");
}

}  // namespace

void bind(py::module_ &m) {
  py::class_<Graph, std::shared_ptr<Graph>>(m, "_Graph")
      .def("text", [](const Graph &g) {
        char *t = nullptr;
        size_t n = 0;
        raise(nrt_graph_write(g.g, &t, &n), "neuron graph");
        return take_string(t);
      })
      .def("node_count", [](const Graph &g) { return nrt_graph_node_count(g.g); })
      .def("buffer_count", [](const Graph &g) { return nrt_graph_buffer_count(g.g); })
      .def("save", [](const Graph &g, const std::string &path) { raise(nrt_graph_save(g.g, path.c_str()), "neuron graph save"); });
  m.def("_graph_parse", [](const std::string &text) {
    auto g = std::make_shared<Graph>();
    raise(nrt_graph_parse(text.data(), text.size(), &g->g), "neuron graph parse");
    return g;
  });

  py::class_<Capture, std::shared_ptr<Capture>>(m, "_Capture")
      .def("declare_input", [](Capture &c, int slot, uintptr_t ptr, size_t bytes, bool mutated) {
        raise(nrt_capture_declare_input(c.get(), slot, reinterpret_cast<const void *>(ptr), bytes, mutated),
              "neuron capture input");
      })
      .def("declare_output", [](Capture &c, int slot, uintptr_t ptr, size_t bytes) {
        raise(nrt_capture_declare_output(c.get(), slot, reinterpret_cast<const void *>(ptr), bytes),
              "neuron capture output");
      })
      .def("set_location", [](Capture &c, const std::string &loc) {
        raise(nrt_capture_set_location(c.get(), loc.c_str()), "neuron capture");
      })
      .def("end", &capture_end)
      .def("abort", [](Capture &c) {
        if (c.c) nrt_capture_abort(c.c);
        c.c = nullptr;
      });
  m.def("_capture_begin", &capture_begin);

  py::class_<Program, std::shared_ptr<Program>>(m, "_Program")
      .def_property_readonly("name", [](const Program &p) { return std::string(nrt_program_name(p.p)); })
      .def_property_readonly("arena_bytes", [](const Program &p) { return nrt_program_arena_bytes(p.p); })
      .def_property_readonly("step_count", [](const Program &p) { return nrt_program_step_count(p.p); })
      .def_property_readonly("rng_advance", [](const Program &p) { return nrt_program_rng_advance(p.p); })
      .def_property_readonly("uses_rng", [](const Program &p) { return nrt_program_uses_rng(p.p); })
      .def_property_readonly("compiler", [](const Program &p) { return std::string(nrt_program_compiler(p.p)); })
      .def_property_readonly("flags", [](const Program &p) { return std::string(nrt_program_flags(p.p)); })
      .def_property_readonly("cpu_features", [](const Program &p) { return std::string(nrt_program_cpu_features(p.p)); })
      .def("slots", [](const Program &p) {
        std::vector<std::tuple<std::string, int64_t, bool>> out;
        int n = nrt_program_slot_count(p.p);
        for (int i = 0; i < n; ++i) {
          nrt_program_slot s;
          raise(nrt_program_slot_info(p.p, i, &s), "neuron program");
          out.emplace_back(nrt_buffer_kind_name(s.kind), s.bytes, s.mutated);
        }
        return out;
      })
      .def("dump", [](const Program &p) { return take_string(nrt_program_dump(p.p)); })
      .def("save", [](const Program &p, const std::string &path) {
        raise(nrt_program_save(p.p, path.c_str()), "neuron program save");
      })
      .def("retain", [](Program &p) { nrt_program_retain(p.p); })
      .def("release", [](Program &p) { nrt_program_release(p.p); })
      .def("run", &run, py::arg("device"), py::arg("slots"), py::arg("seed"), py::arg("offset"));
  m.def("_program_load", [](const std::string &path) {
    auto p = std::make_shared<Program>();
    raise(nrt_program_load(path.c_str(), &p->p), "neuron program load");
    return p;
  });
  m.def("_compile", &compile, py::arg("graph"), py::arg("flags"), py::arg("name"));
  m.def("_compiler_flags_check", [](const std::string &flags) {
    nrt_compile_options o;
    nrt_compile_options_default(&o);
    raise(nrt_compile_options_parse(flags.c_str(), &o), "neuron compiler flags");
  });
  m.def("_host_cpu_features", [] { return std::string(nrt_host_cpu_features()); });
  m.attr("_COMPILER_VERSION") = NRT_COMPILER_VERSION;
}

}  // namespace compiler
}  // namespace torch_neuronx
