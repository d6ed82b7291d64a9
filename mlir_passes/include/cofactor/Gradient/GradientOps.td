//===- GradientOps.td - the gradient dialect ------------------*- tablegen -*-===//
//
// The gradient dialect carries the differentiation requests of the frontend
// until `--lower-gradient-ops` turns them into calls that
// `--cofactor-emit-enzyme-glue` rewrites into `__enzyme_autodiff` calls.
// The contract with the frontend is docs/gradients.md.
//
//===----------------------------------------------------------------------===//

#ifndef COFACTOR_GRADIENT_OPS_TD
#define COFACTOR_GRADIENT_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"

def Gradient_Dialect : Dialect {
  let name = "gradient";
  let summary = "Reverse-mode differentiation requests on DPS functions.";
  let cppNamespace = "::cofactor::gradient";
  let emitAccessorPrefix = kEmitAccessorPrefix_Prefixed;
}

class Gradient_Op<string mnemonic, list<Trait> traits = []>
    : Op<Gradient_Dialect, mnemonic, traits>;

def Gradient_VJPOp : Gradient_Op<"vjp",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Run a DPS function and add its vector-Jacobian product.";
  let description = [{
    Operands, all memrefs: `ins...` (`num_inputs` of them), `outs...`
    (`num_outputs`), `couts...` (one per output, same types), `dins...` (one
    per entry of `diff_inputs`, the type of that input).

    ```mlir
    "gradient.vjp"(%x, %s, %out, %cout, %dx) {callee = @f, num_inputs = 2 : i64,
        num_outputs = 1 : i64, diff_inputs = [0]}
        : (memref<3xf64>, memref<f64>, memref<f64>, memref<f64>, memref<3xf64>) -> ()
    ```

    runs `f(ins..., outs...)`, so that `outs` hold the primal results
    afterwards, and adds `J^T couts` into `dins` (`+=`: the caller zero-fills
    them, or accumulates on purpose). The cotangents are consumed: `couts` are
    left zeroed. The callee is a void `func.func` whose arguments are the inputs
    followed by the outputs.
  }];
  let arguments = (ins Variadic<AnyMemRef>:$args,
                       FlatSymbolRefAttr:$callee,
                       I64Attr:$num_inputs,
                       I64Attr:$num_outputs,
                       I64ArrayAttr:$diff_inputs);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    mlir::OperandRange getIns();
    mlir::OperandRange getOuts();
    mlir::OperandRange getCouts();
    mlir::OperandRange getDins();
    /// The `diff_inputs` entries as integers.
    llvm::SmallVector<int64_t> getDiffInputIndices();
  }];
}

#endif // COFACTOR_GRADIENT_OPS_TD
