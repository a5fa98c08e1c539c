//===- Passes.td - coda fusion passes ----------------------*- tablegen -*-===//

#ifndef CODA_DIALECT_CODA_TRANSFORMS_PASSES_TD
#define CODA_DIALECT_CODA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def CodaConvertMatmuls : Pass<"coda-convert-matmuls"> {
  let summary = "turn linalg matrix products into coda.gemm";
  let description = [{
    Rewrites every contraction-shaped `linalg.generic` (and, through
    generalization, `linalg.matmul` / `linalg.batch_matmul` and their
    transposed forms) into a `coda.gemm` with a trivial epilogue: M x K (or
    K x M, `transpose_a`) times K x N or N x K (`transpose_b`), optionally
    batched, with the multiply-add in f32 (or a low-precision output that the
    epilogue rounds to). A destination that is not a zero fill becomes a
    `tile` input added to the accumulator. A batch whose rhs has no batch
    dimension is folded into M (`tensor.collapse_shape` of the lhs and the
    destination, `tensor.expand_shape` of the result). A product written
    transposed (its result map `(n, m)`), or read only through a transpose
    of its last two dimensions, becomes the GEMM of the swapped operands
    (C^T = B^T A^T), read in order. Reshapes of GEMM results then move past
    their elementwise consumers where the consumers can run over the GEMM's
    M x N space, and the reshapes this puts on the consumers' other operands
    are hoisted above the GEMM; transposes of GEMM results (the heads
    transpose) move past slices, concatenations and elementwise ops, so
    that those read the product in order (`populateSinkTransposesPatterns`).

    ```mlir
    %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
    %mm = linalg.matmul ins(%a, %b : tensor<4x8xbf16>, tensor<8x6xbf16>)
                        outs(%z : tensor<4x6xf32>) -> tensor<4x6xf32>
    ```
    becomes
    ```mlir
    %mm = coda.gemm %a, %b : tensor<4x8xbf16>, tensor<8x6xbf16>
        epilogue(%acc) outs(%e : tensor<4x6xf32>) {
      coda.yield %acc : f32
    }
    ```
  }];
  let dependentDialects = ["::mlir::coda::CodaDialect",
                           "::mlir::linalg::LinalgDialect"];
}

def CodaFuseSwiGLU : Pass<"coda-fuse-swiglu"> {
  let summary = "merge two GEMMs sharing their lhs and combined elementwise "
                "into one GEMM with a pairwise epilogue";
  let description = [{
    `f(x Wg, x Wu)` for any elementwise `f` (SwiGLU: `silu(g) * u`) becomes one
    `coda.gemm` over the column-interleaved weight `[Wg | Wu]` (column 2j from
    Wg, 2j + 1 from Wu) whose `coda.pair_contract` epilogue computes `f` per
    pair and writes the M x N result. The interleave is explicit
    (`tensor.insert_slice` + `tensor.collapse_shape` on the weights), so a
    framework can hoist it out of the training step.

    ```mlir
    %g = coda.gemm %x, %wg transpose_b ... { coda.yield %acc : f32 }
    %u = coda.gemm %x, %wu transpose_b ... { coda.yield %acc : f32 }
    %h = linalg.generic ... ins(%g, %u) { silu(g) * u }
    ```
    becomes
    ```mlir
    %wgu = ... interleave %wg, %wu ...
    %h = coda.gemm %x, %wgu transpose_b ... {
      %p = coda.pair_contract (%g, %u) = %acc : f32 -> !coda.pair<f32> { silu(g) * u }
      coda.yield %p : !coda.pair<f32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::coda::CodaDialect",
                           "::mlir::tensor::TensorDialect"];
}

def CodaDeferRowScale : Pass<"coda-defer-row-scale"> {
  let summary = "move a row-and-column scaling of a GEMM's lhs into its "
                "epilogue and weight (the RMSNorm reparameterization)";
  let description = [{
    When the lhs of a `coda.gemm` is an elementwise `y[m, k] = x[m, k] * R[m] *
    G[k]` (R a function of row vectors only, G of column vectors only; any
    order of products and divisions, casts around it), then
    `y W = diag(R) x (diag(G) W)`: the GEMM reads `x` directly, multiplies its
    accumulator by `R[m]` (a `row` input computed by a small elementwise op)
    and uses the weight `diag(G) W` (an explicit weight-side op). RMSNorm
    `x * rsqrt(mean(x^2) + eps) * gamma` is the case this exists for; no
    normalized copy of x is written.
  }];
  let dependentDialects = ["::mlir::coda::CodaDialect",
                           "::mlir::linalg::LinalgDialect"];
}

def CodaFuseRoPE : Pass<"coda-fuse-rope"> {
  let summary = "fuse a rotary embedding into the epilogue of the projection "
                "that produces it";
  let description = [{
    Finds RoPE as a PyTorch frontend lowers Hugging Face's `rotate_half` form
    on a GEMM output q (T x D, heads of d columns):
    `q * cos + cat(-q[..., d/2:], q[..., :d/2]) * sin`, written with
    `tensor.expand_shape` to T x H x d, two `tensor.extract_slice`s, a
    negation, `tensor.concat` and an elementwise op reading T x d cos/sin
    tables. It becomes a `coda.pair_map stride d/2` in the projection's
    epilogue (column i pairs with i + d/2 in each head) with the tables as
    `periodic` inputs; the rotated q is written once, in its original layout.
  }];
  let dependentDialects = ["::mlir::coda::CodaDialect"];
}

def CodaFusePointwise : Pass<"coda-fuse-pointwise"> {
  let summary = "fuse elementwise consumers of a GEMM into its epilogue";
  let description = [{
    A `linalg.generic` that is elementwise over a `coda.gemm` result (bias,
    residual add, scaling, activations, casts) joins the GEMM's epilogue. Its
    other operands become `tile`, `row`, `col` or `scalar` inputs according to
    their indexing maps; `linalg.index` becomes `coda.row_index` /
    `coda.col_index`. A GEMM result that other ops still read stays as an
    extra tile output. Operands defined after the GEMM are not pulled in, so a
    GEMM is never duplicated or reordered.
  }];
  let dependentDialects = ["::mlir::coda::CodaDialect"];
}

def CodaFuseGroups : Pass<"coda-fuse-groups"> {
  let summary = "fuse statistics over groups of a GEMM output's row into its "
                "epilogue";
  let description = [{
    Finds what frontends write on a GEMM output viewed as [M, N / w, w]
    (`tensor.expand_shape`, w a power of two from 8 to 256; [B, T, N / w, w]
    where a batch folded into the GEMM's rows is unfolded): a 1 x 128
    quantization (absolute maximum per group, scale, division, clamp, cast
    to f8E4M3FN, as torchao's blockwise prototype and DeepSeek-V3 write it)
    or a per-head RMSNorm (sum of squares per head, its reciprocal square
    root, the product with the output and a per-head-dimension weight).
    A reduction over the last dimension (sum, maximum or minimum of a
    function of the element, from a filled constant) becomes a
    `coda.group_reduce` whose statistics leave as a `coda.group_value`
    output; elementwise math on the statistics (with row inputs and
    scalars) a new `group_value`; an elementwise op over [M, N / w, w] that
    reads the output, its statistics broadcast along the group, rows,
    scalars, [M, N / w, w] tensors and per-group-element vectors a tile
    output of the GEMM. Outputs only the fused ops read are no longer
    written, so the [M, N] product never reaches memory.

    An arg-max as torch-mlir lowers `torch.max(x, dim)` / `torch.argmax`
    (the running maximum and the index where a value exceeds it, from -inf
    and 0) becomes `group_reduce max` and `argmax` outputs, the index the
    position within the group.

    A whole row of at most `tile` columns (and 256) that one tile holds is
    one group (its width the power of two the row rounds up to) where an
    elementwise op reads both its statistic and the row: a softmax over a
    MoE router's experts or a log-softmax over a few classes is then one
    GEMM, where row partials would need a finishing kernel.
  }];
  let options = [
    Option<"tile", "tile", "int64_t", "128",
           "the most columns of a whole row taken as one group (the GEMM's "
           "tile along N)">
  ];
  let dependentDialects = ["::mlir::coda::CodaDialect",
                           "::mlir::tensor::TensorDialect"];
}

def CodaFuseReductions : Pass<"coda-fuse-reductions"> {
  let summary = "compute row and column reductions of a GEMM's output as "
                "per-tile partials in its epilogue";
  let description = [{
    `s[m] = sum_n f(C[m, n])` over a `coda.gemm` tile output C becomes a
    `coda.row_reduce sum` of `f` in C's epilogue (partials per `tile` columns)
    plus a `coda.reduce_partials` finish: the producer half of the RMSNorm
    reparameterization (sum of squares of the residual stream). A maximum
    (from -inf) becomes `row_reduce max`; a softmax denominator
    `sum_n exp(f(C[m, n]) - g[m])` becomes `row_reduce logsumexp` of `f`,
    finished as `exp(lse[m] - g[m])`, so the exponentials never need C
    written. Reductions over the rows (`t[n] = sum_m f(C[m, n])`, the dgamma
    of RMSNorm backward) become `coda.col_reduce` partials per `tile` rows
    the same way.
  }];
  let options = [
    Option<"tile", "tile", "int64_t", "128",
           "rows or columns per partial (the GEMM's tile along the reduced "
           "axis)">
  ];
  let dependentDialects = ["::mlir::coda::CodaDialect"];
}

def CodaFuseGathers : Pass<"coda-fuse-gathers"> {
  let summary = "turn per-row gathers of a GEMM's output into coda.row_select";
  let description = [{
    A per-row op that reads `y[m, j(m)]` (`tensor.extract` at its row and a
    column computed from its inputs) where `y = E(C, row values)` is an
    elementwise function of a GEMM tile output C computes
    `E(row_select(C at j), row values)` instead: the GEMM's epilogue picks
    C's value at column j, and y is never written. With the row reductions
    (max and log-sum-exp) this removes the M x V logits of a cross-entropy:
    the target gather of `log_softmax(logits)` becomes a selection in the
    LM head's epilogue.
  }];
  let dependentDialects = ["::mlir::coda::CodaDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def CodaDeriveBackward : Pass<"coda-derive-backward", "::mlir::ModuleOp"> {
  let summary = "derive the backward program of functions of coda.gemm ops";
  let description = [{
    For a function `@f` on tensors whose body is `coda.gemm` ops (unbatched),
    `coda.reduce_partials` and elementwise `linalg.generic` glue, adds
    `@f_backward(f's arguments..., one upstream gradient per result of f) ->
    (one gradient per float tensor argument of f not only read as a scalar or
    periodic input)`, itself made of
    `coda.gemm` ops: reverse-mode differentiation where each GEMM's epilogue
    is differentiated in the epilogue of a GEMM.

    For each GEMM `Y_o = E_o(acc, inputs)`, `acc = A x B`, from the last to
    the first:

    - the adjoint GEMM recomputes `acc`; its epilogue copies `E`, then runs
      `E`'s reverse sweep and yields `dAcc = sum_o dY_o dE_o/dacc`, each tile
      input's gradient as a tile, and each row (column) input's gradient as
      row (column) partials of `tile` columns (rows) that a
      `coda.reduce_partials` finishes. When `E` only rounds the accumulator,
      `dAcc = dY` and there is no adjoint GEMM;
    - `dA = dAcc x B^T` and `dB = A^T x dAcc` (K x N rhs) or `dAcc^T x A`
      (N x K rhs, `transpose_b`), reading every operand as stored
      (`transpose_a` / `transpose_b`);
    - gradients of values used several times are summed.

    With `save=1`, `@f` itself also returns its GEMMs' results that are not
    results of `@f` and, for each GEMM whose one output only feeds a later
    GEMM's lhs through an elementwise epilogue or one pair contraction
    (SwiGLU), its accumulator (the two columns of each pair as two outputs);
    `@f_backward` takes them after `@f`'s arguments. Such a GEMM's epilogue is
    differentiated in the GEMM that produces its output's gradient (dY x B'^T
    of the consumer), which then yields dAcc (interleaved for a pair
    contraction): no adjoint GEMM, nothing recomputed. A pair contraction's
    row-input operands (a deferred norm's row scale) get their gradients as
    that GEMM's row partials. A GEMM whose adjoint needs the accumulator only
    through the values its tile outputs round (ops on the accumulator's side
    linear in it: a residual add with its sums of squares) saves those
    outputs (even when `@f` returns them) and its adjoint reads them: it
    reads no product. A GEMM marked `coda.save_accumulator` returns its
    accumulator for its adjoint. The derived function is CSE'd and
    canonicalized. Every GEMM and finish of `@f` and of the derived function
    gets its role as `coda.role` (`forward:gemm<j>`, `adjoint:gemm<j>`,
    `grad:gemm<j>.lhs` / `.rhs`, `grad:gemm<j>.input<i>`; the kernel
    manifest's `role`), by which a caller launching kernels one by one
    finds them.

    Scalar and periodic inputs (an epsilon, RoPE's tables) are constants to
    the derivative. Epilogue ops with a rule: arith add/sub/mul/div/neg,
    max/min, select, extf/truncf, math exp/expm1/log/log1p/sqrt/rsqrt/tanh/
    erf/absf/fma, pair_map and pair_contract; anything else that a gradient
    reaches, other ops in the function, max partials, pair inputs,
    interleaved outputs and batched GEMMs are reported.
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"\"",
           "the function to differentiate (default: every function with a "
           "coda.gemm)">,
    Option<"name", "name", "std::string", /*default=*/"\"\"",
           "name of the backward function (with `function`; default "
           "<function>_backward)">,
    Option<"tile", "tile", "int64_t", "128",
           "columns (rows) per partial of a row (column) input's gradient">,
    Option<"save", "save", "bool", "false",
           "the forward returns its intermediate results and the "
           "accumulators the backward needs, and activation gradients are "
           "computed in the GEMM that produces the activation's gradient, "
           "instead of recomputing the forward's GEMMs; a GEMM marked "
           "`coda.save_accumulator` also returns its accumulator (rounded to "
           "the operands' type), which its adjoint reads instead of the "
           "product">
  ];
  let dependentDialects = ["::mlir::coda::CodaDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
}

def CodaSimplifyMath : Pass<"coda-simplify-math"> {
  let summary = "math ops with constant exponents as products, square roots "
                "and divisions";
  let description = [{
    Upstream's algebraic simplification of the math dialect, as a pass:
    `math.powf %x, 2.0` becomes `%x * %x` (likewise exponents 1, 3, -1, -2,
    0.5, -0.5, 0.75, and `math.fpowi` with constant exponents). Programs
    imported from PyTorch write an RMSNorm's square as `x.pow(2)`; left as
    `math.powf`, a GPU kernel calls libdevice's general `__nv_powf` (a
    logarithm, an exponential and their range fix-ups: about 19 FMAs per
    element) in the epilogue, and the CPU reference calls libm's. `coda-fuse`
    runs it first, and the lowering pipelines run it before anything is
    lowered, so that an epilogue written by hand is simplified too.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

def CodaFuse : Pass<"coda-fuse", "::mlir::ModuleOp"> {
  let summary = "find memory-bound operators next to matmuls in linalg and "
                "fuse them into coda.gemm epilogues";
  let description = [{
    The whole fusion flow on linalg-on-tensors input: named ops are
    generalized and elementwise chains merged, `coda-simplify-math` runs,
    matrix products become
    `coda.gemm`, then `coda-fuse-swiglu`, `coda-defer-row-scale`,
    `coda-fuse-pointwise`, `coda-fuse-rope`, `coda-fuse-reductions` and
    `coda-fuse-gathers` run, followed by
    canonicalization. With `report`, prints per function the kernels and the
    bytes that memory-bound kernels move through memory, before and after.
  }];
  let options = [
    Option<"tile", "tile", "int64_t", "128",
           "columns per partial of fused row reductions">,
    Option<"report", "report", "bool", "false",
           "print a fusion report to stderr">,
    Option<"reportFile", "report-file", "std::string", /*default=*/"\"\"",
           "write the report to this file instead of stderr">
  ];
  let dependentDialects = ["::mlir::coda::CodaDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // CODA_DIALECT_CODA_TRANSFORMS_PASSES_TD
