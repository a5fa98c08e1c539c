//===- Passes.td - coda conversion passes ------------------*- tablegen -*-===//

#ifndef CODA_CONVERSION_PASSES_TD
#define CODA_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def CodaLowerToLinalg : Pass<"coda-lower-to-linalg"> {
  let summary = "reference lowering of coda ops to linalg, scf, arith and tensor";
  let description = [{
    The executable meaning of the dialect. `coda.gemm` becomes a
    `linalg.generic` contraction into an f32 accumulator followed by a loop
    nest over the output that evaluates the epilogue region per element (per
    column pair when the epilogue has pairwise ops), writes tile and pair
    outputs, folds block reductions into their partials and applies row
    selections. `coda.reduce_partials` becomes a `linalg.reduce`. Works on
    tensors (loop-carried `tensor.insert`) and on memrefs (`memref.store`).

    Before:
    ```mlir
    %y = coda.gemm %a, %b : tensor<4x8xf32>, tensor<8x6xf32>
        epilogue(%acc, col %bias = %c : tensor<6xf32>)
        outs(%init : tensor<4x6xf32>) {
      %0 = arith.addf %acc, %bias : f32
      coda.yield %0 : f32
    }
    ```
    After (abridged):
    ```mlir
    %acc = linalg.generic {iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%a, %b : ...) outs(%zero : tensor<4x6xf32>) { ... }
    %y = scf.for %m = %c0 to %c4 step %c1 iter_args(%o0 = %init) -> tensor<4x6xf32> {
      %r = scf.for %n = %c0 to %c6 step %c1 iter_args(%o1 = %o0) -> tensor<4x6xf32> {
        %e = tensor.extract %acc[%m, %n] : tensor<4x6xf32>
        %b = tensor.extract %c[%n] : tensor<6xf32>
        %v = arith.addf %e, %b : f32
        %i = tensor.insert %v into %o1[%m, %n] : tensor<4x6xf32>
        scf.yield %i : tensor<4x6xf32>
      }
      scf.yield %r : tensor<4x6xf32>
    }
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::cf::ControlFlowDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def CodaSelectGemmConfig
    : Pass<"coda-select-gemm-config", "ModuleOp"> {
  let summary = "choose each coda.gemm's GPU kernel configuration";
  let description = [{
    Attaches a `#coda.gemm_config` (schedule, tile, stages, cluster) to every
    `coda.gemm` on memrefs that has none, from rules measured on the H100
    (docs/performance.md, "Choosing a configuration per GEMM"):

    - pairs at a stride the register epilogues' fragment layout cannot
      serve (not 1 and not a multiple of 8): the warp-specialized kernel;
    - an epilogue that reads no product (an adjoint from saved values: the
      kernel is its epilogue alone, a memory-bound pass; column partials
      included): cooperative 128 x 256 without a cluster, or ping-pong
      128 x 128 where that epilogue spills (RoPE's pairs beside two tile
      inputs or with a table of no static period, a pair input, more than
      two row inputs, an f32 tile output);
    - pairs at a stride wider than one column (rotate-half RoPE):
      cooperative 128 x 256 in clusters of two where every periodic table
      has a static period (whose reads a row's congruent columns share),
      else, or beside a second tile input or output, the warp-specialized
      128 x 256 kernel (the register epilogues measured slower, or
      spilling, there); beside a column input (a bias before the
      rotation) ping-pong 128 x 128, where cooperative spills;
    - two tile inputs beside pairs of adjacent columns or an interleaved
      output (SwiGLU's derivative from saved pre-activations, also with a
      row scale and its gradient's row partials, or FP8 scales): ping-pong
      128 x 128 up to K = 4096, the warp-specialized 128 x 256 kernel
      beyond, dispatched by K as below;
    - other epilogues with two tile inputs, or a pair input beside other
      inputs (backward programs): the warp-specialized 128 x 256 kernel,
      where both register schedules spill;
    - an f32 tile output beside inputs or partials, a pair input alone, or
      more than two row inputs: ping-pong 128 x 128;
    - log-sum-exp partials beside a tile output (an LM head keeping its
      logits for the backward): ping-pong 128 x 128 up to K = 4096,
      cooperative 128 x 128 without a cluster beyond (in 128 x 256 tiles
      it spills), dispatched by K as below;
    - log-sum-exp or max row partials, and pairs of adjacent columns or
      interleaved outputs (cross-entropy, SwiGLU): ping-pong 128 x 128 up
      to K = 4096, cooperative 128 x 256 in clusters of two beyond. Where
      K is dynamic that is an array of both configurations, dispatched by K
      at launch (each becomes a kernel of its own); where K is static, the
      one configuration for it;
    - 8-bit (FP8) operands otherwise: ping-pong 128 x 128 up to K = 4096
      and cooperative beyond, dispatched by K as above;
    - plain epilogues, inputs and sum row partials (residual + norm
      statistics): cooperative 128 x 256 in clusters of two, or without a
      cluster where a row and a column input meet (row-wise scales; there
      the kernel in clusters spills);
    - weight gradients (lhs stored K x M, `transpose_a`) with a plain
      epilogue, or with column partials (a folded norm's gamma gradient, the
      128 x 256 kernel then warp-specialized): that 128 x 256 kernel or
      cooperative 128 x 128 tiles, whichever's waves of tiles on the SMs
      weigh less by the time one wave of each took (`wave_cost`): where M
      or N is dynamic an array of both dispatched by waves at launch, where
      both are static the one configuration for them (counting an H100's
      132 SMs).

    Other column partials and GEMMs whose epilogue fixes a tile other than
    these keep no attribute (the lowering's options apply). `coda-to-gpu` reads
    only the attribute where it is present. `--coda-to-gpu-binary` and
    `coda-compile` run this pass unless told otherwise (`select-config=0`,
    or in `coda-compile` any tile, stages, schedule or cluster option).
  }];
  let dependentDialects = ["::mlir::coda::CodaDialect"];
}

def CodaToGPU : Pass<"coda-to-gpu", "ModuleOp"> {
  let summary = "lower coda.gemm on memrefs to TMA + WGMMA GPU kernels";
  let description = [{
    Every `coda.gemm` on memrefs becomes a kernel in the `coda_kernels`
    `gpu.module` and, in its place, host code that creates the lhs and rhs TMA
    descriptors (`nvgpu.tma.create.descriptor`) and launches the kernel
    (`gpu.launch_func`). One CTA computes a tile of the output, or under a
    persistent `schedule` (staged, cooperative, ping-pong) loops over tiles
    (CTAs walk the tiles in bands of `swizzle` tile rows along N, or with
    `raster=along-m` bands of tile columns down M, for L2 reuse):

    - mainloop (sm_90a): TMA loads of lhs and rhs tiles into a ring of
      `stages` shared-memory slots with 128-byte swizzle, each guarded by an
      mbarrier (`arrive.expect_tx`, `try_wait.parity`); `wgmma.mma_async`
      (bf16/f16, or f8E4M3FN/f8E5M2 read K-major, in; f32 accumulators)
      with one group in flight, the first
      k-tile starting the accumulators with scale-d 0; lhs M x K or K x M
      (`transpose_a`), rhs K x N or N x K (`transpose_b`). Under
      `schedule=warp-specialized` (the default) 128 x 256 tiles have a
      producer warpgroup that refills slots released through `empty`
      mbarriers and two consumer warpgroups that compute 64 rows each;
      other tiles run one warpgroup (`single`). With `staged`, 128 x 128
      tiles: one CTA per SM loops over tiles, and producer warps run each
      tile's epilogue from a staging tile beside the ring while the
      consumers compute the next; `cooperative` and `ping-pong` run the
      epilogue from the consumers' registers (HopperSchedules/). An epilogue that reads no product under
      the cooperative or ping-pong schedule without a cluster has no
      mainloop: one tile per CTA, every thread running the register
      schedule's epilogue, no ring, producer or mbarrier: its shared memory
      is the epilogue's buffers alone, and a CTA whose registers allow it
      shares its SM with another.
    - epilogue: the accumulator tile goes to shared memory; each thread
      covers 8 consecutive columns of a row (a row's threads are consecutive
      lanes), evaluates the epilogue region, reads row/column/tile/periodic
      /pair inputs, writes tile, pair and interleaved outputs with bounds masks (16-byte vectors
      where in bounds and aligned), reduces row partials with lane shuffles
      and column partials through shared memory (fixed order, so
      deterministic), and applies row selections.

    Any M, N, K: TMA fills out-of-bounds reads with zeros and stores are
    masked. Block reductions shape the tile: a `row_reduce tile t` needs
    tile N to be a multiple of t (a CTA writes tile N / t partials per row;
    otherwise tile N becomes t), a `col_reduce tile t` sets tile M to t.
    Unsupported operand types, misaligned static strides (TMA needs 16-byte
    aligned rows) and impossible tiles are reported on the op (a tile that a
    block reduction set, with a note at the reduction). A matrix product
    still in linalg is an error: the later lowering of leftover linalg would
    make it a loop kernel, not a GEMM (`--coda-fuse` makes it a
    `coda.gemm`).

    A GEMM with a pinned `coda.gemm_config` takes that configuration in
    place of the options; with an array of them, it becomes one kernel per
    configuration and the host code launches, dispatched by K (`max_k`),
    the first whose `max_k` K does not exceed (`scf.if` on K), or,
    dispatched by waves (`wave_cost`), the one whose waves of tiles on the
    H100's 132 SMs times `wave_cost` is least (`scf.if` on the products).

    Each kernel carries its ABI as the `coda.kernel` attribute (argument
    order, TMA descriptor specs, grid, block, shared memory, and for the
    variants of a dispatched GEMM `variant_of` and `max_k` or `wave_cost`);
    see docs/KernelABI.md.
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "GPU architecture to generate kernels for (sm_90a)">,
    Option<"tileM", "tile-m", "int64_t", /*default=*/"128",
           "output tile rows per CTA (64 or 128)">,
    Option<"tileN", "tile-n", "int64_t", /*default=*/"256",
           "output tile columns per CTA (64, 128 or 256)">,
    Option<"stages", "stages", "int64_t", /*default=*/"4",
           "shared-memory slots in the TMA ring">,
    Option<"schedule", "schedule", "::mlir::coda::GemmSchedule",
           /*default=*/"::mlir::coda::GemmSchedule::warpSpecialized",
           "how the warps of a kernel share its tiles (a GEMM it cannot "
           "serve, said in a warning, takes warp-specialized)",
           [{::mlir::coda::scheduleOptionValues()}]>,
    Option<"clusterM", "cluster-m", "int64_t", /*default=*/"1",
           "CTAs per cluster along M (1 or 2; the cooperative and ping-pong "
           "schedules): the "
           "CTAs of a cluster share the rhs tile, each loading a part of it "
           "and multicasting it to all">,
    Option<"raster", "raster", "::mlir::coda::RasterOrder",
           /*default=*/"::mlir::coda::RasterOrder::alongN",
           "the order in which persistent kernels take their tiles",
           [{::mlir::coda::rasterOptionValues()}]>,
    Option<"swizzle", "swizzle", "int64_t", /*default=*/"8",
           "tiles across a raster band (persistent kernels)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::cf::ControlFlowDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::nvgpu::NVGPUDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def CodaExportKernelManifest : Pass<"coda-export-kernel-manifest", "ModuleOp"> {
  let summary = "write the ABI of every kernel and the program of every "
                "host function as a JSON manifest";
  let description = [{
    Collects the `coda.kernel` attribute of every kernel that `--coda-to-gpu`
    generated, describes the kernels outlined from the rest (`loop` kernels:
    their parameters, grid and block), and records each host function as a
    program the runtime's `launch_function` runs: its arguments, the
    temporaries it allocates (placed in one workspace by their lifetimes) and
    its steps in order, kernel launches and calls of external functions
    (host callbacks). A function the runtime cannot run that way (dynamic
    temporaries, control flow, host-side memory access) is recorded with the
    reason. Writes one JSON document (docs/KernelABI.md describes the
    fields). Run it after `gpu-kernel-outlining` and before the TMA
    descriptors and the host code are lowered to LLVM.
  }];
  let options = [
    Option<"path", "path", "std::string", /*default=*/"\"-\"",
           "file to write ('-' for stdout)">,
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "chip recorded in the manifest">
  ];
}

def CodaPrepareHostProgram : Pass<"coda-prepare-host-program", "ModuleOp"> {
  let summary = "make each host function a program the runtime can run";
  let description = [{
    On bufferized host code, before the GPU lowering: memref results of
    static shape become out-parameters appended to the function's arguments
    (upstream's `promoteBufferResultsToOutParams`, the result's allocation
    replaced by the parameter where the function allocates it, public
    functions and external declarations included, so that an external call
    writes into a buffer its caller provides), and `memref.copy` becomes
    `linalg.copy`, which the GPU pipeline turns into a kernel: every buffer
    of a coda program lives in GPU memory, where a host copy cannot reach.
    Functions with a result of dynamic shape keep their results (the runtime
    cannot run them whole; their kernels launch one by one).
  }];
  let dependentDialects = ["linalg::LinalgDialect"];
}

def CodaSplitRowReductions : Pass<"coda-split-row-reductions"> {
  let summary = "row reductions left beside the GEMMs as partials over "
                "interleaved columns, then their combination";
  let description = [{
    A `linalg.generic` on tensors that reduces a matrix's rows over their
    contiguous dimension (`[T, K] -> [T]` or `[T, 1]`, one combiner with an
    identity: a sum, a maximum, ...; K static, a multiple of `lanes` and at
    least `min-columns`), such as a norm's statistic of a function's input,
    becomes two: partials `part[t, p]` combining `x[t, j * lanes + p]` over
    j, then each row's `lanes` partials. As loop kernels
    (`--coda-tile-parallel-loops`), a row's lanes then read consecutive
    columns; the reduction as written gave each thread a whole row. The
    combination order changes (floating-point sums round differently).
  }];
  let options = [
    Option<"lanes", "lanes", "int64_t", "128",
           "partials per row (interleaved columns)">,
    Option<"minColumns", "min-columns", "int64_t", "1024",
           "the narrowest row split">
  ];
  let dependentDialects = ["linalg::LinalgDialect", "tensor::TensorDialect",
                           "arith::ArithDialect"];
}

def CodaTileParallelLoops : Pass<"coda-tile-parallel-loops"> {
  let summary = "tile the parallel loops left beside the GEMMs so that a "
                "warp's threads walk the innermost, contiguous dimension";
  let description = [{
    What is left beside the GEMMs (weight preparation such as gamma's fold
    into the weights and SwiGLU's interleave, finishes, statistics) reaches
    the GPU as `scf.parallel` nests. Each outermost one is tiled by 128 in
    its innermost dimension of more than one iteration (a `[T, 1]` column's
    rows) and by 1 in the others (upstream's
    `tileParallelLoop`); `gpu-map-parallel-loops` then gives the tile's
    128 iterations to the threads of a block, a row-major operand's
    consecutive elements to consecutive lanes, and the other dimensions and
    the innermost dimension's tiles to the grid. (Tiling the outermost
    dimension instead gave each lane its own row: a warp's 64 bytes of bf16
    came from 32 sectors.)
  }];
  let options = [
    Option<"tileSize", "tile-size", "int64_t", "128",
           "iterations of the innermost dimension per block">
  ];
  let dependentDialects = ["scf::SCFDialect", "arith::ArithDialect"];
}

def CodaCheckGPUMapping : Pass<"coda-check-gpu-mapping", "ModuleOp"> {
  let summary = "fail when a parallel loop nest stayed on the host";
  let description = [{
    After the remaining linalg ops have been mapped to GPU kernels
    (`convert-parallel-loops-to-gpu`), an `scf.parallel` outside a
    `gpu.launch` would run on the host over device memory. This pass reports
    each one instead of letting the program compile into something wrong.
  }];
}

def CodaTensorMapParams : Pass<"coda-tensormap-params", "gpu::GPUModuleOp"> {
  let summary = "pass TMA descriptors to coda's kernels by value, as "
                "grid-constant parameters";
  let description = [{
    `--coda-to-gpu` gives every TMA descriptor a kernel parameter of its own
    type, `!llvm.array<16 x i64>` (the 128 bytes of a `CUtensorMap`), which
    the kernel stores into a 64-byte aligned `llvm.alloca` whose address
    the TMA instructions take. TMA reads a descriptor in the kernel's
    parameter space, constant or global memory, never in local memory: run
    after `convert-gpu-to-nvvm`, this pass turns each such parameter of a
    kernel marked `coda.tensormap_params` into a pointer to the parameter
    itself (`llvm.byval`, 64-byte aligned, `nvvm.grid_constant`) and
    replaces the alloca with it, so that the host passes the descriptor's
    bytes with the launch (as CUTLASS's `__grid_constant__ const
    CUtensorMap`) and nothing is allocated or copied to the device for it.

    ```mlir
    llvm.func @k(%arg0: !llvm.array<16 x i64>, ...)
        attributes {coda.tensormap_params, nvvm.kernel} {
      %0 = llvm.alloca %c1 x !llvm.array<16 x i64> {alignment = 64 : i64}
      llvm.store %arg0, %0 : !llvm.array<16 x i64>, !llvm.ptr
      nvvm.prefetch tensormap, %0 : !llvm.ptr
    // becomes
    llvm.func @k(%arg0: !llvm.ptr {llvm.align = 64 : i64,
                 llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant}, ...)
      nvvm.prefetch tensormap, %arg0 : !llvm.ptr
    ```

    A descriptor parameter used in any other way is an error.
  }];
  let dependentDialects = [
    "::mlir::LLVM::LLVMDialect",
    "::mlir::NVVM::NVVMDialect"
  ];
}

def CodaFp8ToNVVM : Pass<"coda-fp8-to-nvvm", "gpu::GPUModuleOp"> {
  let summary = "lower conversions to and from FP8 in GPU kernels to PTX's cvt";
  let description = [{
    LLVM has no 8-bit float type: the conversion to LLVM turns
    `f8E4M3FN` and `f8E5M2` values into `i8` and cannot lower
    `arith.truncf` to them or `arith.extf` from them. In the kernels of a
    `gpu.module` (an epilogue that quantizes its output, a finish that
    reads FP8) this pass rewrites each scalar conversion into sm_89+'s
    `cvt`, with `arith.truncf`'s meaning kept exactly:

    - `arith.truncf` from f32, f16 or bf16 (widened exactly to f32) rounds
      to nearest even with `cvt.rn.satfinite.{e4m3,e5m2}x2.f32`, whose
      saturation PTX requires; a value beyond the type's largest finite
      value plus half an ulp gets what `arith.truncf` gives it: in
      f8E4M3FN, which has no infinity, NaN (made before the cvt, which
      keeps NaN; its sign is not kept), in f8E5M2 the infinity of its sign
      (the code after the saturated one). NaN stays NaN.
      That check is left out where the value is clamped by constants
      within the finite range (`minimumf(maximumf(x, -448), 448)`, the
      form FP8 recipes quantize with).
    - `arith.extf` to f32, f16, bf16 or f64 converts exactly with
      `cvt.rn.f16x2.{e4m3,e5m2}x2` and widens from f16.

    The GEMM epilogue converts pairs of adjacent output elements with one
    `cvt` (`truncToFp8`, shared with this pass). A conversion this pass
    cannot lower (vector operands, an f64 source, which would round twice,
    a rounding mode other than to nearest even) is an error on its op.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def CodaFastMathToNVVM : Pass<"coda-fast-math-to-nvvm", "gpu::GPUModuleOp"> {
  let summary = "lower f32 arithmetic marked `afn` in GPU kernels to PTX's "
                "approximate instructions in their flush-to-zero form";
  let description = [{
    An op marked `fastmath<afn>` allows an approximation of its function.
    In the kernels of a `gpu.module` this pass gives each scalar f32 one
    the approximation the hardware computes in a single instruction, in
    the flush-to-zero form that has no range fix-ups around it (the form
    nvcc's `--use_fast_math` selects):

    - `math.exp %x` becomes `ex2.approx.ftz.f32` of `%x * log2(e)`,
      `math.exp2 %x` `ex2.approx.ftz.f32` of `%x`;
    - `arith.divf %a, %b` becomes `div.approx.ftz.f32` (%a times an
      approximate reciprocal of %b, which ptxas computes once for the
      divisions that share %b: SwiGLU's derivative divides by
      `1 + exp(-g)` twice).

    Subnormal inputs and results of these instructions are zero: an
    exponential below 2^-126 becomes 0, a reciprocal of a subnormal
    divisor infinity. Ops without `afn`, and vector or non-f32 ones, are
    left to the usual lowering (libdevice, IEEE division).

    ```mlir
    %e = math.exp %x fastmath<afn> : f32
    %q = arith.divf %a, %d fastmath<arcp,afn> : f32
    // becomes
    %l = arith.mulf %x, %log2e : f32
    %e = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%l) : (f32) -> f32
    %q = llvm.call_intrinsic "llvm.nvvm.div.approx.ftz.f"(%a, %d) : (f32, f32) -> f32
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::LLVM::LLVMDialect"
  ];
}

def CodaDependentLaunch : Pass<"coda-dependent-launch", "gpu::GPUModuleOp"> {
  let summary = "make each kernel wait for the grid before it in its "
                "stream, so that it may be launched before that grid has "
                "finished (programmatic dependent launch)";
  let description = [{
    Every kernel of the `gpu.module` begins with `griddepcontrol.wait`: it
    touches no memory before the grids launched ahead of it in the stream
    have completed and their writes are visible (it reads nothing they
    write and overwrites nothing they read any earlier than it would
    otherwise). Each kernel is marked `coda.dependent_launch`, which the
    kernel manifest records (`dependent_launch`): such a kernel may be
    launched with programmatic stream serialization (the runtime's
    `setDependentLaunch`), to be scheduled as the kernel before it exits
    rather than after its end. No kernel signals its dependents early
    (`griddepcontrol.launch_dependents`); launched without the attribute
    (by a reader of older manifests, or after a kernel that is not a coda
    kernel) the wait returns at once and the kernel runs as before.

    ```mlir
    gpu.func @k(...) kernel {
      nvvm.griddepcontrol wait
      ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::NVVM::NVVMDialect"];
}

#endif // CODA_CONVERSION_PASSES_TD
