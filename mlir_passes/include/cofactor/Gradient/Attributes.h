//===- Attributes.h - attribute names of the gradient passes ----*- C++ -*-===//
//
// The discardable attributes through which the frontend and the gradient passes
// talk to each other (docs/gradients.md). They survive func-to-llvm, which
// copies a function's discardable attributes onto its llvm.func.
//
//===----------------------------------------------------------------------===//

#ifndef COFACTOR_GRADIENT_ATTRIBUTES_H
#define COFACTOR_GRADIENT_ATTRIBUTES_H

namespace cofactor::attr {

// Set by the frontend.
/// i64: how many leading arguments of a DPS function are inputs.
constexpr char kNumInputs[] = "cofactor.num_inputs";
/// unit: the function is a QNode.
constexpr char kQNode[] = "cofactor.qnode";
/// string: "adjoint", "parameter-shift" or "none".
constexpr char kDiffMethod[] = "cofactor.diff_method";
/// i64: a body-less function implemented by Python callback K.
constexpr char kCallbackId[] = "cofactor.callback_id";
/// unit: the callback has a user VJP (`.fwd`/`.bwd`).
constexpr char kCallbackHasVJP[] = "cofactor.callback_has_vjp";
/// symbol: a DPS function `V(ins..., couts..., vjps...)` that writes (not adds)
/// `J^T couts` into `vjps` (one per input, same types). Set by the frontend
/// or the passes for any opaque callee that Enzyme must not look into.
constexpr char kVJP[] = "cofactor.vjp";
/// unit, on a `quantum.obs_hamiltonian`: its coefficients are computed from
/// the QNode's inputs and are differentiated. --cofactor-split-qnodes makes
/// them parameters of the quantum part (after the gate parameters before
/// them), and the lowering calls `cf_rt_obs_hamiltonian_diff`.
constexpr char kDiffCoeffs[] = "cofactor.diff_coeffs";
/// symbol: instead of a VJP, a DPS function `J(ins..., jac, outs...)` that
/// computes the outputs as the primal does and also `jac` (memref<R x ? x f64>,
/// R = the outputs' elements in order) = d outputs / d last input, which is a
/// 1-D f64 memref; the other inputs have no derivative. The custom gradient's
/// forward then calls J and keeps only jac for the reverse: a split QNode's
/// circuit runs once, recorded, instead of once more in the reverse.
constexpr char kJacobian[] = "cofactor.jacobian";

// Set by the passes.
/// [@fwd_impl, @rev_impl]: the custom gradient of this primal.
constexpr char kCustomGradient[] = "cofactor.custom_gradient";
/// unit: Enzyme must treat the function as inactive (`__enzyme_inactivefn`).
constexpr char kInactive[] = "cofactor.inactive";
/// unit: the classical preprocessing clone counting gate parameters.
constexpr char kParamCount[] = "cofactor.param_count";

// On the `__cofactor_vjp_<k>` declarations made by --lower-gradient-ops.
constexpr char kVJPCallee[] = "cofactor.vjp_callee";
constexpr char kVJPNumInputs[] = "cofactor.vjp_num_inputs";
constexpr char kVJPNumOutputs[] = "cofactor.vjp_num_outputs";
constexpr char kVJPDiffInputs[] = "cofactor.vjp_diff_inputs";
/// [r0, r1, ...]: the memref rank of every operand, to regroup the expanded
/// descriptor arguments after func-to-llvm.
constexpr char kVJPRanks[] = "cofactor.vjp_ranks";

/// The prefix of the declarations made by --lower-gradient-ops.
constexpr char kVJPDeclPrefix[] = "__cofactor_vjp_";

} // namespace cofactor::attr

#endif // COFACTOR_GRADIENT_ATTRIBUTES_H
