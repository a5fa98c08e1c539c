//===- CodaBase.td - coda dialect definition ---------------*- tablegen -*-===//
//
// The coda dialect: a GEMM with an attached epilogue program.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_DIALECT_CODA_IR_CODABASE_TD
#define CODA_DIALECT_CODA_IR_CODABASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Coda_Dialect : Dialect {
  let name = "coda";
  let cppNamespace = "::mlir::coda";
  let summary = "GEMMs with epilogue programs built from fusion primitives";
  let description = [{
    The coda dialect models a matrix product whose output tile is transformed
    by an *epilogue program* while it is still on chip. The program is a region
    evaluated once per output element (m, n). It sees the f32 accumulator
    element and one element of every epilogue input, computes with plain
    `arith`/`math`, and sends values to outputs: M x N tiles, per-tile partial
    row/column reductions, one value per column pair, two values per element
    (interleaved), or one value per row.

    The primitives follow "CODA: Rewriting Transformer Blocks as GEMM-Epilogue
    Programs" (arXiv 2605.19269). See docs/Dialect.md for their meaning.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Coda_AccessForm : I32EnumAttr<"AccessForm",
    "how an epilogue input is read at output element (m, n)", [
      I32EnumAttrCase<"tile", 0>,
      I32EnumAttrCase<"row", 1>,
      I32EnumAttrCase<"col", 2>,
      I32EnumAttrCase<"scalar", 3>,
      I32EnumAttrCase<"periodic", 4>,
      I32EnumAttrCase<"pair", 5>
    ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::coda";
}
def Coda_AccessFormAttr : EnumAttr<Coda_Dialect, Coda_AccessForm, "access">;
def Coda_AccessFormArrayAttr
    : TypedArrayAttrBase<Coda_AccessFormAttr, "access form array">;

def Coda_ReductionKind : I32EnumAttr<"ReductionKind",
    "the combining function of a block reduction", [
      I32EnumAttrCase<"sum", 0>,
      I32EnumAttrCase<"max", 1>,
      I32EnumAttrCase<"logsumexp", 2>
    ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::coda";
}
def Coda_ReductionKindAttr
    : EnumAttr<Coda_Dialect, Coda_ReductionKind, "reduction">;

def Coda_GroupStatistic : I32EnumAttr<"GroupStatistic",
    "the statistic of a group of the output tile", [
      I32EnumAttrCase<"sum", 0>,
      I32EnumAttrCase<"max", 1>,
      I32EnumAttrCase<"min", 2>,
      // The position (column, or row for column groups, over the whole
      // output) of the group's first maximum.
      I32EnumAttrCase<"argmax", 3>
    ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::coda";
}
def Coda_GroupStatisticAttr
    : EnumAttr<Coda_Dialect, Coda_GroupStatistic, "statistic">;

def Coda_ReductionAxis : I32EnumAttr<"ReductionAxis",
    "which output axis a block reduction runs along", [
      I32EnumAttrCase<"row", 0>,
      I32EnumAttrCase<"col", 1>
    ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::coda";
}
def Coda_ReductionAxisAttr
    : EnumAttr<Coda_Dialect, Coda_ReductionAxis, "axis">;

def Coda_GemmSchedule : I32EnumAttr<"GemmSchedule",
    "how the warps of a GPU GEMM kernel share the work of its tiles", [
      // One warpgroup per CTA loads and computes one tile, then runs the
      // epilogue from a shared-memory tile.
      I32EnumAttrCase<"single", 0>,
      // One tile per CTA: a producer warpgroup issues TMA, two consumer
      // warpgroups run WGMMA over 64 rows each and then the epilogue from a
      // shared-memory tile.
      I32EnumAttrCase<"warpSpecialized", 1, "warp_specialized">,
      // Persistent CTAs with the warpSpecialized roles; warps 2-3 of the
      // producer warpgroup run each tile's epilogue from a staging tile
      // while the consumers compute the next.
      I32EnumAttrCase<"staged", 2>,
      // Persistent CTAs: two consumer warpgroups compute 64 rows of every
      // tile each and run the epilogue from their registers while the
      // producer already fills the ring with the next tile's k-tiles.
      I32EnumAttrCase<"cooperative", 3>,
      // Persistent CTAs: the two consumer warpgroups take whole tiles in
      // turn, one running its epilogue from its registers while the other
      // computes the next tile.
      I32EnumAttrCase<"pingPong", 4, "ping_pong">
    ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::coda";
}

def Coda_RasterOrder : I32EnumAttr<"RasterOrder",
    "the order in which a persistent GPU kernel's CTAs take its output tiles", [
      // Bands of `swizzle` tile rows, one after the other down M; within a
      // band the tiles go down its rows, then along N (the band's lhs rows
      // stay in L2 while the rhs streams through once per band).
      I32EnumAttrCase<"alongN", 0, "along_n">,
      // Bands of `swizzle` tile columns, one after the other along N;
      // within a band the tiles go across its columns, then down M (the
      // band's rhs columns stay in L2 while the lhs streams through once
      // per band).
      I32EnumAttrCase<"alongM", 1, "along_m">
    ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::coda";
}

def Coda_RasterOrderParameter : EnumParameter<Coda_RasterOrder> {
  let defaultValue = "::mlir::coda::RasterOrder::alongN";
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def Coda_GemmConfigAttr : AttrDef<Coda_Dialect, "GemmConfig"> {
  let mnemonic = "gemm_config";
  let summary = "the GPU kernel configuration of one coda.gemm";
  let description = [{
    Attached to a `coda.gemm` as its discardable attribute
    `coda.gemm_config` (by `--coda-select-gemm-config` or by hand), it fixes
    the kernel that `--coda-to-gpu` generates for that GEMM: the schedule,
    the output tile, the TMA ring's stages, the CTAs per cluster along M and,
    for the persistent schedules, the order in which the CTAs take the tiles
    (`raster`: bands of `swizzle` tile rows walked along N, `along_n`, or of
    `swizzle` tile columns walked down M, `along_m`; defaults `along_n`, 8).
    The lowering reports a configuration the GEMM's epilogue cannot take
    (e.g. a register schedule with a row partial wider than its tile).

    `epilogue_unroll` is for the schedules whose epilogue reads the
    accumulators from a shared-memory tile (`single`, `warp_specialized`,
    `staged`): the rows each thread takes per iteration of the epilogue's
    row loop. 0 (the default) lets the lowering choose (4, so that several
    rows' input loads are in flight at once); 1 keeps one row's math live at
    a time, for an epilogue whose math would otherwise spill registers.

    ```mlir
    coda.gemm %a, %b transpose_b ... attributes {coda.gemm_config =
        #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128,
                          stages = 4, cluster_m = 2>}
    ```

    Where the best kernel depends on K and K is known only at launch, the
    attribute is an array of configurations dispatched by K: every one but
    the last carries `max_k`, ascending, and runs where K <= max_k; the last
    (no `max_k`) runs for larger K. The lowering generates a kernel for
    each, and the launch (host code or the runtime) picks one.

    ```mlir
    coda.gemm ... attributes {coda.gemm_config = [
        #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128,
                          stages = 4, max_k = 4096>,
        #coda.gemm_config<schedule = cooperative, tile_m = 128,
                          tile_n = 256, stages = 4, cluster_m = 2>]}
    ```

    Where the best tile depends on how the output's tiles fill the SMs
    (M and N known only at launch), the array is dispatched by waves
    instead: every configuration carries `wave_cost`, the relative time of
    one wave of its tiles (a round of tiles on every SM at once; any unit
    the array shares), and the launch takes the one whose waves times
    `wave_cost` is least, the first of equals. A wave is as many tiles as
    the device has SMs (clusters of `cluster_m` tile rows: SMs / cluster_m
    of them), the waves the output's tiles need rounded up.

    ```mlir
    coda.gemm ... attributes {coda.gemm_config = [
        #coda.gemm_config<schedule = cooperative, tile_m = 128,
                          tile_n = 256, stages = 4, cluster_m = 2,
                          wave_cost = 187>,
        #coda.gemm_config<schedule = cooperative, tile_m = 128,
                          tile_n = 128, stages = 4, wave_cost = 100>]}
    ```
  }];
  let parameters = (ins
    EnumParameter<Coda_GemmSchedule>:$schedule,
    "int64_t":$tile_m,
    "int64_t":$tile_n,
    "int64_t":$stages,
    DefaultValuedParameter<"int64_t", "1">:$cluster_m,
    Coda_RasterOrderParameter:$raster,
    DefaultValuedParameter<"int64_t", "8">:$swizzle,
    DefaultValuedParameter<"int64_t", "0">:$max_k,
    DefaultValuedParameter<"int64_t", "0">:$wave_cost,
    DefaultValuedParameter<"int64_t", "0">:$epilogue_unroll
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let extraClassDeclaration = [{
    /// The name of the discardable attribute that holds it on a coda.gemm.
    static constexpr ::llvm::StringLiteral getAttrName() {
      return ::llvm::StringLiteral("coda.gemm_config");
    }
  }];
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

// Epilogue values bound for an output that is not a plain M x N tile. They
// carry the element type of that output and can only be yielded by coda.gemm.
class Coda_SinkType<string name, string typeMnemonic, string doc>
    : TypeDef<Coda_Dialect, name> {
  let mnemonic = typeMnemonic;
  let summary = doc;
  let parameters = (ins "::mlir::Type":$elementType);
  let assemblyFormat = "`<` $elementType `>`";
  let builders = [
    TypeBuilderWithInferredContext<(ins "::mlir::Type":$elementType), [{
      return $_get(elementType.getContext(), elementType);
    }]>
  ];
}

def Coda_PartialType : Coda_SinkType<"Partial", "partial",
    "a block reduction bound for a partials output"> {
  let description = [{
    The value of a `coda.row_reduce` or `coda.col_reduce`. Yielded by
    `coda.gemm`, it fills an output holding one partial result per row (or
    column) and per tile along the reduced axis.
  }];
}

def Coda_PairType : Coda_SinkType<"Pair", "pair",
    "one value per column pair, bound for an M x N/2 output"> {
  let description = [{
    The value of a `coda.pair_contract` (a 2 -> 1 contraction of each
    column pair; with stride 1 columns 2j and 2j + 1). Yielded by
    `coda.gemm`, it fills an M x N/2 output: pair j of block b goes to
    column b * stride + j.
  }];
}

def Coda_InterleavedType : Coda_SinkType<"Interleaved", "interleaved",
    "two values per element, bound for an M x 2N output"> {
  let description = [{
    The value of a `coda.interleave`. Yielded by `coda.gemm`, its two values
    at element (m, n) fill columns 2n and 2n + 1 of an M x 2N output: the
    inverse of a pair contraction's layout (a backward epilogue writing the
    gradients of interleaved gate / up columns).
  }];
}

def Coda_RowType : Coda_SinkType<"Row", "row",
    "one value per output row, bound for a row-vector output"> {
  let description = [{
    The value of a `coda.row_select`: per row m, the epilogue value at one
    data-dependent column. Yielded by `coda.gemm`, it fills element m of a
    row-vector output.
  }];
}

def Coda_GroupedType : Coda_SinkType<"Grouped", "grouped",
    "one value per group of the output, bound for an output of one element "
    "per group"> {
  let description = [{
    The value of a `coda.group_value`: a value that is the same over each
    group of the output (a group statistic, or what follows from it, row
    values and constants). Yielded by `coda.gemm`, it fills an output with
    one element per group: M x ceil(N / width) for groups within rows,
    ceil(M / width) x N for groups within columns (the scales of a 1 x 128
    or 128 x 1 quantization).
  }];
}

def Coda_TransposedType : Coda_SinkType<"Transposed", "transposed",
    "the element written at (n, m), bound for an N x M output"> {
  let description = [{
    The value of a `coda.transpose`. Yielded by `coda.gemm`, its value at
    element (m, n) fills element (n, m) of an [B x] N x M output: the
    token-major copy a weight gradient reads as its K-major operand, written
    by the epilogue that has the tile on chip instead of by a transpose
    kernel.
  }];
}

#endif // CODA_DIALECT_CODA_IR_CODABASE_TD
