/* The TorchNeuron runtime: umbrella header. */
#ifndef NRT_NRT_H
#define NRT_NRT_H
#include "nrt/status.h"
#include "nrt/config.h"
#include "nrt/dtype.h"
#include "nrt/device.h"
#include "nrt/stream.h"
#include "nrt/event.h"
#include "nrt/memory.h"
#include "nrt/launch.h"
#endif
