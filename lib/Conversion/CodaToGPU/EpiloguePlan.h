//===- EpiloguePlan.h - where epilogue operands live and move ---*- C++ -*-===//
//
// The placement decisions of a GEMM's epilogue, made once: for every input
// and output, whether it is staged through the warp's shared-memory buffer,
// loaded before the mainloop, copied through pipelined slots, kept as rows
// in shared memory, stored with TMA, or consumed as each group run is
// computed. The configuration selector asks the single-operand rules below
// what a kernel would need; planEpilogue combines them with the chosen
// configuration, and the epilogue's emitters read only the plan.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_LIB_CONVERSION_CODATOGPU_EPILOGUEPLAN_H
#define CODA_LIB_CONVERSION_CODATOGPU_EPILOGUEPLAN_H

#include "GemmKernel.h"

#include "llvm/Support/raw_ostream.h"

namespace mlir::coda::gpu_lowering {

//===----------------------------------------------------------------------===//
// The rules for one operand, which the configuration selector also asks.
//===----------------------------------------------------------------------===//

/// Whether the register epilogue can hold pairs of this stride in one lane
/// (none, 1, or a multiple of 8).
bool fragmentLayoutSupports(std::optional<int64_t> pairStride);

/// Whether a register epilogue of `schedule` stages output `i` of `op` (see
/// GemmKernelConfig::stagedTiles): a tile or pair output of a 16-bit float
/// type, or a tile output of an 8-bit one (in the cooperative schedule only
/// where it may leave with TMA stores: its 128 x 256 tile's row copies
/// spill), contiguous along its rows.
bool stagesOutput(GemmOp op, unsigned i, Schedule schedule);
/// Whether the interior register epilogue of `op` may write output `i`
/// with TMA stores: a staged tile output whose tile is whole boxes wide, of
/// an epilogue that takes the interior copy and reads no pair input, nor a
/// column input unless the tile is ping-pong's (128 columns) and no tile
/// input is read beside it: those inputs' values per run fill the registers
/// that the staging path needs, and ptxas spills.
bool storesWithTma(GemmOp op, unsigned i, const GemmKernelConfig &config);
/// The outputs of `op` that its kernel under `config` stores with TMA, in
/// order: each takes a store descriptor, after the outputs, in the kernel's
/// parameters, its ABI and its host launch.
SmallVector<unsigned> tmaStoredOutputs(GemmOp op,
                                       const GemmKernelConfig &config);
/// Whether a register epilogue stages input `k` of `op`: a tile input of a
/// 16-bit float type, contiguous along its rows.
bool stagesInput(GemmOp op, unsigned k);
/// The staged tile inputs of `op` that its register epilogue under
/// `config` does not prefetch into registers (see prefetchEpilogue), in
/// order: those GemmKernelConfig::pipelinedInputs counts.
SmallVector<unsigned> pipelinedStagedInputs(GemmOp op,
                                            const GemmKernelConfig &config);
/// Bytes per warp that a register epilogue needs to hold the rows of its
/// column and periodic inputs in shared memory (see
/// GemmKernelConfig::stagedInputRowBytes): for each such input of a 16- or
/// 32-bit element type, contiguous along its rows, the tile's columns of
/// one row (column inputs, once per tile) or of the warp's stagingRows
/// rows (periodic inputs, once per fragment row). 0 when there is none.
int64_t inputRowStagingBytes(GemmOp op, int64_t tileN);
/// Whether input `k` is one of them (not a periodic input with a
/// staticPeriod: its direct reads are shared already).
bool stagesInputRows(GemmOp op, unsigned k, int64_t tileN);
/// The period of periodic input `k` of `op` where a register epilogue
/// knows it statically: static, a multiple of 8, and dividing `tileN`. Then
/// every tile starts at a multiple of it, fragment slot (j, e) of lane q
/// reads column (8j + e) mod P + 2q, and the slots whose columns are
/// congruent mod P share one read per row.
std::optional<int64_t> staticPeriod(GemmOp op, unsigned k, int64_t tileN);

//===----------------------------------------------------------------------===//
// The plan of one kernel's epilogue.
//===----------------------------------------------------------------------===//

/// How a thread of a register epilogue loads an epilogue input before the
/// K loop (EpiloguePrefetch::values, input by input).
struct InputPrefetch {
  enum Kind {
    /// Not prefetched.
    none,
    /// In the fragment layout, the lane's two columns 8j + 2q, + 1 per
    /// load: a staged tile input's for each of the thread's fragment rows
    /// (the values it computes with, so that the interior epilogue does
    /// not move them through its staging buffer), a column input's for
    /// the first `loads` j (the same for every row).
    fragments,
    /// 16-byte chunks of a staged column input's row (whole 32-lane
    /// passes) that the epilogue stores into the warp's row buffer.
    rowChunks,
  } kind = none;
  /// Vector loads per thread, and elements per load.
  int64_t loads = 0, lanes = 0;
};

/// Where one epilogue input lives and how it moves.
struct InputPlan {
  AccessForm form = AccessForm::tile;
  /// A tile input that enters through the warp's staging buffer: each row
  /// copied in 16-byte accesses, then read by the lanes that compute it.
  bool staged = false;
  /// Loaded before the tile's mainloop (an interior tile's only).
  InputPrefetch prefetch;
  /// A staged input copied with cp.async into slots of its own a few rows
  /// ahead: its position among the pipelined inputs.
  std::optional<unsigned> pipelineSlot;
  /// A column or periodic input whose rows the warp keeps in shared
  /// memory: the byte offset of its buffer in the warp's staging space.
  std::optional<int64_t> rowBufferOffset;
  /// A periodic input whose period is known statically (staticPeriod).
  std::optional<int64_t> period;
};

/// Where one epilogue output goes and how.
struct OutputPlan {
  OutputRole role = OutputRole::tile;
  /// Leaves through the warp's staging buffer, each row in 16-byte
  /// accesses.
  bool staged = false;
  /// In an interior tile, leaves with TMA stores (stmatrix into the staging
  /// buffer, then one lane's bulk tensor store).
  bool tmaStore = false;
  /// Stored (interleaved) or combined (row partials) as each group run is
  /// computed, so that its values do not wait for the rest of the row.
  bool eager = false;
};

/// Every placement decision of a GEMM kernel's epilogue.
struct EpiloguePlan {
  /// The register (WGMMA fragment) layout; else the shared f32 tile.
  bool fragments = false;
  /// Interior tiles take a copy without bounds or alignment checks.
  bool interiorCopy = false;
  /// An edge tile reads its accumulators through opaque moves, so that
  /// LLVM cannot hoist the math the two copies share above their branch.
  bool opaqueEdgeAccumulators = false;
  SmallVector<InputPlan> inputs;
  SmallVector<OutputPlan> outputs;
  /// The pipelined inputs, in slot order.
  SmallVector<unsigned> pipelined;
  /// The values the same down each column of the tile, made once per
  /// column before the rows (where the epilogue has statistics along
  /// columns).
  ColumnUniform columnUniform;

  /// Whether any input is loaded before the mainloop.
  bool prefetches() const;
  void print(raw_ostream &os) const;
};

/// The plan of `op`'s epilogue under `config` (configureGemm's result).
EpiloguePlan planEpilogue(GemmOp op, const GemmKernelConfig &config);

} // namespace mlir::coda::gpu_lowering

#endif // CODA_LIB_CONVERSION_CODATOGPU_EPILOGUEPLAN_H
