//===- EpilogueNodes.h - epilogue inputs and outputs as nodes ---*- C++ -*-===//
//
// Each epilogue input (by its access form) and each output (by its role) is
// one node with a fixed set of hooks, which the epilogue's driver
// (Epilogue.cpp, EpilogueRow.cpp) calls in a fixed order, as CUTLASS's
// epilogue visitors are called by their tree:
//
//   per tile   input beginTile, output beginTile
//   per row    input readRow (reads the whole row shares), then
//              input stageRow (rows copied for this row), output beginRow;
//              per group run: input mapGroupRun (its slots' values), the
//              region evaluated, output narrowGroupRun, output
//              consumeGroupRun; then output endRow (stores by role)
//
// A node keeps its per-row state itself (a row's staged values, running
// partials) and reads where it lives and moves from the plan
// (EpiloguePlan.h); the builder (EpilogueBuilder.h) holds the layout and the
// memory movement every node shares. Adding a primitive is one node file in
// EpilogueNodes/, its case in makeInputNode / makeOutputNode, its plan entry
// and its tests.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_LIB_CONVERSION_CODATOGPU_EPILOGUENODES_H
#define CODA_LIB_CONVERSION_CODATOGPU_EPILOGUENODES_H

#include "EpilogueBuilder.h"

#include <memory>

namespace mlir::coda::gpu_lowering {

/// An epilogue input: the values of its block argument at each slot.
class InputNode {
public:
  InputNode(EpilogueBuilder &e, unsigned k) : e(e), k(k) {}
  virtual ~InputNode() = default;
  /// Once per tile, before its first row.
  virtual void beginTile(ImplicitLocOpBuilder &b) {}
  /// Once per row, first: the reads the whole row shares.
  virtual void readRow(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r) {}
  /// Once per row, after every input's readRow.
  virtual void stageRow(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r) {}
  /// Maps the block argument to its value at each slot of group run `gr`.
  virtual void mapGroupRun(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
                           unsigned gr) = 0;

protected:
  EpilogueBuilder &e;
  unsigned k;
};

/// An epilogue output: what it takes of each row and writes.
class OutputNode {
public:
  OutputNode(EpilogueBuilder &e, unsigned i) : e(e), i(i) {}
  virtual ~OutputNode() = default;
  /// Once per tile: the running values it carries across the tile's rows
  /// (appended to `running`).
  virtual void beginTile(ImplicitLocOpBuilder &b, SmallVector<Value> &running) {
  }
  /// Once per row, after the inputs' reads.
  virtual void beginRow(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r) {}
  /// After the region of group run `gr` is evaluated: first every output's
  /// narrowGroupRun, then every output's consumeGroupRun.
  virtual void narrowGroupRun(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
                              unsigned gr) {}
  virtual void consumeGroupRun(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
                               unsigned gr) {}
  /// Once per row, after its last group run; `running` as beginTile made it.
  virtual void endRow(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
                      MutableArrayRef<Value> running) {}

protected:
  Value yielded() const { return e.op.getYieldOp().getValues()[i]; }
  EpilogueBuilder &e;
  unsigned i;
};

/// The node of input `k` / output `i` of `e`'s GEMM.
std::unique_ptr<InputNode> makeInputNode(EpilogueBuilder &e, unsigned k);
std::unique_ptr<OutputNode> makeOutputNode(EpilogueBuilder &e, unsigned i);

// The nodes, one file each in EpilogueNodes/.
std::unique_ptr<InputNode> makeTileInput(EpilogueBuilder &e, unsigned k);
std::unique_ptr<InputNode> makeColumnInput(EpilogueBuilder &e, unsigned k);
std::unique_ptr<InputNode> makeRowInput(EpilogueBuilder &e, unsigned k);
std::unique_ptr<InputNode> makeScalarInput(EpilogueBuilder &e, unsigned k);
std::unique_ptr<InputNode> makePeriodicInput(EpilogueBuilder &e, unsigned k);
std::unique_ptr<InputNode> makePairInput(EpilogueBuilder &e, unsigned k);
std::unique_ptr<OutputNode> makeTileOutput(EpilogueBuilder &e, unsigned i);
std::unique_ptr<OutputNode> makePairOutput(EpilogueBuilder &e, unsigned i);
std::unique_ptr<OutputNode> makeInterleavedOutput(EpilogueBuilder &e,
                                                  unsigned i);
std::unique_ptr<OutputNode> makeRowPartialsOutput(EpilogueBuilder &e,
                                                  unsigned i);
std::unique_ptr<OutputNode> makeColumnPartialsOutput(EpilogueBuilder &e,
                                                     unsigned i);
std::unique_ptr<OutputNode> makeRowSelectOutput(EpilogueBuilder &e, unsigned i);
std::unique_ptr<OutputNode> makeGroupValueOutput(EpilogueBuilder &e,
                                                 unsigned i);
std::unique_ptr<OutputNode> makeColumnGroupValueOutput(EpilogueBuilder &e,
                                                       unsigned i);
std::unique_ptr<OutputNode> makeTransposedOutput(EpilogueBuilder &e,
                                                 unsigned i);

} // namespace mlir::coda::gpu_lowering

#endif // CODA_LIB_CONVERSION_CODATOGPU_EPILOGUENODES_H
