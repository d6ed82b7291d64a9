//===- GateTables.h - straight-line gate runs as one table call -*- C++ -*-===//
//
// Part of `--lower-quantum-to-runtime`: a run of consecutive `quantum.gate` ops
// becomes one `cf_rt_gate_table` call on a constant table of gate records, with
// the run-time parameters (and any wires computed at run time) stored into stack
// buffers. The emitted code per gate is a few stores instead of a call with its
// own argument set-up, so compile time stays linear and small in the gate count.
//
//===----------------------------------------------------------------------===//

#ifndef COFACTOR_LIB_TRANSFORMS_GATETABLES_H
#define COFACTOR_LIB_TRANSFORMS_GATETABLES_H

#include "RuntimeCallBuilder.h"

#include "mlir/IR/BuiltinOps.h"

namespace cofactor {

/// Replaces every run of at least `minGates` (>= 2) gates in `module` by one
/// table call. Gates between which an op may touch the device (any call, any op
/// with regions, any op that writes memory or whose effects are unknown) are in
/// different runs; pure ops and loads between gates stay where they are, and the
/// call goes where the run's last gate was. Gates in loop bodies form runs of
/// their own body; the loop stays a loop. `minGates == 0` disables tables.
void lowerGateRunsToTables(mlir::ModuleOp module,
                           mlir::LLVMTypeConverter &llvmTypes,
                           StackArrays &stackArrays, unsigned minGates);

} // namespace cofactor

#endif // COFACTOR_LIB_TRANSFORMS_GATETABLES_H
