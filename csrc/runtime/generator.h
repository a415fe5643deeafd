// The device's Philox generators (generator.cpp), for the random ops and
// torch.neuron.manual_seed and friends.
#pragma once

#include <cstdint>

#include <c10/core/Device.h>

namespace at {
struct Generator;
class Tensor;
}

namespace torch_neuronx {

// The device's default generator (device < 0: the current device).
const at::Generator &default_generator(c10::DeviceIndex device);

// A new generator for `device`, for PrivateUse1HooksInterface::getNewGenerator.
at::Generator new_generator(c10::DeviceIndex device);

// Philox state of `gen` (nullptr: the device's default generator): returns
// (seed, offset) and advances the offset by `increment` (rounded up to 4).
void philox_next(const at::Generator *gen, c10::DeviceIndex device, uint64_t increment,
                 uint64_t *out_seed, uint64_t *out_offset);

// Whether any element of a device flag tensor is set: one host read-back,
// for the checks of parameter values ATen makes at the op (bernoulli's p,
// normal's std, poisson's rate), so a bad argument raises there.
bool any_flag_set(const at::Tensor &flags);

}  // namespace torch_neuronx
