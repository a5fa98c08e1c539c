//===- EpilogueUtils.h - shared helpers of the fusion passes ----*- C++ -*-===//

#ifndef CODA_LIB_DIALECT_CODA_TRANSFORMS_EPILOGUEUTILS_H
#define CODA_LIB_DIALECT_CODA_TRANSFORMS_EPILOGUEUTILS_H

#include "coda/Dialect/Coda/IR/Coda.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::coda {

/// An operand to add to an epilogue and how it is read.
struct EpilogueInput {
  Value value;
  AccessForm form;
};

/// Given the mapping from the old epilogue's values to the new one's and the
/// block arguments of the added inputs, returns the values to yield.
using EpilogueExtender = function_ref<SmallVector<Value>(
    OpBuilder &builder, IRMapping &mapping, ValueRange addedInputArgs)>;

/// Returns the value the copied epilogue sees as its accumulator, given the
/// new accumulator argument and the added inputs' arguments.
using AccumulatorTransform = function_ref<Value(
    OpBuilder &builder, Value accumulator, ValueRange addedInputArgs)>;

/// Fills a new epilogue block (arguments: the f32 accumulator, then one per
/// input) and returns the values to yield, one per output.
using EpilogueBody =
    function_ref<SmallVector<Value>(OpBuilder &builder, Block &body)>;

/// Builds a coda.gemm computing `op(lhs) x op(rhs)` with epilogue `inputs`
/// and destinations `outputs` (its results: the tensor ones), its epilogue
/// built by `body`.
GemmOp createGemm(RewriterBase &rewriter, Location loc, Value lhs, Value rhs,
                  bool transposeA, bool transposeB,
                  ArrayRef<EpilogueInput> inputs, ValueRange outputs,
                  EpilogueBody body);

/// Builds a coda.gemm computing `lhs x rhs` whose epilogue starts with a copy
/// of `gemm`'s (its inputs first, then `addedInputs`) and yields what `extend`
/// returns, one value per entry of `outputs`. The old terminator is not
/// copied; its operands are reachable through the mapping. With
/// `transformAccumulator`, the copy reads its result instead of the
/// accumulator. `lhs` is laid out as `gemm`'s (its `transpose_a` is kept).
GemmOp rebuildGemm(RewriterBase &rewriter, GemmOp gemm, Value lhs, Value rhs,
                   bool transposeB, ArrayRef<EpilogueInput> addedInputs,
                   ValueRange outputs, EpilogueExtender extend,
                   AccumulatorTransform transformAccumulator = nullptr);

/// A tile output of a coda.gemm: the result and the epilogue value it stores.
struct TileOutput {
  GemmOp gemm;
  OpResult result;
  Value yielded;
};

/// `value` as a tile output of a GEMM (not partials, pairs or rows).
std::optional<TileOutput> getTileOutput(Value value);

/// Builds the region of a pair op whose block (two arguments per operand) is
/// given, returning the values it yields.
using PairRegionBuilder =
    function_ref<SmallVector<Value>(OpBuilder &builder, Block &pair)>;

/// Rebuilds `output.gemm` so that, instead of `output`, it writes
/// `destination` with the result of a `coda.pair_map` (one result of
/// `resultType`, `stride`) over the output's value and the arguments of
/// `addedInputs`. The GEMM's other results are rewired; returns the new one.
Value replaceTileOutputWithPairMap(RewriterBase &rewriter,
                                   const TileOutput &output,
                                   ArrayRef<EpilogueInput> addedInputs,
                                   Value destination, Type resultType,
                                   int64_t stride, PairRegionBuilder build);

/// The loop dimensions a linalg operand of type `type` read through `map`
/// depends on, in order, skipping size-1 dimensions read at 0 (keepdim
/// broadcasts); nothing if another expression reads it.
std::optional<SmallVector<unsigned>> getReadDims(AffineMap map,
                                                 ShapedType type);

/// How a linalg operand with `map` is read at each point of an iteration
/// space of `numLoops` parallel loops ([b,] m, n), if an epilogue can read it.
/// Results equal to 0 on a size-1 dimension (keepdim broadcasts) are allowed.
std::optional<AccessForm> classifyAccess(AffineMap map, ShapedType type,
                                         unsigned numLoops);

/// Reshapes `value` (read with `map`) into the operand shape `form` expects:
/// drops size-1 dimensions that `map` reads at 0, extracts 0-d scalars.
Value materializeEpilogueInput(OpBuilder &builder, Location loc, Value value,
                               AffineMap map, AccessForm form);

/// A tensor.empty of shape [M of `gemm`, trailing...] (read from its lhs,
/// whichever dimension holds M, when dynamic).
Value createEmptyWithRows(OpBuilder &builder, Location loc, GemmOp gemm,
                          ArrayRef<int64_t> trailing, Type elementType);

/// A tensor.empty of shape [rows of `rowSource`, trailing...] (the row count
/// read with tensor.dim when it is dynamic).
Value createEmptyWithRows(OpBuilder &builder, Location loc, Value rowSource,
                          ArrayRef<int64_t> trailing, Type elementType);

/// The arguments of `block` that `value` is computed from; nothing when it
/// also depends on linalg.index or on arguments of another block.
std::optional<llvm::SmallSetVector<BlockArgument, 4>>
readBlockArguments(Value value, Block &block);

/// True for the ops an epilogue may hold (arith and math on scalars).
bool isEpilogueComputeOp(Operation *op);

/// True when every op of `block` but its terminator is an epilogue compute op
/// (or, with `allowIndex`, linalg.index) and every value it uses from outside
/// the block is a block argument or a constant (or, with
/// `allowCapturedScalars`, one of capturedScalars(block)).
bool hasOnlyEpilogueComputeOps(Block &block, bool allowIndex,
                               bool allowCapturedScalars = false);

/// Why the elementwise op `op` did not join a GEMM's epilogue as
/// --coda-fuse-pointwise would join it, in words for the fusion report; or
/// nothing if it could.
std::optional<std::string> whyNotFusedPointwise(linalg::GenericOp op);

/// Why the row or column reduction `op` did not become partials in a GEMM's
/// epilogue as --coda-fuse-reductions would make them, in words for the
/// fusion report; or nothing if it could (or `op` is no such reduction).
std::optional<std::string> whyNotFusedReduction(linalg::GenericOp op);

/// Why `op`, which reads a GEMM result viewed as [M, N / w, w] or its
/// statistics of groups of w columns, did not join the GEMM's epilogue as
/// --coda-fuse-groups would join it, in words for the fusion report; or
/// nothing if it could.
std::optional<std::string> whyNotFusedGroup(linalg::GenericOp op);

/// Whether `op` is what --coda-fuse-groups fuses: a reduction (of 3 or more
/// loops) over a GEMM result viewed through a tensor.expand_shape, or an op
/// reading a GEMM's statistics of groups.
bool readsGroupStatistics(linalg::GenericOp op);

/// Why the per-row gather `op` did not become a row_select of a GEMM's
/// epilogue as --coda-fuse-gathers would make it, in words for the fusion
/// report; or nothing if it could.
std::optional<std::string> whyNotFusedGather(linalg::GenericOp op);

/// The floating-point values that `block`'s ops use from outside it and that
/// are not constants (a runtime scalar a frontend captures in an elementwise
/// body, such as `aten.mul.Scalar`'s), each once, in order of first use.
SmallVector<Value> capturedScalars(Block &block);

/// Clones the constants that `block` uses from outside it at `builder`'s
/// insertion point and maps them in `mapping`, so that the block's ops can be
/// cloned into an isolated region.
void cloneCapturedConstants(OpBuilder &builder, Block &block,
                            IRMapping &mapping);

/// The float constant a linalg.fill writes, if `value` is one, or a reshape
/// of one (the reduction of a batch folded into the GEMM's rows starts from
/// the collapsed fill).
std::optional<APFloat> getFillConstant(Value value);

/// True when `generic` is elementwise: only parallel loops, and its inits are
/// destinations only (the body never reads them).
bool isElementwise(linalg::GenericOp generic);

/// True when `value` is available before `op` (a block argument of an
/// enclosing block or defined by an op that properly dominates `op` in the
/// same block).
bool isAvailableBefore(Value value, Operation *op);

} // namespace mlir::coda

#endif // CODA_LIB_DIALECT_CODA_TRANSFORMS_EPILOGUEUTILS_H
