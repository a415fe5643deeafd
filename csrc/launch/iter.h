// Describing a built TensorIterator to the runtime, for the launch paths
// that build their own descriptor from it (launch_iter itself, the COMPLEX
// family's, indexing's): the shape and the device operands as
// TensorIterator laid them out.
#pragma once

#include <ATen/TensorIterator.h>

#include "launch/operand.h"

namespace torch_neuronx {

// A descriptor for `op` over the iterator's shape with its operand counts;
// the caller fills operands, dtypes and parameters.
inline nrt_launch iter_desc(const at::TensorIteratorBase &iter, nrt_op op) {
  nrt_launch d = new_launch(op);
  d.ndim = static_cast<int>(iter.ndim());
  for (int i = 0; i < d.ndim; ++i) d.sizes[i] = iter.shape()[i];
  d.noutputs = iter.noutputs();
  d.ninputs = iter.ninputs();
  return d;
}

// Operand i of the iterator (a device tensor): pointer, dtype, byte strides.
inline void set_iter_operand(nrt_operand &o, const at::TensorIteratorBase &iter, int i) {
  o.data = iter.data_ptr(i);
  o.dtype = to_nrt_dtype(iter.dtype(i));
  auto strides = iter.strides(i);
  for (int j = 0; j < iter.ndim(); ++j) o.strides[j] = strides[j];
}

}  // namespace torch_neuronx
