/* Graph capture: recording real launches into a graph (nrt/graph.h), as
 * CUDA graphs do.
 *
 * While a stream captures, every launch on it runs as usual AND is
 * recorded, its operand pointers resolved to (buffer, byte offset). A
 * buffer is a declared slot (a graph input or output) or an allocation
 * made by nrt_malloc on the capturing stream during the capture: the
 * allocation instance, not its address, since the caching allocator hands
 * a freed address out again. Device-to-device copies on the stream are
 * recorded as COPY nodes, host-to-device copies as constants copied into
 * the graph.
 *
 * The capture fails, naming the op and the current source location, on:
 * a synchronising call on the capturing stream ("reads device data on the
 * host"), a device-to-host copy on it, an operand pointer outside every
 * known buffer ("reads memory that is not a graph input"), and a launch on
 * another stream of the same device that touches captured memory. The
 * offending call itself returns the error (after doing its work, for a
 * synchronisation); nrt_capture_end returns it again.
 *
 * One capture per device at a time. Call order:
 *   nrt_capture_begin(stream, &cap);
 *   nrt_capture_declare_input(cap, slot, ptr, bytes, mutated);   // each input
 *   for each node: nrt_capture_set_location(cap, "model.py:12 in forward");
 *                  ... the node's launches and allocations ...
 *   nrt_capture_declare_output(cap, slot, ptr, bytes);           // each output
 *   nrt_capture_end(cap, seed, base_offset, advance, &graph);   // frees cap
 * Slots are one index space over inputs and outputs, dense from 0.
 * nrt_capture_abort frees a capture without a graph. */
#ifndef NRT_CAPTURE_H
#define NRT_CAPTURE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "nrt/graph.h"
#include "nrt/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nrt_capture nrt_capture;

nrt_status nrt_capture_begin(nrt_stream *stream, nrt_capture **out_capture);
/* An input: device memory [ptr, ptr + bytes) that exists before the graph
 * runs. `mutated`: the graph writes it. */
nrt_status nrt_capture_declare_input(nrt_capture *capture, int slot, const void *ptr, size_t bytes,
                                     bool mutated);
/* An output: an allocation made during the capture, starting at ptr. */
nrt_status nrt_capture_declare_output(nrt_capture *capture, int slot, const void *ptr, size_t bytes);
/* The location recorded with the following launches (copied). */
nrt_status nrt_capture_set_location(nrt_capture *capture, const char *location);
/* Ends the capture and frees it. seed / base_offset: the Philox state the
 * generator had when the capture began; advance: how far the capture
 * moved the generator's offset (nrt_graph_set_rng). On failure no graph is
 * returned and the message names the first problem. */
nrt_status nrt_capture_end(nrt_capture *capture, uint64_t seed, uint64_t base_offset,
                           uint64_t advance, nrt_graph **out_graph);
void nrt_capture_abort(nrt_capture *capture);

#ifdef __cplusplus
}
#endif
#endif
