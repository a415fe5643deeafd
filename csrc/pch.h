// The glue's precompiled header: the PyTorch headers most translation units
// include. setup.py compiles it once per flag set (build/pch/) and
// force-includes it, so each file skips re-parsing them (about 25 of a
// file's 40 s). Files still include what they use themselves; this list
// only decides what is parsed once. Keep it to headers that most files
// need anyway: everything here is parsed for every file.
#pragma once

#include <ATen/ExpandUtils.h>
#include <ATen/TensorIterator.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>
