//===- CodaOps.td - coda dialect operations ----------------*- tablegen -*-===//

#ifndef CODA_DIALECT_CODA_IR_CODAOPS_TD
#define CODA_DIALECT_CODA_IR_CODAOPS_TD

include "coda/Dialect/Coda/IR/CodaBase.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"

class Coda_Op<string mnemonic, list<Trait> traits = []>
    : Op<Coda_Dialect, mnemonic, traits>;

def Coda_TensorOrMemRef : AnyTypeOf<[AnyRankedTensor, AnyMemRef]>;

//===----------------------------------------------------------------------===//
// coda.gemm
//===----------------------------------------------------------------------===//

def Coda_GemmOp : Coda_Op<"gemm", [
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DestinationStyleOpInterface,
    IsolatedFromAbove,
    SingleBlock
  ]> {
  let summary = "matrix product with an epilogue program";
  let description = [{
    Computes `acc = lhs x rhs` with f32 accumulation and runs the `epilogue`
    region once per output element (m, n) (and batch index b). The region's
    first argument is the accumulator element; then comes one argument per
    epilogue input, read according to its access form:

    | form     | operand shape        | element read at (b, m, n) |
    |----------|----------------------|---------------------------|
    | `tile`   | [B x] M x N          | input[b, m, n]            |
    | `row`    | [B x] M              | input[b, m]               |
    | `col`    | N                    | input[n]                  |
    | `scalar` | a scalar SSA value   | the value itself          |
    | `periodic` | [B x] M x P, P divides N | input[b, m, n mod P] |
    | `pair`   | [B x] M x N/2        | input[b, m, pair(n)]      |

    `pair(n)` is the column that n's pair occupies in a pair output (see
    `coda.pair_contract`): both columns of a pair read the same element. An
    epilogue with a `pair` input has pairwise ops, whose stride it uses (the
    gradient of a `pair_contract` output is read this way).

    `lhs` is [B x] M x K, or K x M with `transpose_a` (a weight gradient
    `X^T dY` reads the activations X as stored). `rhs` is K x N, or N x K
    with `transpose_b` (the way `nn.Linear` stores weights), optionally with
    the same leading batch dimension B as `lhs`; an unbatched `rhs` is shared
    by every batch.

    The terminator `coda.yield` gives one value per output (destination-passing
    style: `outs`). The type of the yielded value fixes the output's shape:

    | yielded type        | produced by          | output shape              |
    |---------------------|----------------------|---------------------------|
    | element type T      | any epilogue value   | [B x] M x N               |
    | `!coda.pair<T>`     | `coda.pair_contract` | [B x] M x N/2             |
    | `!coda.interleaved<T>` | `coda.interleave` | [B x] M x 2N              |
    | `!coda.partial<T>`  | `coda.row_reduce`    | [B x] M x ceildiv(N, tile)|
    | `!coda.partial<T>`  | `coda.col_reduce`    | [B x] ceildiv(M, tile) x N|
    | `!coda.row<T>`      | `coda.row_select`    | [B x] M                   |

    On tensors the op returns one tensor per output; on memrefs it writes the
    outputs in place and returns nothing.

    Example: residual add, a saved f32 copy and per-tile partial sums of
    squares (the producer half of a deferred RMSNorm):

    ```mlir
    %y, %h, %ss = coda.gemm %x, %w transpose_b : tensor<64x32xbf16>, tensor<96x32xbf16>
        epilogue(%acc, tile %r = %res : tensor<64x96xbf16>)
        outs(%y0, %h0, %ss0 : tensor<64x96xbf16>, tensor<64x96xf32>, tensor<64x2xf32>) {
      %rf = arith.extf %r : bf16 to f32
      %h = arith.addf %acc, %rf : f32
      %sq = arith.mulf %h, %h : f32
      %p = coda.row_reduce sum %sq tile 64 : f32
      %hb = arith.truncf %h : f32 to bf16
      coda.yield %hb, %h, %p : bf16, f32, !coda.partial<f32>
    }
    ```
  }];

  let arguments = (ins
    Coda_TensorOrMemRef:$lhs,
    Coda_TensorOrMemRef:$rhs,
    Variadic<AnyType>:$epilogue_inputs,
    Variadic<Coda_TensorOrMemRef>:$outputs,
    Coda_AccessFormArrayAttr:$input_forms,
    UnitAttr:$transpose_b,
    UnitAttr:$transpose_a
  );
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$epilogue);

  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let hasCanonicalizer = 1;

  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputsMutable();
    }
    /// True when lhs has a leading batch dimension.
    bool isBatched() { return getLhsType().getRank() == 3; }
    ::mlir::ShapedType getLhsType() {
      return ::llvm::cast<::mlir::ShapedType>(getLhs().getType());
    }
    ::mlir::ShapedType getRhsType() {
      return ::llvm::cast<::mlir::ShapedType>(getRhs().getType());
    }
    /// The static sizes of the M, N and K dimensions (ShapedType::kDynamic
    /// when dynamic) and of the batch dimension (1 when unbatched).
    int64_t getStaticM();
    int64_t getStaticN();
    int64_t getStaticK();
    int64_t getStaticBatch();
    /// Which dimension of lhs holds M (K), of rhs N: they swap with
    /// transpose_a (transpose_b), after a batch dimension.
    unsigned getLhsMDim() {
      return getLhsType().getRank() - (getTransposeA() ? 1 : 2);
    }
    unsigned getLhsKDim() {
      return getLhsType().getRank() - (getTransposeA() ? 2 : 1);
    }
    unsigned getRhsNDim() {
      return getRhsType().getRank() - (getTransposeB() ? 2 : 1);
    }
    /// The access form of epilogue input `i`.
    ::mlir::coda::AccessForm getInputForm(unsigned i);
    ::mlir::Block &getBody() { return getEpilogue().front(); }
    ::mlir::BlockArgument getAccumulatorArg() { return getBody().getArgument(0); }
    /// Whether the epilogue reads the product at all: if not, the GEMM is
    /// its epilogue alone and the lowerings compute no product.
    bool readsAccumulator() { return !getAccumulatorArg().use_empty(); }
    ::mlir::BlockArgument getInputArg(unsigned i) {
      return getBody().getArgument(1 + i);
    }
    ::mlir::coda::YieldOp getYieldOp();
    /// The stride of the epilogue's pairwise ops (they share one), or
    /// nothing when it has none.
    std::optional<int64_t> getPairStride();
    /// The element type a block argument has for an input of this type.
    static ::mlir::Type getInputElementType(::mlir::Type inputType);
  }];
}

//===----------------------------------------------------------------------===//
// coda.yield
//===----------------------------------------------------------------------===//

def Coda_YieldOp : Coda_Op<"yield", [
    Pure, ReturnLike, Terminator,
    ParentOneOf<["GemmOp", "PairMapOp", "PairContractOp"]>
  ]> {
  let summary = "terminates an epilogue or a pairwise region";
  let description = [{
    In `coda.gemm`, gives one value per output; in `coda.pair_map` and
    `coda.pair_contract`, the new values of the pair.
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let builders = [OpBuilder<(ins), [{ /* nothing to yield */ }]>];
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

//===----------------------------------------------------------------------===//
// Element position
//===----------------------------------------------------------------------===//

class Coda_PositionOp<string mnemonic, string axis>
    : Coda_Op<mnemonic, [Pure, HasParent<"GemmOp">]> {
  let summary = "the " # axis # " index of the current output element";
  let description = [{
    The }] # axis # [{ index of the output element the epilogue is evaluated
    for, counted from 0 over the whole output (not within a tile).
  }];
  let results = (outs Index:$result);
  let assemblyFormat = "attr-dict";
}

def Coda_RowIndexOp : Coda_PositionOp<"row_index", "row (m)">;
def Coda_ColIndexOp : Coda_PositionOp<"col_index", "column (n)">;

//===----------------------------------------------------------------------===//
// Block reductions
//===----------------------------------------------------------------------===//

class Coda_BlockReduceOp<string mnemonic, string axis, string other>
    : Coda_Op<mnemonic, [Pure, HasParent<"GemmOp">,
        TypesMatchWith<"result is a partial of the value's type", "value",
                       "result", "::mlir::coda::PartialType::get($_self)">]> {
  let summary = "per-tile partial " # axis # " reduction of an epilogue value";
  let description = [{
    Reduces `value` along each }] # axis # [{ of the output, in blocks of
    `tile` consecutive }] # other # [{ indices. Block t covers indices
    [t * tile, min((t + 1) * tile, size)). The result, yielded by `coda.gemm`,
    fills an output with one partial per }] # axis # [{ and block; a finishing
    step (`coda.reduce_partials`) combines the partials.

    `sum` adds, `max` takes the maximum (NaN propagates), `logsumexp`
    computes log(sum(exp(v))) online: a running maximum and a sum of
    exponentials rescaled whenever the maximum grows.
  }];
  let arguments = (ins AnyFloat:$value, Coda_ReductionKindAttr:$kind,
                       ConfinedAttr<I64Attr, [IntPositive]>:$tile);
  let results = (outs Coda_PartialType:$result);
  let assemblyFormat = "`` $kind $value `tile` $tile attr-dict `:` type($value)";
}

def Coda_RowReduceOp : Coda_BlockReduceOp<"row_reduce", "row", "column"> {
  let extraClassDeclaration = [{
    static constexpr ::mlir::coda::ReductionAxis kAxis =
        ::mlir::coda::ReductionAxis::row;
  }];
}
def Coda_ColReduceOp : Coda_BlockReduceOp<"col_reduce", "column", "row"> {
  let extraClassDeclaration = [{
    static constexpr ::mlir::coda::ReductionAxis kAxis =
        ::mlir::coda::ReductionAxis::col;
  }];
}

//===----------------------------------------------------------------------===//
// Group statistics
//===----------------------------------------------------------------------===//

def Coda_GroupReduceOp : Coda_Op<"group_reduce", [Pure, HasParent<"GemmOp">]> {
  let summary = "a statistic of a group of the output, used by the same "
                "epilogue";
  let description = [{
    The statistic of `value` over the group of the output the element lies
    in, as a value the rest of the epilogue uses at every element of the
    group. With `row`, the groups are `width` consecutive columns of a row:
    the element (m, n) lies in the group of columns
    [g * width, min((g + 1) * width, N)) of row m, g = n / width. With
    `col`, they are `width` consecutive rows of a column.

    `sum` adds, `max` and `min` take the largest and smallest value (NaN
    propagates), `argmax` gives the position (column, or row for column
    groups, counted over the whole output) of the group's first maximum, as
    an index.

    A group lies inside one output tile (its width is a power of two from 8
    to 256 columns, or to 128 rows, and the lowering picks a tile it
    divides), so its statistic never leaves the epilogue: this is what makes
    a per-head RMSNorm, a 1 x 128 FP8 quantization or a softmax over a few
    experts one kernel. A statistic over a whole row that spans several
    tiles is `coda.row_reduce` with `coda.reduce_partials`.

    ```mlir
    // A 1 x 128 quantization: the group's absolute maximum, its scale.
    %abs = math.absf %v : f32
    %amax = coda.group_reduce max %abs row group 128 : f32 -> f32
    ```

    The value may depend on statistics of the same groups (a softmax: the
    maximum, then the sum of exponentials relative to it), but on no
    pairwise op.
  }];
  let arguments = (ins AnyFloat:$value, Coda_GroupStatisticAttr:$kind,
                       Coda_ReductionAxisAttr:$axis,
                       ConfinedAttr<I64Attr, [IntPositive]>:$width);
  let results = (outs AnyTypeOf<[AnyFloat, Index]>:$result);
  let assemblyFormat = "`` $kind $value $axis `group` $width attr-dict `:` "
                       "type($value) `->` type($result)";
  let hasVerifier = 1;
}

def Coda_GroupValueOp : Coda_Op<"group_value", [Pure, HasParent<"GemmOp">,
    TypesMatchWith<"result is a grouped value of the value's type", "value",
                   "result", "::mlir::coda::GroupedType::get($_self)">]> {
  let summary = "a value the same over each group, written once per group";
  let description = [{
    `value`, which must be the same at every element of each group (it
    depends only on `coda.group_reduce` results of the same groups, row
    values for row groups or column values for column groups, scalars and
    constants), bound for an output of one element per group (see
    `!coda.grouped`): the scale of each 1 x 128 group beside its FP8 codes.

    ```mlir
    %scale = arith.divf %amax, %fp8max : f32
    %scales = coda.group_value %scale row group 128 : f32
    ```
  }];
  let arguments = (ins AnyTypeOf<[AnyFloat, AnySignlessInteger]>:$value,
                       Coda_ReductionAxisAttr:$axis,
                       ConfinedAttr<I64Attr, [IntPositive]>:$width);
  let results = (outs Coda_GroupedType:$result);
  let assemblyFormat =
      "$value $axis `group` $width attr-dict `:` type($value)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Selection
//===----------------------------------------------------------------------===//

def Coda_RowSelectOp : Coda_Op<"row_select", [Pure, HasParent<"GemmOp">,
    TypesMatchWith<"result is a row value of the value's type", "value",
                   "result", "::mlir::coda::RowType::get($_self)">]> {
  let summary = "the value at a per-row target column";
  let description = [{
    For each row m, takes `value` at the column n == `column` (typically a
    `row` input holding a target class per token). The result, yielded by
    `coda.gemm`, writes element m of a row-vector output; rows whose target lies
    outside [0, N) (an ignore index such as -100) keep the output's initial
    value.

    ```mlir
    %picked = coda.row_select %logit at %target : f32, i64
    ```
  }];
  let arguments = (ins AnyTypeOf<[AnyFloat, AnySignlessInteger]>:$value,
                       AnySignlessIntegerOrIndex:$column);
  let results = (outs Coda_RowType:$result);
  let assemblyFormat =
      "$value `at` $column attr-dict `:` type($value) `,` type($column)";
}

def Coda_InterleaveOp : Coda_Op<"interleave", [Pure, HasParent<"GemmOp">,
    AllTypesMatch<["even", "odd"]>,
    TypesMatchWith<"result is an interleaved value of the values' type",
                   "even", "result", "::mlir::coda::InterleavedType::get($_self)">]> {
  let summary = "two values per element, written to columns 2n and 2n + 1";
  let description = [{
    Pairs two epilogue values. The result, yielded by `coda.gemm`, writes
    `even` to column 2n and `odd` to column 2n + 1 of an M x 2N output at
    element (m, n). The backward of an interleaved SwiGLU uses it: a GEMM
    with one column per SwiGLU feature writes the gate and up gradients in the
    interleaved layout of the gate/up weight's rows.

    ```mlir
    %both = coda.interleave %dgate, %dup : bf16
    ```
  }];
  let arguments = (ins AnyTypeOf<[AnyFloat, AnySignlessInteger]>:$even,
                       AnyTypeOf<[AnyFloat, AnySignlessInteger]>:$odd);
  let results = (outs Coda_InterleavedType:$result);
  let assemblyFormat = "$even `,` $odd attr-dict `:` type($even)";
}

def Coda_TransposeOp : Coda_Op<"transpose", [Pure, HasParent<"GemmOp">,
    TypesMatchWith<"result is a transposed value of the value's type",
                   "value", "result", "::mlir::coda::TransposedType::get($_self)">]> {
  let summary = "a value written at (n, m) of an N x M output";
  let description = [{
    Binds `value` for a transposed output: yielded by `coda.gemm`, its value
    at element (m, n) is written to element (n, m) of an [B x] N x M output.
    FP8 training's token-major copy of a tensor (the operand a weight
    gradient reads with K = tokens contiguous), quantized over 128 x 1
    groups, comes out of the GEMM that produces the tensor:

    ```mlir
    %amax_t = coda.group_reduce max %abs col group 128 : f32 -> f32
    ...
    %code_t = arith.truncf %q_t : f32 to f8E4M3FN
    %copy = coda.transpose %code_t : f8E4M3FN
    %scales_t = coda.group_value %scale_t col group 128 : f32
    coda.yield %copy, %scales_t : !coda.transposed<f8E4M3FN>, !coda.grouped<f32>
    ```
  }];
  let arguments = (ins AnyTypeOf<[AnyFloat, AnySignlessInteger]>:$value);
  let results = (outs Coda_TransposedType:$result);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

//===----------------------------------------------------------------------===//
// Pairwise transforms
//===----------------------------------------------------------------------===//

def Coda_PairMapOp : Coda_Op<"pair_map", [
    Pure, HasParent<"GemmOp">, IsolatedFromAbove, SingleBlock
  ]> {
  let summary = "2 -> 2 transform of column pairs";
  let description = [{
    Transforms the values of two columns together. With `stride` s (default
    1) the columns are grouped in blocks of 2s and column j of a block pairs
    with column j + s: s = 1 pairs adjacent columns (2j, 2j + 1), s = d/2
    pairs the two halves of each d-wide head (RoPE's rotate_half). For every
    operand the region receives two arguments, the operand's value at the
    first and at the second column of the pair; it yields two values per
    result, the new values at the first and the second column. Each result is
    an ordinary epilogue value. N must be a multiple of 2s; every pairwise op
    of an epilogue uses the same stride.

    A rotation by an angle (RoPE, interleaved convention):

    ```mlir
    %y = coda.pair_map (%x0, %x1) = %x, (%c, %c_) = %cos, (%s, %s_) = %sin
        : f32, f32, f32 -> f32 {
      %a = arith.mulf %x0, %c : f32
      %b = arith.mulf %x1, %s : f32
      %y0 = arith.subf %a, %b : f32
      %d = arith.mulf %x1, %c : f32
      %e = arith.mulf %x0, %s : f32
      %y1 = arith.addf %d, %e : f32
      coda.yield %y0, %y1 : f32, f32
    }
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$pair_operands,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntPositive]>,
                                         "1">:$stride);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let hasCanonicalizer = 1;
}

def Coda_PairContractOp : Coda_Op<"pair_contract", [
    Pure, HasParent<"GemmOp">, IsolatedFromAbove, SingleBlock
  ]> {
  let summary = "2 -> 1 contraction of column pairs";
  let description = [{
    Contracts the two columns of each pair (see `coda.pair_map` for `stride`;
    by default columns 2j and 2j + 1) into one value. For every operand the
    region receives its values at the first and the second column; it yields
    one value per result. A result has type `!coda.pair<T>` and is yielded by
    `coda.gemm` into an output with N/2 columns: pair j of block b goes to
    column b * stride + j.

    SwiGLU over interleaved gate/up columns:

    ```mlir
    %h = coda.pair_contract (%g, %u) = %acc : f32 -> !coda.pair<bf16> {
      %neg = arith.negf %g : f32
      %e = math.exp %neg : f32
      %one = arith.constant 1.0 : f32
      %den = arith.addf %one, %e : f32
      %silu = arith.divf %g, %den : f32
      %y = arith.mulf %silu, %u : f32
      %yb = arith.truncf %y : f32 to bf16
      coda.yield %yb : bf16
    }
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$pair_operands,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntPositive]>,
                                         "1">:$stride);
  let results = (outs Variadic<Coda_PairType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Finishing step
//===----------------------------------------------------------------------===//

def Coda_ReducePartialsOp : Coda_Op<"reduce_partials", [
    DeclareOpInterfaceMethods<InferTypeOpInterface>,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DestinationStyleOpInterface
  ]> {
  let summary = "combines the per-tile partials of a block reduction";
  let description = [{
    The finishing step of `coda.row_reduce` / `coda.col_reduce`. For `row`,
    `partials` is [B x] M x T and the result [B x] M; for `col`, `partials` is
    [B x] T x N and the result [B x] N. `kind` must match the reduction that
    produced the partials. The initial content of `init` is ignored.

    ```mlir
    %ss = coda.reduce_partials sum row %p : tensor<64x2xf32>
        outs(%init : tensor<64xf32>)
    ```
  }];
  let arguments = (ins Coda_TensorOrMemRef:$partials,
                       Coda_TensorOrMemRef:$init,
                       Coda_ReductionKindAttr:$kind,
                       Coda_ReductionAxisAttr:$axis);
  let results = (outs Optional<AnyRankedTensor>:$result);
  let assemblyFormat = [{
    `` $kind `` $axis $partials `:` type($partials)
    `outs` `(` $init `:` type($init) `)` attr-dict
  }];
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "::mlir::Value":$partials, "::mlir::Value":$init,
                   "::mlir::coda::ReductionKind":$kind,
                   "::mlir::coda::ReductionAxis":$axis)>
  ];
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getInitMutable();
    }
  }];
}

#endif // CODA_DIALECT_CODA_IR_CODAOPS_TD
