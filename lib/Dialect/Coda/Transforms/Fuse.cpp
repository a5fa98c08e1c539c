//===- Fuse.cpp - the whole fusion flow and its report --------------------===//

#include "EpilogueUtils.h"

#include "coda/Dialect/Coda/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/Format.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODAFUSE
#include "coda/Dialect/Coda/Transforms/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// Named linalg ops (elementwise, reductions, broadcasts, matmuls) become
/// linalg.generic so that one set of patterns sees them all. Fills stay: they
/// mark accumulator initializations.
struct GeneralizeNamedOps : OpInterfaceRewritePattern<linalg::LinalgOp> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(linalg::LinalgOp op,
                                PatternRewriter &rewriter) const override {
    if (isa<linalg::GenericOp, linalg::FillOp>(op.getOperation()))
      return rewriter.notifyMatchFailure(op, "generic or fill");
    if (failed(linalg::generalizeNamedOp(rewriter, op)))
      return failure();
    return success();
  }
};

/// True for a generic that only moves or converts its single input
/// (transpose, broadcast, copy, extf/truncf).
bool isDataMovement(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || generic.getNumDpsInputs() != 1 ||
      generic.getNumReductionLoops() != 0)
    return false;
  Value yielded = generic.getBlock()->getTerminator()->getOperand(0);
  while (Operation *def = yielded.getDefiningOp()) {
    if (!isa<arith::ExtFOp, arith::TruncFOp>(def))
      return false;
    yielded = def->getOperand(0);
  }
  return yielded == generic.getBlock()->getArgument(0);
}

/// True for an elementwise generic reading one operand elementwise and any
/// others broadcast (row or column vectors, scalars).
bool isRecomputable(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || generic.getNumReductionLoops() != 0 ||
      generic.getNumDpsInits() != 1 ||
      !hasOnlyEpilogueComputeOps(*generic.getBlock(), /*allowIndex=*/true,
                                 /*allowCapturedScalars=*/true))
    return false;
  unsigned full = 0;
  for (OpOperand *input : generic.getDpsInputOperands()) {
    AffineMap map = generic.getMatchingIndexingMap(input);
    if (map.isIdentity())
      ++full;
    else if (map.isPermutation())
      return false; // a second full-size (transposed) read

  }
  return full == 1;
}

/// Whether `op` gathers: reads a tensor at computed indices (`tensor.extract`
/// in its body), as a cross-entropy's pick of the target's log-probability.
bool gathers(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  return generic && !generic.getBody()->getOps<tensor::ExtractOp>().empty();
}

/// Merges chains of elementwise ops (and elementwise producers of
/// single-input reductions) whose intermediate has no other use, and casts
/// and transposes into all their consumers. Matrix
/// products absorb only transposes and casts of their operands: a scaled lhs
/// is what coda-defer-row-scale looks for. A per-row gather stays out of the
/// reduction after it (the mean or sum of a cross-entropy over the tokens):
/// on its own it is what coda-fuse-gathers turns into the GEMM's row_select,
/// so that the logits are never written.
bool shouldFuseElementwise(OpOperand *operand) {
  Operation *producer = operand->get().getDefiningOp();
  auto consumer = dyn_cast<linalg::GenericOp>(operand->getOwner());
  if (!producer || !consumer)
    return false;
  if (consumer.getNumReductionLoops() != 0 && gathers(producer))
    return false;
  if (consumer.getNumReductionLoops() != 0 && consumer.getNumDpsInputs() != 1)
    return isDataMovement(producer);
  // A cast, a transpose, or elementwise math on one full-size operand and
  // broadcast vectors is cheaper to redo in every consumer than to write:
  // each consumer then reads that operand instead of the result.
  if (!producer->hasOneUse())
    return isDataMovement(producer) || isRecomputable(producer);
  return true;
}

LogicalResult normalizeLinalg(Operation *root) {
  MLIRContext *ctx = root->getContext();
  RewritePatternSet generalize(ctx);
  generalize.add<GeneralizeNamedOps>(ctx);
  if (failed(applyPatternsGreedily(root, std::move(generalize))))
    return failure();
  RewritePatternSet fuse(ctx);
  linalg::populateElementwiseOpsFusionPatterns(fuse, shouldFuseElementwise);
  return applyPatternsGreedily(root, std::move(fuse));
}

//===----------------------------------------------------------------------===//
// The report
//===----------------------------------------------------------------------===//

/// Bytes of a shaped value, or nothing when its shape is dynamic.
std::optional<int64_t> bytesOf(Value value) {
  auto type = dyn_cast<ShapedType>(value.getType());
  if (!type)
    return 0;
  if (!type.hasStaticShape())
    return std::nullopt;
  return type.getNumElements() *
         llvm::divideCeil(type.getElementTypeBitWidth(), 8);
}

/// Kernels and memory traffic of a function, counted on its top-level ops.
struct TrafficSummary {
  unsigned gemms = 0;
  unsigned memoryBound = 0;
  SmallVector<Operation *> memoryBoundOps; // the kernels, in program order
  SmallVector<Operation *> linalgProducts; // matrix products not coda.gemm
  unsigned weightSide = 0;
  int64_t memoryBoundBytes = 0; // read + written by memory-bound kernels
  int64_t epilogueBytes = 0;    // read + written by epilogues beyond A, B, C
  unsigned uncounted = 0;       // tensors of dynamic shape, not in the bytes

  void add(int64_t &bytes, Value value) {
    if (std::optional<int64_t> size = bytesOf(value))
      bytes += *size;
    else
      ++uncounted;
  }
};

/// Bytes a memory-bound kernel reads and writes: its operands (but fresh
/// destinations) and its results; `uncounted` gets the dynamic-shape ones.
int64_t kernelBytes(Operation *op, unsigned &uncounted) {
  int64_t bytes = 0;
  auto count = [&](Value value) {
    if (std::optional<int64_t> size = bytesOf(value))
      bytes += *size;
    else
      ++uncounted;
  };
  for (Value operand : op->getOperands())
    if (!isa_and_nonnull<linalg::FillOp, tensor::EmptyOp>(
            operand.getDefiningOp()))
      count(operand);
  for (Value result : op->getResults())
    count(result);
  return bytes;
}

bool isContraction(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  return linalgOp && linalg::isaContractionOpInterface(linalgOp);
}

TrafficSummary summarize(func::FuncOp func) {
  TrafficSummary summary;
  for (Operation &op : func.getBody().getOps()) {
    if (op.hasAttr("coda.weight_transform")) {
      ++summary.weightSide;
      continue;
    }
    if (auto gemm = dyn_cast<GemmOp>(op)) {
      ++summary.gemms;
      for (Value input : gemm.getEpilogueInputs())
        summary.add(summary.epilogueBytes, input);
      for (Value output : gemm.getOutputs().drop_front())
        summary.add(summary.epilogueBytes, output);
      continue;
    }
    if (isContraction(&op)) {
      ++summary.gemms;
      summary.linalgProducts.push_back(&op);
      continue;
    }
    // Fills initialize accumulators; reshapes and empties move nothing.
    bool counted = isa<ReducePartialsOp, tensor::InsertSliceOp,
                       tensor::ExtractSliceOp, tensor::ConcatOp>(op) ||
                   (isa<linalg::LinalgOp>(op) && !isa<linalg::FillOp>(op));
    if (!counted)
      continue;
    ++summary.memoryBound;
    summary.memoryBoundOps.push_back(&op);
    summary.memoryBoundBytes += kernelBytes(&op, summary.uncounted);
  }
  return summary;
}

std::string formatBytes(int64_t bytes) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (bytes >= (1 << 20))
    os << llvm::format("%.2f MiB", bytes / double(1 << 20));
  else if (bytes >= (1 << 10))
    os << llvm::format("%.2f KiB", bytes / double(1 << 10));
  else
    os << bytes << " B";
  return text;
}

/// Why a matrix product stayed in linalg, as far as its form tells.
std::string unconvertedReason(Operation *op) {
  auto linalgOp = cast<linalg::LinalgOp>(op);
  if (linalgOp.getNumReductionLoops() != 1)
    return "it contracts over " +
           std::to_string(linalgOp.getNumReductionLoops()) + " dimensions";
  unsigned parallel = linalgOp.getNumParallelLoops();
  if (parallel > 3)
    return "it has " + std::to_string(parallel - 2) +
           " batch dimensions; coda.gemm takes one (collapse them into one "
           "before the product)";
  return "a form --coda-convert-matmuls does not recognize";
}

/// Why the reshape `expand`, read by `reader` at `read`, could not be moved
/// after it: the reshape moves past an elementwise op whose every operand
/// and result keeps each group of the reshaped dimensions together and in
/// order (or does not read it at all).
std::string whyReshapeStays(linalg::GenericOp reader, OpOperand &read,
                            tensor::ExpandShapeOp expand) {
  AffineMap readMap = reader.getMatchingIndexingMap(&read);
  for (const ReassociationIndices &group : expand.getReassociationIndices()) {
    if (group.size() < 2)
      continue;
    SmallVector<AffineExpr> dims;
    for (int64_t i : group)
      dims.push_back(readMap.getResult(i));
    for (OpOperand &other : reader->getOpOperands()) {
      AffineMap map = reader.getMatchingIndexingMap(&other);
      SmallVector<int64_t> at;
      for (AffineExpr dim : dims) {
        const AffineExpr *it = llvm::find(map.getResults(), dim);
        at.push_back(it == map.getResults().end()
                         ? -1
                         : it - map.getResults().begin());
      }
      bool absent = llvm::all_equal(at) && at.front() == -1;
      bool together = !llvm::is_contained(at, -1) &&
                      llvm::all_of(llvm::seq<size_t>(1, at.size()),
                                   [&](size_t i) { return at[i] == at[i - 1] + 1; });
      if (absent || together)
        continue;
      std::string text;
      llvm::raw_string_ostream os(text);
      bool result = reader.isDpsInit(&other);
      os << "it reads it through a tensor.expand_shape that cannot move after "
            "it: its "
         << (result ? "result #" : "operand #")
         << (result ? other.getOperandNumber() - reader.getNumDpsInputs()
                    : other.getOperandNumber())
         << (result ? " is written through " : " is read through ") << map
         << ", which does not keep the reshaped dimensions (";
      llvm::interleaveComma(dims, os);
      os << ") together and in order";
      return text;
    }
  }
  return "it reads it through a tensor.expand_shape that cannot move after it";
}

/// For an op left outside every epilogue that reads a coda.gemm's tile
/// output (or its reshape): why it did not join that epilogue, in the words
/// the elementwise or reduction fusion pattern fails with.
std::optional<std::string> whyNotInEpilogue(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic)
    return std::nullopt;
  // A per-row gather from a GEMM's result, or from an elementwise function
  // of it (a cross-entropy's pick of the target's log-probability).
  for (auto extract : generic.getBody()->getOps<tensor::ExtractOp>()) {
    Value source = extract.getTensor();
    auto function = source.getDefiningOp<linalg::GenericOp>();
    if (generic.getNumLoops() == 1 &&
        (getTileOutput(source) ||
         (function && llvm::any_of(function.getDpsInputs(), [](Value input) {
            return getTileOutput(input).has_value();
          }))))
      return whyNotFusedGather(generic);
  }
  bool readsTile = llvm::any_of(generic.getDpsInputs(), [](Value input) {
    return getTileOutput(input).has_value();
  });

  if (readsGroupStatistics(generic))
    return whyNotFusedGroup(generic);
  if (!isElementwise(generic))
    return readsTile ? whyNotFusedReduction(generic) : std::nullopt;
  if (readsTile)
    return whyNotFusedPointwise(generic);
  // A GEMM result reshaped (heads split, a folded batch unfolded) reaches
  // its readers once --coda-convert-matmuls moves the reshape after them.
  for (OpOperand *input : generic.getDpsInputOperands()) {
    auto expand = input->get().getDefiningOp<tensor::ExpandShapeOp>();
    if (expand && getTileOutput(expand.getSrc()))
      return whyReshapeStays(generic, *input, expand);
  }
  return std::nullopt;
}

void printReport(raw_ostream &os, StringRef name, const TrafficSummary &before,
                 const TrafficSummary &after) {
  os << "coda fusion report: @" << name << "\n";
  os << "  before: " << before.gemms << " GEMM kernels, "
     << before.memoryBound << " memory-bound kernels moving "
     << formatBytes(before.memoryBoundBytes) << "\n";
  os << "  after:  " << after.gemms << " GEMM kernels";
  if (!after.linalgProducts.empty())
    os << " (" << after.linalgProducts.size() << " left in linalg)";
  os << ", " << after.memoryBound
     << " memory-bound kernels moving " << formatBytes(after.memoryBoundBytes)
     << ", epilogues moving " << formatBytes(after.epilogueBytes)
     << " beyond A, B and C, " << after.weightSide
     << " weight-side ops (hoistable)\n";
  // What is left to move memory on its own, so that a user sees what did not
  // fuse and where it came from.
  for (Operation *op : after.memoryBoundOps) {
    unsigned dynamic = 0;
    int64_t bytes = kernelBytes(op, dynamic);
    os << "    left: " << op->getName() << " at " << op->getLoc() << " ("
       << (dynamic ? "dynamic shape" : formatBytes(bytes)) << ")";
    if (std::optional<std::string> why = whyNotInEpilogue(op))
      os << ": reads a coda.gemm's result but stays outside its epilogue: "
         << *why;
    os << "\n";
  }
  // A matrix product left in linalg runs as a loop kernel, not a GEMM
  // (coda-compile refuses it): say which and why.
  for (Operation *op : after.linalgProducts)
    os << "    left: " << op->getName() << " at " << op->getLoc()
       << " (a matrix product not made a coda.gemm: "
       << unconvertedReason(op) << ")\n";
  int64_t beforeBytes = before.memoryBoundBytes + before.epilogueBytes;
  int64_t afterBytes = after.memoryBoundBytes + after.epilogueBytes;
  os << "  memory-bound traffic: " << formatBytes(beforeBytes) << " -> "
     << formatBytes(afterBytes);
  if (before.uncounted || after.uncounted)
    os << " (not counting " << before.uncounted << " -> " << after.uncounted
       << " tensors of dynamic shape)";
  else if (beforeBytes > 0)
    os << llvm::format(" (%.1f%% saved)",
                       100.0 * (beforeBytes - afterBytes) / beforeBytes);
  os << "\n";
}

struct CodaFusePass : coda::impl::CodaFuseBase<CodaFusePass> {
  using CodaFuseBase::CodaFuseBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tile <= 0) {
      module.emitError("coda-fuse: tile must be positive, got ")
          << static_cast<int64_t>(tile);
      return signalPassFailure();
    }
    bool reporting = report || !reportFile.empty();
    llvm::StringMap<TrafficSummary> before;
    if (reporting)
      for (auto func : module.getOps<func::FuncOp>())
        if (!func.isExternal())
          before[func.getName()] = summarize(func);

    if (failed(normalizeLinalg(module)))
      return signalPassFailure();
    OpPassManager pm(ModuleOp::getOperationName());
    pm.addPass(createCodaSimplifyMath());
    pm.addPass(createCodaConvertMatmuls());
    // Reshapes moved past each consumer leave one copy per consumer: the
    // patterns below compare values, not the ops that made them.
    pm.addPass(createCSEPass());
    pm.addPass(createCodaFuseSwiGLU());
    pm.addPass(createCodaDeferRowScale());
    pm.addPass(createCodaFusePointwise());
    // After pointwise fusion: q is then the GEMM's own (rounded) output.
    // Statistics over a head or a 1 x 128 group before the rotation reads
    // the normalized output.
    pm.addPass(createCodaFuseGroups({tile}));
    pm.addPass(createCodaFuseRoPE());
    pm.addPass(createCodaFuseReductions({tile}));
    pm.addPass(createCodaFuseGathers());
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    if (failed(runPipeline(pm, module)))
      return signalPassFailure();
    RewritePatternSet cleanup(&getContext());
    populateFoldTransposesIntoProducersPatterns(cleanup);
    if (failed(applyPatternsGreedily(module, std::move(cleanup))))
      return signalPassFailure();

    if (!reporting)
      return;
    std::unique_ptr<llvm::ToolOutputFile> file;
    if (!reportFile.empty()) {
      std::string error;
      file = openOutputFile(reportFile, &error);
      if (!file) {
        module.emitError() << "coda-fuse: cannot write the report: " << error;
        return signalPassFailure();
      }
      file->keep();
    }
    llvm::raw_ostream &os = file ? file->os() : llvm::errs();
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        printReport(os, func.getName(), before[func.getName()],
                    summarize(func));
  }
};

} // namespace
