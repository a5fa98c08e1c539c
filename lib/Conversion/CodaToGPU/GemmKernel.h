//===- GemmKernel.h - shared pieces of the coda.gemm GPU lowering -*- C++ -*-===//
//
// The kernel of one coda.gemm is built in two parts: a target-specific
// mainloop that leaves the f32 accumulators in registers or in a shared-memory
// tile (GemmTarget; Hopper's TMA + WGMMA one lives in HopperMainloop.cpp),
// and the epilogue that evaluates the epilogue region over that tile
// (Epilogue.cpp, placed by EpiloguePlan.h), which speaks Hopper's fragment
// layout, stmatrix, ldmatrix and bulk copies too.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_LIB_CONVERSION_CODATOGPU_GEMMKERNEL_H
#define CODA_LIB_CONVERSION_CODATOGPU_GEMMKERNEL_H

#include "coda/Conversion/CodaToGPU/CodaToGPU.h"
#include "coda/Dialect/Coda/IR/Coda.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/Support/JSON.h"

#include <functional>
#include <memory>
#include <optional>

namespace mlir::coda::gpu_lowering {

/// Columns of a row that one thread covers in the epilogue (16 bytes of bf16,
/// so that tile outputs and inputs move as one vector when aligned).
constexpr int64_t kEpilogueColumnsPerThread = 8;
/// The height of a group along columns on the GPU: a whole column of the
/// tile (the 128 x 1 groups of FP8 training's token-major copies).
constexpr int64_t kColumnGroupRows = 128;
/// Rows of a fragment a warp holds (16 w + l / 4, + 8): the rows a register
/// epilogue's warp stages transposed at once.
constexpr int64_t kTransposedStagingRows = 16;

/// How a kernel's warps share the work of its tiles (the dialect's enum).
using Schedule = GemmSchedule;

/// What a schedule's kernel is made of, one row per schedule
/// (scheduleTraits, GemmConfig.cpp); the configuration and the mainloops
/// read these instead of comparing schedules.
struct ScheduleTraits {
  /// A producer warpgroup issues the TMA loads for consumer warpgroups.
  bool warpSpecialized;
  /// CTAs loop over tiles (one per SM).
  bool persistent;
  /// The epilogue reads the accumulators from the consumers' registers, not
  /// from a shared-memory tile.
  bool registerEpilogue;
  /// Consumer warpgroups that compute each tile (each 64 rows of it when
  /// more than one).
  int64_t consumersPerTile;
  /// Epilogues that run at once, each with its own scratch (ping-pong: one
  /// per consumer warpgroup).
  int64_t concurrentEpilogues;
  /// mbarriers beside the ring's full and empty ones: the staged
  /// epilogue's handoff, ping-pong's turns.
  int64_t extraBarriers;
};
const ScheduleTraits &scheduleTraits(Schedule schedule);

/// Tile shape and pipeline depth of one GEMM kernel, and the shared-memory
/// plan that follows from them.
struct GemmKernelConfig {
  int64_t tileM = 128, tileN = 128, tileK = 64, stages = 4;
  Schedule schedule = Schedule::single;
  /// Rows of the shared accumulator tile per iteration of the epilogue's
  /// row loop (the shared-tile schedules).
  int64_t epilogueUnroll = kDefaultEpilogueUnroll;
  /// Threads of a CTA, and those that run the epilogue (the consumer
  /// warpgroups when warp-specialized).
  int64_t numThreads = 128;
  int64_t epilogueThreads = 128;
  /// Register budgets of the producer and consumer warpgroups (setmaxnreg);
  /// 0 keeps the launch's even split.
  int64_t producerRegisters = 0, consumerRegisters = 0;
  /// The order in which persistent CTAs take the tiles (assignTile): bands
  /// of rasterGroup tile rows walked along N, or of rasterGroup tile columns
  /// walked down M, so that the tiles in flight share their operand tiles in
  /// L2 (grouped rasterization).
  RasterOrder raster = RasterOrder::alongN;
  int64_t rasterGroup = 8;
  /// CTAs per thread-block cluster, along M (1: no cluster). The CTAs of a
  /// cluster compute vertically adjacent tiles of the same columns, so that
  /// each loads 1 / clusterM of the rhs tile and multicasts it to all.
  int64_t clusterM = 1;
  Type operandType;
  int64_t operandBytes = 2;
  /// rhs is N x K (`transpose_b`): K-major in shared memory.
  bool rhsKMajor = true;
  /// lhs is M x K (no `transpose_a`): K-major in shared memory.
  bool lhsKMajor = true;
  /// A batched GEMM: lhs, every output and every input but column and
  /// scalar ones have a leading batch dimension B, and so does rhs where
  /// `rhsBatched` (else every batch shares it). The kernel takes B after K,
  /// numbers the tiles of all batches (batch-major) and loads the batched
  /// operands through 3-D TMA descriptors (box depth 1 along the batch).
  bool batched = false, rhsBatched = false;
  /// Number of col_reduce outputs (each needs a cross-warp scratch row).
  int64_t numColPartials = 0;
  /// Statistics of column groups, which the epilogue finishes before its
  /// rows, one at a time through one scratch like a column partial's, each
  /// into an f32 row of the tile that every row then reads.
  int64_t numColumnStatistics = 0;
  /// Values derived from them that the epilogue reads, each finished into
  /// a row too (ColumnUniform::derived).
  int64_t numColumnDerived = 0;
  /// Bytes per warp of the register epilogue's transposed outputs'
  /// staging: each output's [tileN x 16] elements (the warp's 16 rows of a
  /// fragment, transposed), copied out in 16-byte rows of the N x M output.
  int64_t transposedStagingBytes = 0;
  /// One transposed output's part of it.
  int64_t transposedStagingBytesOf(Value output) const {
    return tileN * kTransposedStagingRows *
           cast<MemRefType>(output.getType()).getElementTypeBitWidth() / 8;
  }
  /// Columns per row partial (row_reduce's tile): tile N or a divisor of it,
  /// so that a CTA writes tileN / rowPartialTile partials per row.
  int64_t rowPartialTile = 0;
  /// The register epilogue moves its 16-bit tile inputs and its 16-bit tile
  /// and pair outputs through a per-warp staging buffer (stagingRows rows of
  /// the tile, swizzled): each row enters and leaves in 16-byte accesses
  /// instead of the fragments' scattered 2- and 4-byte ones (see stagesInput
  /// and stagesOutput).
  bool stagedTiles = false;
  /// Bytes per warp for the register epilogue's column and periodic input
  /// rows (inputRowStagingBytes; 0: read from global memory per run). A
  /// global load per run leaves the epilogue a chain of L2 latencies: the
  /// accumulators leave no registers to keep many loads in flight, so the
  /// warp loads the rows it needs with 16-byte accesses first, all in
  /// flight at once, and the runs read shared memory.
  int64_t stagedInputRowBytes = 0;
  /// The interior epilogue writes its staged tile outputs with TMA stores
  /// (see storesWithTma): the warp puts its 8 rows into its staging buffer
  /// as 8-row boxes in TMA's 128-byte swizzle (stmatrix, or 2-byte shared
  /// stores of 8-bit pairs), and one
  /// lane stores them (cp.async.bulk.tensor), so that the tile's stores
  /// leave the threads at once and drain under what follows. Each warp's
  /// buffer then starts at a multiple of 128 bytes.
  bool tmaStores = false;
  /// Staged tile inputs that the register epilogue does not prefetch into
  /// registers (pipelinedStagedInputs) and that enter instead through slots
  /// of their own, each warp's rows copied with cp.async kPipelineSlots
  /// fragment rows ahead of the row that reads them, so that the copies'
  /// latency passes under the rows before. 0 where the slots do not fit.
  int64_t pipelinedInputs = 0;
  /// The epilogue reads no product (an adjoint from saved values): the
  /// kernel is the register schedule's epilogue alone, one tile per CTA and
  /// every thread an epilogue thread, with no ring, producer or barrier: its
  /// shared memory is the epilogue's buffers alone, and a CTA whose
  /// registers allow it shares its SM with another.
  bool epilogueOnly = false;
  static constexpr int64_t kPipelineSlots = 2;
  static constexpr int64_t stagingRows = 8;
  /// Bytes of a row of a TMA-stored output's box: the span of TMA's
  /// 128-byte swizzle.
  static constexpr int64_t storeBoxBytes = 128;
  /// Columns of a TMA-stored output's box of `element`s (64 of 16 bits,
  /// 128 of 8).
  static int64_t storeBoxColumns(Type element) {
    return storeBoxBytes * 8 / element.getIntOrFloatBitWidth();
  }
  /// Bytes of one such box: its stagingRows rows.
  static constexpr int64_t storeBoxSize = stagingRows * storeBoxBytes;
  /// Elements a staging row holds: `rowElements` and one 16-byte chunk of
  /// padding (`chunk` elements: 8 of 16 bits, 16 of 8), so that the 8 rows
  /// of a warp start 4 banks apart (a quad's writes to the 8 rows hit 32
  /// different banks), every row starts 16-byte aligned, and every lane's
  /// address is one per-lane base plus constants (an XOR swizzle needs a
  /// register per chunk, which LICM keeps live through the whole tile
  /// loop). A buffer sized for 16-bit rows holds the 8-bit ones.
  static constexpr int64_t stagingRowStride(int64_t rowElements,
                                            int64_t chunk = 8) {
    return rowElements + chunk;
  }

  /// f32 accumulator tile row stride in shared memory; the padding keeps rows
  /// 16-byte aligned and spreads rows over banks.
  int64_t accRowStride() const { return tileN + 4; }
  int64_t lhsTileBytes() const { return tileM * tileK * operandBytes; }
  int64_t rhsTileBytes() const { return tileN * tileK * operandBytes; }
  /// Rows of the rhs tile (along N) that each CTA of a cluster loads.
  int64_t rhsRowsPerCta() const { return tileN / clusterM; }
  int64_t stageBytes() const { return lhsTileBytes() + rhsTileBytes(); }
  int64_t accTileBytes() const { return tileM * accRowStride() * 4; }
  /// Rows the CTA covers at once in the epilogue.
  int64_t epilogueRowsPerPass() const {
    return epilogueThreads * kEpilogueColumnsPerThread / tileN;
  }
  const ScheduleTraits &traits() const { return scheduleTraits(schedule); }
  bool warpSpecialized() const { return traits().warpSpecialized; }
  /// CTAs loop over tiles (one per SM), but for the epilogue-only kernel.
  bool persistent() const { return traits().persistent && !epilogueOnly; }
  bool registerEpilogue() const { return traits().registerEpilogue; }
  int64_t consumersPerTile() const { return traits().consumersPerTile; }
  int64_t fragmentsPerConsumer() const {
    return tileM / 64 / consumersPerTile();
  }
  int64_t concurrentEpilogues() const { return traits().concurrentEpilogues; }
  /// Where the epilogue's bytes start: after the ring in a persistent
  /// kernel (both are live at once), else at the ring (which they reuse).
  int64_t epilogueOffset() const {
    return persistent() ? stages * stageBytes() : 0;
  }
  /// Bytes of one epilogue's column-partial scratch (one f32 row of the
  /// tile per pass row, or per warp when reading registers).
  int64_t columnScratchBytes() const {
    int64_t rows = registerEpilogue() ? epilogueThreads / 32
                                      : epilogueRowsPerPass();
    return (columnScratches() * rows + numColumnStatistics + numColumnDerived) *
           tileN * 4;
  }
  int64_t columnScratches() const {
    return std::max<int64_t>(numColPartials, numColumnStatistics > 0);
  }
  /// Where the finished column statistic `k` lies (derived value d:
  /// numColumnStatistics + d).
  int64_t columnStatisticOffset(int64_t k) const {
    int64_t rows =
        registerEpilogue() ? epilogueThreads / 32 : epilogueRowsPerPass();
    return columnScratchOffset() + (columnScratches() * rows + k) * tileN * 4;
  }
  int64_t columnScratchOffset() const {
    return epilogueOffset() + (registerEpilogue() ? 0 : accTileBytes());
  }
  /// Bytes of one warp's staging buffer, and where the epilogue's start.
  /// The staged tiles' part of a warp's buffer comes first, then the input
  /// rows.
  int64_t tileStagingBytesPerWarp() const {
    return stagedTiles ? stagingRows * stagingRowStride(tileN) * 2 : 0;
  }
  /// One pipelined input's slot: the warp's stagingRows rows of the tile.
  int64_t pipelineSlotBytes() const {
    return stagingRows * stagingRowStride(tileN) * 2;
  }
  /// Where a warp's pipelined slots start in its buffer (16-byte aligned,
  /// as the copies need).
  int64_t pipelineSlotsOffset() const {
    return (tileStagingBytesPerWarp() + stagedInputRowBytes + 15) / 16 * 16;
  }
  /// A warp's staged tiles, input rows and pipelined slots.
  int64_t rowStagingBytesPerWarp() const {
    return pipelinedInputs
               ? pipelineSlotsOffset() +
                     pipelinedInputs * kPipelineSlots * pipelineSlotBytes()
               : tileStagingBytesPerWarp() + stagedInputRowBytes;
  }
  /// Where a warp's transposed staging starts in its buffer (16-byte
  /// aligned, as its copies need).
  int64_t transposedStagingOffset() const {
    return (rowStagingBytesPerWarp() + 15) / 16 * 16;
  }
  int64_t stagingBytesPerWarp() const {
    int64_t bytes = transposedStagingBytes
                        ? transposedStagingOffset() + transposedStagingBytes
                        : rowStagingBytesPerWarp();
    return tmaStores ? (bytes + 127) / 128 * 128 : bytes;
  }
  int64_t stagingBytes() const {
    return epilogueThreads / 32 * stagingBytesPerWarp();
  }
  int64_t stagingOffset() const {
    return columnScratchOffset() + columnScratchBytes();
  }
  int64_t epilogueBytes() const {
    return (registerEpilogue() ? 0 : accTileBytes()) + columnScratchBytes() +
           stagingBytes();
  }
  /// The mbarriers the schedule's mainloop creates (HopperMainloop.cpp,
  /// which checks its count against this): a full barrier per stage, an
  /// empty one per stage where a producer warpgroup refills the ring, and
  /// two more for the staged epilogue's handoff or ping-pong's turns.
  int64_t barrierCount() const {
    if (epilogueOnly)
      return 0;
    if (!warpSpecialized())
      return stages;
    return 2 * stages + traits().extraBarriers;
  }
  /// Static shared memory the kernel declares beside the dynamic buffer:
  /// its mbarriers, 8 bytes each, and the dynamic buffer's symbol, rounded
  /// to 16 bytes (ptxas -v: 65 bytes with 4 stages and two more barriers).
  /// Both count against the CTA's limit.
  int64_t staticSharedBytes() const {
    return (barrierCount() * 8 + 1 + 15) / 16 * 16;
  }
  /// Dynamic shared memory to request, plus slack to align the base to 1024
  /// bytes as 128-byte swizzled TMA tiles require.
  int64_t sharedBytes() const {
    int64_t ring = stages * stageBytes();
    return (persistent() ? ring + concurrentEpilogues() * epilogueBytes()
                         : std::max(ring, epilogueBytes())) +
           1024;
  }
};

/// What a register epilogue loads before its tile's mainloop, so that the
/// loads' latency passes under the K loop instead of stalling the epilogue
/// (see prefetchEpilogue).
struct EpiloguePrefetch {
  /// Whether the tile takes the interior epilogue (null: nothing
  /// prefetched; the epilogue decides).
  Value interior;
  /// Per epilogue input, the vectors the thread loaded (in an interior tile
  /// only; none for an input not prefetched): a tile input's two columns
  /// of each 8-column group, fragment row by fragment row; a column
  /// input's two columns of each of its first groups, or its 16-byte
  /// chunks of the tile's columns where the epilogue stages them in a row
  /// buffer.
  SmallVector<SmallVector<Value>> values;
};

/// Values every part of the kernel body uses.
struct KernelFrame {
  /// Thread, warp and lane among the threads running the current part (the
  /// consumers' own numbering in the epilogue of a warp-specialized kernel).
  Value tid, warp, lane;       // index
  Value tileRow, tileCol;      // this CTA's tile (index)
  Value blockM, blockN;        // tile origin in the output (index)
  Value clusterRank;           // the CTA's rank in its cluster (index; null
                               // without clusters)
  Value sizeM, sizeN, sizeK;   // problem size (index kernel arguments)
  Value batchCount;            // B of a batched GEMM (null: unbatched)
  Value batch;                 // this CTA's tile's batch (null: unbatched)
  Value lhsMap, rhsMap;        // TMA descriptors (nvgpu tensormap values)
  /// Per epilogue output, its TMA store descriptor (an LLVM pointer; null
  /// where the output is not stored with TMA, see tmaStoredOutputs).
  SmallVector<Value> outputMaps;
  Value shared;                // dynamic shared memory, memref<?xi8, 3>
  Value sharedBase;            // byte offset of the 1024-aligned base (index)
  Value accTile;               // f32 tile in shared memory after the mainloop
  /// With a register epilogue: the WGMMA accumulator fragments of the
  /// thread's warpgroup (64 rows each); `warp` then numbers the warps from
  /// the tile's first row.
  SmallVector<Value> accFragments;
  /// Synchronizes the threads that run the epilogue.
  std::function<void(ImplicitLocOpBuilder &)> syncEpilogue;
  /// What the epilogue of the current tile loaded before its mainloop.
  EpiloguePrefetch prefetched;
};

/// The epilogue of a kernel's tiles, in two parts: `prefetch`, emitted by a
/// register schedule after the tile is assigned and before its mainloop
/// (its result goes to `frame.prefetched`), and `emit`, after the mainloop.
struct EpilogueEmitter {
  /// Part `part` of `parts` of the prefetch loads (see prefetchEpilogue).
  function_ref<EpiloguePrefetch(ImplicitLocOpBuilder &b,
                                const KernelFrame &frame, int64_t part,
                                int64_t parts)>
      prefetch;
  function_ref<void(ImplicitLocOpBuilder &b, const KernelFrame &frame)> emit;
  /// Emitted by a register schedule's epilogue threads after their last
  /// tile (waits for the TMA stores still in flight); may be null.
  function_ref<void(ImplicitLocOpBuilder &b, const KernelFrame &frame)> finish;
};

/// What the epilogue does with each yielded value.
enum class OutputRole {
  tile,
  pair,
  interleaved,
  rowPartials,
  colPartials,
  rowSelect,
  grouped,
  colGrouped,
  transposed
};
OutputRole getOutputRole(Value yielded);

/// The epilogue values the same down every column of the tile: statistics
/// along columns and the f32 values computed from them and constants alone
/// (a 128 x 1 quantization's scale), in program order. `frontier`: those the
/// rest of the epilogue reads, each made once per column into a row of
/// shared memory (a statistic's own row where it is one) instead of at
/// every element.
struct ColumnUniform {
  SmallVector<Operation *> ops;
  SmallVector<Value> frontier;
  /// The frontier values that are not statistics, each with a row of its
  /// own.
  SmallVector<Value> derived() const {
    return llvm::to_vector(llvm::make_filter_range(frontier, [](Value v) {
      return !isa_and_nonnull<GroupReduceOp>(v.getDefiningOp());
    }));
  }
};
ColumnUniform analyzeColumnUniform(GemmOp op);
/// The manifest's name of an output of `role` (coda::abi::ParamRole;
/// KernelAbi.cpp).
StringRef stringifyRole(OutputRole role);

struct EpiloguePlan;

/// Emits, for the tile `frame` describes (assigned, its mainloop not yet
/// run), the loads a register epilogue of `op` takes before the K loop
/// (InputPlan::prefetch: staged tile inputs and column inputs, where
/// registers allow), in an interior tile. An empty prefetch where it takes
/// none. With `parts` > 1, only part `part` of them (the loads in order,
/// split into `parts` runs), so that a schedule can issue them over several
/// k-tiles; mergePrefetches joins the parts.
EpiloguePrefetch prefetchEpilogue(ImplicitLocOpBuilder &b, GemmOp op,
                                  const GemmKernelConfig &config,
                                  const EpiloguePlan &plan,
                                  const KernelFrame &frame, ValueRange inputs,
                                  ValueRange outputs, int64_t part = 0,
                                  int64_t parts = 1);
/// The prefetch of all `parts`, each input's values in order.
EpiloguePrefetch mergePrefetches(ArrayRef<EpiloguePrefetch> parts);

/// Emits the epilogue of the tile that `frame` describes: reads the
/// accumulators from `frame.accFragments` or else `frame.accTile`, the
/// kernel's epilogue `inputs` (the values of `frame.prefetched` where
/// given) and writes its `outputs`.
void emitEpilogue(ImplicitLocOpBuilder &b, GemmOp op,
                  const GemmKernelConfig &config, const EpiloguePlan &plan,
                  const KernelFrame &frame, ValueRange inputs,
                  ValueRange outputs);

/// Emitted once by each epilogue thread of a register schedule after its
/// last tile: waits until the TMA stores it issued have completed.
void finishEpilogue(ImplicitLocOpBuilder &b, const GemmKernelConfig &config,
                    const KernelFrame &frame);

/// Sets frame.tileRow/tileCol/blockM/blockN for linear tile index `linear`
/// of the ceil(M / tileM) x ceil(N / tileN) tiles, in grouped order (a few
/// tile rows at a time) so that the tiles in flight share lhs and rhs in L2.
/// In a batched GEMM `linear` runs over the tiles of every batch, batch
/// after batch, and frame.batch is set too.
/// With clusters, `linear` numbers the clusters' tiles (clusterM tile rows
/// each, ceil(ceil(M / tileM) / clusterM) of them down M) and the CTA takes
/// row frame.clusterRank of its cluster's; that row may lie below M.
void assignTile(ImplicitLocOpBuilder &b, KernelFrame &frame,
                const GemmKernelConfig &config, Value linear);

/// A GPU architecture's GEMM mainloop.
class GemmTarget {
public:
  virtual ~GemmTarget() = default;
  /// Checks what this target needs of the operands; reports on `op`.
  virtual LogicalResult checkOperands(GemmOp op,
                                      const GemmKernelConfig &config) const = 0;
  /// Types of the lhs and rhs TMA descriptors.
  virtual Type getLhsMapType(const GemmKernelConfig &config) const = 0;
  virtual Type getRhsMapType(const GemmKernelConfig &config) const = 0;
  /// The TMA box of each descriptor, innermost dimension first.
  virtual SmallVector<int64_t> getLhsBox(const GemmKernelConfig &c) const = 0;
  virtual SmallVector<int64_t> getRhsBox(const GemmKernelConfig &c) const = 0;
  /// Type and box (innermost first) of the TMA store descriptor of a tile
  /// output of `element` type (see GemmKernelConfig::tmaStores).
  virtual Type getOutputMapType(Type element) const = 0;
  virtual SmallVector<int64_t> getOutputBox(Type element) const = 0;
  /// Emits the kernel body: the mainloop over K of each of the CTA's tiles
  /// (set with assignTile), then `epilogue` with the f32 accumulator tile
  /// (tileM x accRowStride) in `frame.accTile`. A target may run the
  /// epilogue on some threads only, renumbering `frame.tid/warp/lane` and
  /// setting `frame.syncEpilogue` for them.
  virtual void emitKernelBody(ImplicitLocOpBuilder &b, KernelFrame &frame,
                              const GemmKernelConfig &config,
                              EpilogueEmitter epilogue) const = 0;
};

/// The target for `chip`, or null when coda has no GEMM lowering for it.
std::unique_ptr<GemmTarget> getGemmTarget(StringRef chip);

/// One kernel of a GEMM: its configuration and, dispatched by K, the
/// largest K it runs for (0: any K beyond the previous variant's), or,
/// dispatched by waves, the relative time of one wave of its tiles.
struct GemmVariant {
  GemmKernelConfig config;
  int64_t maxK = 0;
  int64_t waveCost = 0;
};

/// The kernels of `op` on `target`, in dispatch order: its pinned
/// coda.gemm_config (one, or several chosen by K at launch), else one from
/// the options; reports on `op` what a kernel cannot take (GemmConfig.cpp).
FailureOr<SmallVector<GemmVariant>>
configureGemm(GemmOp op, const GemmTarget &target,
              const CodaToGPUOptions &options);

/// The `coda.kernel` ABI of a GEMM's kernel and of a reduce_partials kernel
/// of `threads` threads per CTA: parameters with their sources in `host`,
/// grid, block and shared memory (KernelAbi.cpp, docs/KernelABI.md).
DictionaryAttr buildGemmKernelAbi(OpBuilder &b, GemmOp op, func::FuncOp host,
                                  const GemmTarget &target,
                                  const GemmKernelConfig &config,
                                  ArrayRef<OutputRole> roles);
/// The program of host function `function` for the manifest's "functions"
/// (HostProgram.cpp), or its name and why the runtime cannot run it; the
/// loop kernels the program launches are appended to `loopKernels`.
llvm::json::Object buildHostProgram(func::FuncOp function,
                                    llvm::json::Array &loopKernels);
DictionaryAttr buildReducePartialsAbi(OpBuilder &b, ReducePartialsOp op,
                                      func::FuncOp host, int64_t threads);

/// `values` (f32) rounded to `type` (f8E4M3FN or f8E5M2) as arith.truncf
/// rounds them (to nearest even; NaN or an infinity beyond the finite
/// range), two at a time with one cvt.rn.satfinite per pair; the range
/// check is left out for a value clamped within the finite range by
/// constants (Fp8Conversions.cpp, `--coda-fp8-to-nvvm`).
SmallVector<Value> truncToFp8(ImplicitLocOpBuilder &b, ArrayRef<Value> values,
                              FloatType type);

/// TMA descriptors are kernel parameters passed by value: a kernel with
/// this unit attribute takes each descriptor as a parameter of type
/// tensorMapParamType, whose address tensorMapParamAddress takes;
/// `--coda-tensormap-params` makes that address the parameter's own after
/// the conversion to NVVM (TensorMapParams.cpp).
inline constexpr llvm::StringLiteral kTensorMapParamsAttr =
    "coda.tensormap_params";
/// `!llvm.array<16 x i64>`: the 128 bytes of a CUtensorMap.
Type tensorMapParamType(MLIRContext *ctx);
/// In a kernel, the generic address of the descriptor parameter `param`
/// (an `llvm.alloca` of 64-byte alignment holding it, until
/// `--coda-tensormap-params` replaces it by the parameter itself).
Value tensorMapParamAddress(ImplicitLocOpBuilder &b, Value param);

/// Host code at `hb`'s insertion point that launches, for `op`, the kernel
/// of the first variant whose max_k K does not exceed, or of the variant
/// whose waves weigh least (`kernels[i]` is `variants[i]`'s; HostLaunch.cpp).
void emitGemmLaunch(ImplicitLocOpBuilder &hb, GemmOp op,
                    ArrayRef<gpu::GPUFuncOp> kernels, const GemmTarget &target,
                    ArrayRef<GemmVariant> variants);
/// The memref a TMA descriptor operand of a GEMM launch that emitGemmLaunch
/// made was encoded from, or null where `launchOperand` is not one.
Value descriptorSource(Value launchOperand);
void emitReducePartialsLaunch(ImplicitLocOpBuilder &hb, ReducePartialsOp op,
                              gpu::GPUFuncOp kernel, int64_t threads);

} // namespace mlir::coda::gpu_lowering

#endif // CODA_LIB_CONVERSION_CODATOGPU_GEMMKERNEL_H
