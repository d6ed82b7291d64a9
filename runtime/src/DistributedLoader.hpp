// The hook that lets device_acquire create a device sharded over MPI ranks without this
// library linking MPI (DistributedLoader.cpp loads libcofactor_runtime_mpi.so on demand).
#pragma once

#include <memory>

#include "QuantumDevice.hpp"

namespace cf {

// COFACTOR_MPI=1 in the environment, or cf_rt_set_distributed(1) since.
bool distributedRequested();
// The sharded device (throws CF_ERR_NOT_SUPPORTED when built without MPI).
std::unique_ptr<QuantumDevice> makeDistributedDevice(int numQubits, int64_t shots, int64_t seed);

} // namespace cf
