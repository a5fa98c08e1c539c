//===- DeriveBackward.cpp - backward programs of coda.gemm functions ------===//
//
// Reverse-mode differentiation of a function made of coda.gemm ops. For each
// GEMM Y_o = E_o(acc, inputs), acc = A x B, walked from the last to the first:
//
//   adjoint GEMM  recomputes acc and runs E's reverse sweep in its epilogue:
//                 dAcc = sum_o dY_o * dE_o/dacc as a tile, each tile input's
//                 gradient as a tile, each row (column) input's gradient as
//                 row (column) partials of dY * dE/dinput, then finished
//   dA = dAcc x B^T and dB = A^T x dAcc (or dAcc^T x A for an N x K rhs),
//                 reading every operand as stored (transpose_a/transpose_b)
//
// so the activations' derivatives are recomputed in an epilogue instead of
// being stored. A GEMM whose epilogue only rounds the accumulator needs no
// adjoint GEMM (dAcc = dY). Partials finished by coda.reduce_partials,
// row_select and pair outputs seed the sweep through row / pair inputs;
// elementwise linalg.generic glue between GEMMs is differentiated with the
// same scalar rules (EpilogueAdjoints).
//
//===----------------------------------------------------------------------===//

#include "EpilogueUtils.h"

#include "coda/Dialect/Coda/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/CSE.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODADERIVEBACKWARD
#include "coda/Dialect/Coda/Transforms/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// Marks a forward `coda.gemm` whose accumulator a saving derivation (save=1)
/// keeps for the adjoint instead of recomputing it (rounded to the operands'
/// type): memory for the product, e.g. an LM head's logits.
constexpr StringLiteral kSaveAccumulatorAttr = "coda.save_accumulator";
/// The prefix of a forward kernel's role (kKernelRoleAttrName).
constexpr StringLiteral kForwardRole = "forward:";

/// `v` as `type` (f32 <-> bf16/f16).
Value convertFloat(OpBuilder &b, Location loc, Value v, Type type) {
  if (v.getType() == type)
    return v;
  if (cast<FloatType>(type).getWidth() >
      cast<FloatType>(v.getType()).getWidth())
    return arith::ExtFOp::create(b, loc, type, v);
  return arith::TruncFOp::create(b, loc, type, v);
}

/// x where `d` is 1 + exp(-x) (in either operand order): the denominator of
/// the logistic function s = 1 / d, of silu x / d and of sigmoid 1 / d.
Value logisticArgument(Value d) {
  auto add = d.getDefiningOp<arith::AddFOp>();
  if (!add)
    return {};
  for (auto [one, other] : {std::pair(add.getLhs(), add.getRhs()),
                            std::pair(add.getRhs(), add.getLhs())}) {
    if (!matchPattern(one, m_OneFloat()))
      continue;
    if (auto exp = other.getDefiningOp<math::ExpOp>())
      if (auto neg = exp.getOperand().getDefiningOp<arith::NegFOp>())
        return neg.getOperand();
  }
  return {};
}

bool isFloatTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType());
}

/// Epilogue inputs that the derivative treats as constants: scalars (an
/// epsilon) and periodic tables (RoPE's cos / sin).
bool isConstantForm(AccessForm form) {
  return form == AccessForm::scalar || form == AccessForm::periodic;
}

//===----------------------------------------------------------------------===//
// The reverse sweep of one epilogue (scalars).
//===----------------------------------------------------------------------===//

/// Whether `value` is computed from a pair_map or pair_contract result (in
/// its own block).
bool dependsOnPairwiseOp(Value value) {
  SmallVector<Value> work = {value};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (!def || !seen.insert(v).second)
      continue;
    if (isa<PairMapOp, PairContractOp>(def))
      return true;
    llvm::append_range(work, def->getOperands());
  }
  return false;
}

/// Adjoints of an epilogue's scalar values, built next to a copy of it.
class EpilogueAdjoints {
public:
  EpilogueAdjoints(OpBuilder &b, Location loc, IRMapping &primal)
      : b(b), loc(loc), primal(primal) {}

  /// Adds `g` to the adjoint of `old` (a value of the original epilogue).
  void accumulate(Value old, Value g) {
    Type type = old.getType();
    // A pair_contract result's adjoint is the per-element gradient of the
    // pair (both columns of a pair see the same).
    if (auto pair = dyn_cast<PairType>(type))
      type = pair.getElementType();
    if (g.getType() != type)
      g = convert(g, type);
    auto [it, inserted] = adjoints.try_emplace(old, g);
    if (!inserted)
      it->second = arith::AddFOp::create(b, loc, it->second, g);
  }
  Value get(Value old) const { return adjoints.lookup(old); }

  /// Propagates the seeded adjoints through `block`'s ops, last to first;
  /// fails (after reporting every op without a rule) if one has none.
  LogicalResult propagateBlock(Block &block) {
    LogicalResult result = success();
    for (Operation &op : llvm::reverse(block.without_terminator()))
      if (failed(propagate(&op)))
        result = failure();
    return result;
  }

  /// Propagates the adjoint of `op`'s result to its operands; fails for ops
  /// that have no rule.
  LogicalResult propagate(Operation *op) {
    if (llvm::none_of(op->getResults(), [&](Value r) { return get(r); }))
      return success();
    if (isa<PairMapOp, PairContractOp>(op))
      return propagatePairOp(op);
    if (op->getNumResults() != 1)
      return op->emitOpError(
          "has no derivative rule in --coda-derive-backward");
    Value g = get(op->getResult(0));
    if (!g || !isa<FloatType>(g.getType()))
      return success();
    Value y = primal.lookup(op->getResult(0));
    auto in = [&](unsigned i) { return primal.lookup(op->getOperand(i)); };
    // The derivative is computed to the precision the op was: an op that
    // allows approximate functions (`afn`: a SwiGLU's exponential and
    // division) passes that flag to the arithmetic of its rule, whose
    // divisions then lower to div.approx instead of IEEE division.
    arith::FastMathFlags fastMath = arith::FastMathFlags::none;
    if (auto flags = dyn_cast<arith::ArithFastMathInterface>(op))
      if (arith::FastMathFlagsAttr attr = flags.getFastMathFlagsAttr())
        fastMath = attr.getValue() & arith::FastMathFlags::afn;
    auto mul = [&](Value x, Value z) -> Value {
      return arith::MulFOp::create(b, loc, x, z, fastMath);
    };
    auto div = [&](Value x, Value z) -> Value {
      return arith::DivFOp::create(b, loc, x, z, fastMath);
    };
    auto neg = [&](Value x) -> Value {
      return arith::NegFOp::create(b, loc, x, fastMath);
    };
    auto add = [&](Value x, Value z) -> Value {
      return arith::AddFOp::create(b, loc, x, z, fastMath);
    };
    auto constant = [&](double v) -> Value {
      return arith::ConstantOp::create(
          b, loc, b.getFloatAttr(g.getType(), v));
    };
    auto select = [&](Value cond, Value t, Value f) -> Value {
      return arith::SelectOp::create(b, loc, cond, t, f);
    };
    auto cmp = [&](arith::CmpFPredicate pred, Value x, Value z) -> Value {
      return arith::CmpFOp::create(b, loc, pred, x, z);
    };
    return TypeSwitch<Operation *, LogicalResult>(op)
        .Case<arith::AddFOp>([&](auto) {
          accumulate(op->getOperand(0), g);
          accumulate(op->getOperand(1), g);
          return success();
        })
        .Case<arith::SubFOp>([&](auto) {
          accumulate(op->getOperand(0), g);
          accumulate(op->getOperand(1), neg(g));
          return success();
        })
        .Case<arith::MulFOp>([&](auto) {
          accumulate(op->getOperand(0), mul(g, in(1)));
          accumulate(op->getOperand(1), mul(g, in(0)));
          return success();
        })
        .Case<arith::DivFOp>([&](auto) {
          // silu(x) = x / (1 + exp(-x)) and sigmoid(x) = 1 / (1 + exp(-x))
          // have closed derivatives in s = 1 / (1 + exp(-x)):
          // s (1 + x (1 - s)) and s (1 - s). Taken whole they cost one
          // reciprocal of the denominator (which the forward's quotient
          // shares) and no product with exp(-x), which overflows to inf
          // where s is 0: the chain rule through the division, the sum and
          // the exponential takes three divisions and a guarded product.
          // The denominator's other uses, if any, still propagate to x
          // through it.
          Value x = logisticArgument(op->getOperand(1));
          bool silu = x && op->getOperand(0) == x;
          bool sigmoid = x && matchPattern(op->getOperand(0), m_OneFloat());
          if (silu || sigmoid) {
            Value one = constant(1.0);
            Value s = sigmoid ? y : div(one, in(1));
            Value complement = arith::SubFOp::create(b, loc, one, s, fastMath);
            Value slope =
                silu ? mul(math::FmaOp::create(b, loc, primal.lookup(x),
                                               complement, one, fastMath),
                           s)
                     : mul(s, complement);
            accumulate(x, mul(g, slope));
            return success();
          }
          // d(a/b) = da/b - (a/b) db/b.
          accumulate(op->getOperand(0), div(g, in(1)));
          accumulate(op->getOperand(1), neg(div(mul(g, y), in(1))));
          return success();
        })
        .Case<arith::NegFOp>([&](auto) {
          accumulate(op->getOperand(0), neg(g));
          return success();
        })
        .Case<arith::MaximumFOp, arith::MaxNumFOp, arith::MinimumFOp,
              arith::MinNumFOp>([&](auto) {
          // The gradient goes to the operand that was picked (the first on
          // ties).
          bool max = isa<arith::MaximumFOp, arith::MaxNumFOp>(op);
          Value first = cmp(max ? arith::CmpFPredicate::OGE
                                : arith::CmpFPredicate::OLE,
                            in(0), in(1));
          Value zero = constant(0.0);
          accumulate(op->getOperand(0), select(first, g, zero));
          accumulate(op->getOperand(1), select(first, zero, g));
          return success();
        })
        .Case<arith::SelectOp>([&](auto) {
          Value zero = constant(0.0);
          accumulate(op->getOperand(1), select(in(0), g, zero));
          accumulate(op->getOperand(2), select(in(0), zero, g));
          return success();
        })
        .Case<arith::ExtFOp, arith::TruncFOp>([&](auto) {
          accumulate(op->getOperand(0), g);
          return success();
        })
        .Case<math::ExpOp>([&](auto) {
          accumulate(op->getOperand(0), scaleUnlessZero(g, y, fastMath));
          return success();
        })
        .Case<math::ExpM1Op>([&](auto) {
          accumulate(op->getOperand(0),
                     scaleUnlessZero(g, add(y, constant(1.0)), fastMath));
          return success();
        })
        .Case<math::LogOp>([&](auto) {
          accumulate(op->getOperand(0), div(g, in(0)));
          return success();
        })
        .Case<math::Log1pOp>([&](auto) {
          accumulate(op->getOperand(0), div(g, add(in(0), constant(1.0))));
          return success();
        })
        .Case<math::SqrtOp>([&](auto) {
          accumulate(op->getOperand(0), div(mul(g, constant(0.5)), y));
          return success();
        })
        .Case<math::RsqrtOp>([&](auto) {
          // d(a^-1/2) = -1/2 a^-3/2 da.
          accumulate(op->getOperand(0),
                     mul(mul(g, constant(-0.5)), mul(y, mul(y, y))));
          return success();
        })
        .Case<math::TanhOp>([&](auto) {
          Value one = constant(1.0);
          accumulate(
              op->getOperand(0),
              mul(g, arith::SubFOp::create(b, loc, one, mul(y, y), fastMath)));
          return success();
        })
        .Case<math::ErfOp>([&](auto) {
          // d erf(a) = 2 / sqrt(pi) exp(-a^2) da.
          Value a = in(0);
          Value e = math::ExpOp::create(b, loc, neg(mul(a, a)), fastMath);
          accumulate(op->getOperand(0),
                     mul(g, mul(e, constant(llvm::numbers::inv_sqrtpi * 2.0))));
          return success();
        })
        .Case<math::AbsFOp>([&](auto) {
          Value positive = cmp(arith::CmpFPredicate::OGE, in(0), constant(0.0));
          accumulate(op->getOperand(0), select(positive, g, neg(g)));
          return success();
        })
        .Case<math::FmaOp>([&](auto) {
          accumulate(op->getOperand(0), mul(g, in(1)));
          accumulate(op->getOperand(1), mul(g, in(0)));
          accumulate(op->getOperand(2), g);
          return success();
        })
        .Case<GroupReduceOp>([&](GroupReduceOp group) -> LogicalResult {
          // Every element of a group uses its sum, so each element's
          // adjoint is the sum of theirs: a statistic of the same groups.
          // A maximum or minimum is a constant of the backward: the amax
          // behind a quantization's scale (which the straight-through
          // estimator detaches) or a softmax's shift (which the softmax
          // does not depend on).
          if (group.getKind() != GroupStatistic::sum)
            return success();
          if (dependsOnPairwiseOp(g))
            return group.emitOpError(
                "is not differentiated by --coda-derive-backward: the "
                "gradient reaching it passes through a pairwise op, whose "
                "adjoint a group statistic cannot reduce");
          accumulate(op->getOperand(0),
                     GroupReduceOp::create(b, loc, g.getType(), g,
                                           GroupStatistic::sum, group.getAxis(),
                                           group.getWidth()));
          return success();
        })
        .Case<arith::ConstantOp, arith::SIToFPOp, arith::UIToFPOp>(
            [&](auto) { return success(); })
        .Default([&](Operation *) {
          return op->emitOpError(
              "has no derivative rule in --coda-derive-backward");
        });
  }

  /// The adjoint of a pair_map or pair_contract is a pair_map over the same
  /// pairs: its operands are the primal operands and the results' adjoints
  /// (a pair_map result's at each column; a pair_contract result's, the
  /// pair's, at both); it recomputes the forward body and yields, per float
  /// operand, the adjoints at the pair's first and second column.
  LogicalResult propagatePairOp(Operation *op) {
    ValueRange pairOperands = op->getOperands();
    Block &body = op->getRegion(0).front();
    bool contract = isa<PairContractOp>(op);
    SmallVector<Value> operands;
    for (Value operand : pairOperands)
      operands.push_back(primal.lookup(operand));
    for (Value result : op->getResults()) {
      Type type = result.getType();
      if (auto pair = dyn_cast<PairType>(type))
        type = pair.getElementType();
      Value g = get(result);
      operands.push_back(
          g ? g
            : arith::ConstantOp::create(b, loc, b.getFloatAttr(type, 0.0))
                  .getResult());
    }
    SmallVector<unsigned> differentiable;
    SmallVector<Type> resultTypes;
    for (auto [i, operand] : llvm::enumerate(pairOperands))
      if (isa<FloatType>(operand.getType())) {
        differentiable.push_back(i);
        resultTypes.push_back(operand.getType());
      }
    SmallVector<Type> argTypes;
    SmallVector<Location> argLocs;
    for (Value operand : operands) {
      argTypes.append(2, operand.getType());
      argLocs.append(2, loc);
    }
    int64_t stride = contract ? cast<PairContractOp>(op).getStride()
                              : cast<PairMapOp>(op).getStride();
    auto adjoint = PairMapOp::create(b, loc, resultTypes, operands, stride);
    LogicalResult swept = success();
    {
      OpBuilder::InsertionGuard guard(b);
      Block *pair =
          b.createBlock(&adjoint.getBody(), {}, argTypes, argLocs);
      IRMapping inner;
      for (unsigned i = 0, e = body.getNumArguments(); i < e; ++i)
        inner.map(body.getArgument(i), pair->getArgument(i));
      for (Operation &bodyOp : body.without_terminator())
        b.clone(bodyOp, inner);
      EpilogueAdjoints sweep(b, loc, inner);
      // Two block arguments per result adjoint: its value at the first and
      // the second column. A pair_map yields both; a pair_contract yields one
      // value per pair, whose adjoint both columns hold.
      ValueRange seeds = pair->getArguments().drop_front(body.getNumArguments());
      ValueRange yielded = body.getTerminator()->getOperands();
      for (auto [k, value] : llvm::enumerate(yielded)) {
        unsigned result = contract ? k : k / 2, half = contract ? 0 : k % 2;
        sweep.accumulate(value, seeds[2 * result + half]);
      }
      swept = sweep.propagateBlock(body);
      SmallVector<Value> yields;
      for (unsigned i : differentiable)
        for (unsigned half = 0; half < 2; ++half) {
          BlockArgument arg = body.getArgument(2 * i + half);
          Value g = sweep.get(arg);
          yields.push_back(g ? g
                             : arith::ConstantOp::create(
                                   b, loc, b.getFloatAttr(arg.getType(), 0.0))
                                   .getResult());
        }
      YieldOp::create(b, loc, yields);
    }
    for (auto [k, i] : llvm::enumerate(differentiable))
      accumulate(pairOperands[i], adjoint.getResult(k));
    return swept;
  }

  /// g * factor, but 0 where g is 0: an exponential that overflowed to inf
  /// meets a gradient that underflowed to 0 in saturated activations
  /// (x / (1 + exp(-x)) for very negative x), where the true product tends
  /// to 0, not NaN.
  Value scaleUnlessZero(Value g, Value factor, arith::FastMathFlags fastMath) {
    Value zero = arith::ConstantOp::create(b, loc, b.getFloatAttr(g.getType(), 0.0));
    Value isZero =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, g, zero);
    return arith::SelectOp::create(
        b, loc, isZero, zero,
        arith::MulFOp::create(b, loc, g, factor, fastMath));
  }

  /// `v` as `type` (see convertFloat).
  Value convert(Value v, Type type) { return convertFloat(b, loc, v, type); }

private:
  OpBuilder &b;
  Location loc;
  IRMapping &primal;
  DenseMap<Value, Value> adjoints;
};

//===----------------------------------------------------------------------===//
// The backward function.
//===----------------------------------------------------------------------===//

class BackwardBuilder {
public:
  BackwardBuilder(IRRewriter &rewriter, int64_t tile, bool save)
      : rewriter(rewriter), tile(tile), save(save) {}

  /// Builds `name`(f's arguments..., one gradient per result of f) ->
  /// (one gradient per differentiated argument of f) after `forward`. With
  /// `save`, f first gains results (its GEMMs' other results and the
  /// accumulators saved for the backward) that `name` takes after f's
  /// arguments.
  FailureOr<func::FuncOp> build(func::FuncOp forward, StringRef name);

private:
  /// What the backward knows of a block reduction's partials: the gradient
  /// of the finished vector and the vector itself.
  struct FinishedPartials {
    Value gradient, finished;
    ReductionKind kind;
  };

  LogicalResult check(func::FuncOp forward);
  /// With `save`: rebuilds forward `gemm` with its accumulator as extra
  /// outputs (a tile; for a pair contraction, its first and second columns
  /// as two M x N/2 outputs), rounded to the operands' type.
  GemmOp saveAccumulator(GemmOp gemm);
  /// The adjoint of `gemm` (one output) computed in the epilogue of the GEMM
  /// that produced its output's gradient, from the saved accumulator: that
  /// GEMM is rebuilt to yield dAcc (interleaved for a pair contraction).
  /// Null when the gradient does not come from such a GEMM.
  FailureOr<Value> adjointInProducer(GemmOp gemm, ValueRange savedAccumulator);
  /// dA and dB of `gemm` from dAcc.
  void differentiateOperands(GemmOp gemm, Value dAcc);
  LogicalResult differentiate(GemmOp gemm);
  LogicalResult differentiate(linalg::GenericOp generic);
  void differentiate(ReducePartialsOp reduce);
  /// Adds `g` to the adjoint of tensor `value`.
  void accumulate(Value value, Value g);
  Value emptyLike(Value shapeSource, Type elementType);
  /// `value` (a float tensor) with its elements converted to `element`.
  Value convertElements(Value value, Type element);
  /// An operand of a GEMM the backward builds, read transposed or not.
  struct Operand {
    Value value;
    bool transposed;
  };
  /// A GEMM whose epilogue rounds the accumulator to `element`, plus
  /// `addend` (a tile) when given.
  Value plainGemm(Operand lhs, Operand rhs, Type element, StringRef role,
                  Value addend = {});
  /// Adds `lhs x rhs` to the adjoint of `value`, inside the GEMM's epilogue
  /// when there is one already (no separate elementwise pass).
  void accumulateGemm(Value value, Operand lhs, Operand rhs, Type element,
                      StringRef role);
  /// Names `op` (a kernel of the backward) by `role` (kKernelRoleAttrName).
  void setRole(Operation *op, const Twine &role) {
    op->setAttr(kKernelRoleAttrName, rewriter.getStringAttr(role));
  }
  /// "gemm<j>": the forward GEMM that backward copy `gemm` recomputes (its
  /// role "forward:gemm<j>", which the copy carries from the forward).
  static StringRef forwardName(GemmOp gemm) {
    auto role = gemm->getAttrOfType<StringAttr>(kKernelRoleAttrName);
    return role ? role.getValue().drop_front(kForwardRole.size())
                : StringRef();
  }
  Value zerosLike(Value value);
  /// Partials of one per `tile` columns (rows) of an M x N output.
  Value partialsDestination(GemmOp gemm, bool rows);
  SmallVector<OpFoldResult> outputSizes(GemmOp gemm);
  SmallVector<OpFoldResult> outputSizes(Operand lhs, Operand rhs);

  IRRewriter &rewriter;
  int64_t tile;
  bool save;
  DenseMap<Value, Value> adjoints;
  /// Backward copies of forward GEMMs whose accumulator the forward saves:
  /// their results after the first (replaced by the saved arguments at the
  /// end).
  DenseSet<Operation *> savingAccumulator;
  /// Backward copies of forward GEMMs marked kSaveAccumulatorAttr: their
  /// last result is the saved accumulator, which their adjoint reads instead
  /// of the product.
  DenseSet<Operation *> readingSavedAccumulator;
  /// Backward copies of forward GEMMs whose saved tile outputs their
  /// adjoint reads in place of the product (outputsStandIn).
  DenseSet<Operation *> readingOutputs;
  DenseMap<Value, FinishedPartials> finishedPartials;
};

/// An elementwise linalg.generic the backward can differentiate: parallel
/// loops, identity output maps, projected-permutation input maps.
bool isDifferentiableGeneric(linalg::GenericOp generic) {
  if (!isElementwise(generic) || !hasOnlyEpilogueComputeOps(
                                     *generic.getBlock(), /*allowIndex=*/false))
    return false;
  for (OpOperand &init : generic.getDpsInitsMutable())
    if (!generic.getMatchingIndexingMap(&init).isIdentity())
      return false;
  return llvm::all_of(generic.getDpsInputOperands(), [&](OpOperand *input) {
    return generic.getMatchingIndexingMap(input).isProjectedPermutation();
  });
}

LogicalResult BackwardBuilder::check(func::FuncOp forward) {
  WalkResult result = forward.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (isa<func::FuncOp, func::ReturnOp, tensor::EmptyOp, arith::ConstantOp>(
            op))
      return WalkResult::advance();
    if (isa<linalg::FillOp>(op))
      return WalkResult::skip();
    // Shape arithmetic (tensor.dim, index math) has nothing to differentiate.
    if (op->getNumRegions() == 0 && op->getNumResults() > 0 &&
        llvm::all_of(op->getResultTypes(),
                     [](Type t) { return t.isIntOrIndex(); }))
      return WalkResult::advance();
    if (auto reduce = dyn_cast<ReducePartialsOp>(op)) {
      if (reduce.getKind() == ReductionKind::max) {
        reduce.emitOpError("max partials are not differentiated by "
                           "--coda-derive-backward");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    }
    if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
      if (!isDifferentiableGeneric(generic)) {
        generic.emitOpError("is not differentiated by --coda-derive-backward "
                            "(elementwise generics with broadcast inputs "
                            "only)");
        return WalkResult::interrupt();
      }
      return WalkResult::skip();
    }
    auto gemm = dyn_cast<GemmOp>(op);
    if (!gemm) {
      op->emitOpError("is not differentiated by --coda-derive-backward (it "
                      "takes functions of coda.gemm, coda.reduce_partials and "
                      "elementwise linalg.generic ops on tensors)");
      return WalkResult::interrupt();
    }
    if (!gemm.getResults().size() || gemm.isBatched()) {
      gemm.emitOpError("--coda-derive-backward takes unbatched coda.gemm on "
                       "tensors");
      return WalkResult::interrupt();
    }
    for (auto [result, yielded] :
         llvm::zip(gemm->getResults(), gemm.getYieldOp().getValues())) {
      if (isa<InterleavedType, TransposedType>(yielded.getType())) {
        gemm.emitOpError(isa<InterleavedType>(yielded.getType())
                             ? "interleaved output "
                             : "transposed output ")
            << result.getResultNumber()
            << " is not differentiated by --coda-derive-backward";
        return WalkResult::interrupt();
      }
      if (!isa<PartialType>(yielded.getType()))
        continue;
      // Partials: the backward of their finish is known, so they must be
      // finished by one coda.reduce_partials of the same kind and axis.
      auto reduce = dyn_cast_or_null<ReducePartialsOp>(
          result.hasOneUse() ? *result.getUsers().begin() : nullptr);
      Operation *def = yielded.getDefiningOp();
      bool rows = isa<RowReduceOp>(def);
      ReductionKind kind = rows ? cast<RowReduceOp>(def).getKind()
                                : cast<ColReduceOp>(def).getKind();
      if (!reduce || reduce.getPartials() != result ||
          reduce.getKind() != kind ||
          reduce.getAxis() != (rows ? ReductionAxis::row : ReductionAxis::col)) {
        gemm.emitOpError("partials output ")
            << result.getResultNumber()
            << " must be finished by one coda.reduce_partials of the same "
               "kind and axis to be differentiated";
        return WalkResult::interrupt();
      }
    }
    return WalkResult::skip();
  });
  return failure(result.wasInterrupted());
}

Value BackwardBuilder::emptyLike(Value shapeSource, Type elementType) {
  Location loc = shapeSource.getLoc();
  SmallVector<OpFoldResult> sizes =
      tensor::getMixedSizes(rewriter, loc, shapeSource);
  return tensor::EmptyOp::create(rewriter, loc, sizes, elementType);
}

Value BackwardBuilder::convertElements(Value value, Type element) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getElementType() == element)
    return value;
  Location loc = value.getLoc();
  AffineMap identity = rewriter.getMultiDimIdentityMap(type.getRank());
  SmallVector<utils::IteratorType> iterators(type.getRank(),
                                             utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             rewriter, loc, TypeRange{type.clone(element)}, ValueRange{value},
             ValueRange{emptyLike(value, element)},
             ArrayRef<AffineMap>{identity, identity}, iterators,
             [&](OpBuilder &b, Location l, ValueRange args) {
               linalg::YieldOp::create(
                   b, l, convertFloat(b, l, args[0], element));
             })
      .getResult(0);
}

Value BackwardBuilder::zerosLike(Value value) {
  Location loc = value.getLoc();
  auto type = cast<RankedTensorType>(value.getType());
  Value zero = arith::ConstantOp::create(
      rewriter, loc, rewriter.getFloatAttr(type.getElementType(), 0.0));
  return linalg::FillOp::create(rewriter, loc, zero,
                                emptyLike(value, type.getElementType()))
      .getResult(0);
}

SmallVector<OpFoldResult> BackwardBuilder::outputSizes(GemmOp gemm) {
  return outputSizes({gemm.getLhs(), gemm.getTransposeA()},
                     {gemm.getRhs(), gemm.getTransposeB()});
}

SmallVector<OpFoldResult> BackwardBuilder::outputSizes(Operand lhs,
                                                       Operand rhs) {
  Location loc = lhs.value.getLoc();
  return {tensor::getMixedSize(rewriter, loc, lhs.value, lhs.transposed ? 1 : 0),
          tensor::getMixedSize(rewriter, loc, rhs.value, rhs.transposed ? 0 : 1)};
}

Value BackwardBuilder::partialsDestination(GemmOp gemm, bool rows) {
  Location loc = gemm.getLoc();
  SmallVector<OpFoldResult> sizes = outputSizes(gemm);
  OpFoldResult &split = sizes[rows ? 1 : 0];
  if (auto v = getConstantIntValue(split)) {
    split = rewriter.getIndexAttr(llvm::divideCeil(*v, tile));
  } else {
    split = arith::CeilDivUIOp::create(
                rewriter, loc, cast<Value>(split),
                arith::ConstantIndexOp::create(rewriter, loc, tile))
                .getResult();
  }
  return tensor::EmptyOp::create(rewriter, loc, sizes, rewriter.getF32Type());
}

Value BackwardBuilder::plainGemm(Operand lhs, Operand rhs, Type element,
                                 StringRef role, Value addend) {
  Location loc = lhs.value.getLoc();
  Value init =
      tensor::EmptyOp::create(rewriter, loc, outputSizes(lhs, rhs), element);
  SmallVector<EpilogueInput> inputs;
  if (addend)
    inputs.push_back({addend, AccessForm::tile});
  GemmOp gemm = createGemm(
      rewriter, loc, lhs.value, rhs.value, lhs.transposed, rhs.transposed,
      inputs, ValueRange{init}, [&](OpBuilder &b, Block &body) {
        Value acc = body.getArgument(0);
        if (addend) {
          Value extra = body.getArgument(1);
          if (extra.getType() != acc.getType())
            extra = arith::ExtFOp::create(b, loc, acc.getType(), extra);
          acc = arith::AddFOp::create(b, loc, acc, extra);
        }
        if (element != acc.getType())
          acc = arith::TruncFOp::create(b, loc, element, acc);
        return SmallVector<Value>{acc};
      });
  setRole(gemm, role);
  return gemm.getResult(0);
}

void BackwardBuilder::accumulateGemm(Value value, Operand lhs, Operand rhs,
                                     Type element, StringRef role) {
  Value previous = adjoints.lookup(value);
  if (previous && getElementTypeOrSelf(previous.getType()) == element) {
    adjoints[value] = plainGemm(lhs, rhs, element, role, previous);
    return;
  }
  accumulate(value, plainGemm(lhs, rhs, element, role));
}

void BackwardBuilder::accumulate(Value value, Value g) {
  auto [it, inserted] = adjoints.try_emplace(value, g);
  if (inserted)
    return;
  Location loc = value.getLoc();
  auto type = cast<RankedTensorType>(g.getType());
  Value init = emptyLike(g, type.getElementType());
  it->second = linalg::AddOp::create(rewriter, loc, ValueRange{it->second, g},
                                     ValueRange{init})
                   .getResult(0);
}

/// True when `value` (of an epilogue) can change a value the epilogue
/// yields through float arithmetic: an input that only decides a select or a
/// comparison (a mask, a flag) has no gradient and gets no output.
bool reachesYieldedFloat(Value value) {
  SmallVector<Value> work = {value};
  DenseSet<Value> seen;
  auto carriesValue = [](Type type) {
    return isa<FloatType, PairType, PartialType, RowType>(type);
  };
  while (!work.empty()) {
    Value current = work.pop_back_val();
    if (!seen.insert(current).second)
      continue;
    for (OpOperand &use : current.getUses()) {
      Operation *user = use.getOwner();
      if (isa<YieldOp>(user)) {
        // The epilogue's own yield, or a pair op's: its results carry it.
        Operation *parent = user->getParentOp();
        if (isa<GemmOp>(parent))
          return true;
        unsigned index = use.getOperandNumber();
        bool contract = isa<PairContractOp>(parent);
        work.push_back(parent->getResult(contract ? index : index / 2));
        continue;
      }
      if (isa<PairMapOp, PairContractOp>(user)) {
        // Into the region: the operand's two block arguments.
        Block &body = user->getRegion(0).front();
        work.push_back(body.getArgument(2 * use.getOperandNumber()));
        work.push_back(body.getArgument(2 * use.getOperandNumber() + 1));
        continue;
      }
      if (auto select = dyn_cast<arith::SelectOp>(user))
        if (use.getOperandNumber() == 0)
          continue;
      for (Value result : user->getResults())
        if (carriesValue(result.getType()))
          work.push_back(result);
    }
  }
  return false;
}

/// `v` before the truncations that end an epilogue: dY is seeded there in
/// f32 where the GEMM computing it has it in f32.
Value beforeRounding(Value v) {
  while (auto cast = v.getDefiningOp<arith::TruncFOp>())
    v = cast.getIn();
  return v;
}

/// True when `gemm`'s epilogue yields the accumulator, at most rounded.
bool roundsAccumulatorOnly(GemmOp gemm) {
  ValueRange yielded = gemm.getYieldOp().getValues();
  if (yielded.size() != 1)
    return false;
  return beforeRounding(yielded[0]) == gemm.getAccumulatorArg();
}

/// True when `gemm`'s epilogue can be differentiated, from a saved
/// accumulator, in the epilogue of the GEMM that produces its output's
/// gradient: its one output is only the (non-transposed) lhs of a later
/// GEMM, so that gradient is exactly `dAcc' x B'^T`, one GEMM per column of
/// the output; the epilogue is elementwise with constant inputs only, or one
/// stride-1 pair contraction of the accumulator (interleaved SwiGLU), whose
/// gate / up gradients that GEMM writes interleaved.
bool canDifferentiateInProducer(GemmOp gemm) {
  if (gemm->getNumResults() != 1 || roundsAccumulatorOnly(gemm))
    return false;
  Value result = gemm->getResult(0);
  if (!result.hasOneUse())
    return false;
  auto consumer = dyn_cast<GemmOp>(*result.getUsers().begin());
  if (!consumer || consumer.getLhs() != result || consumer.getTransposeA())
    return false;
  Value yielded = gemm.getYieldOp().getValues()[0];
  if (auto contract = yielded.getDefiningOp<PairContractOp>()) {
    // The accumulator first; row inputs after it (a deferred norm's row
    // scale), used nowhere else: their gradients become row partials of
    // the producer.
    ValueRange operands = contract.getPairOperands();
    if (contract.getStride() != 1 || contract->getNumResults() != 1 ||
        operands.empty() || operands[0] != gemm.getAccumulatorArg() ||
        !gemm.getAccumulatorArg().hasOneUse())
      return false;
    for (unsigned i = 0, e = gemm.getEpilogueInputs().size(); i < e; ++i) {
      BlockArgument arg = gemm.getInputArg(i);
      if (gemm.getInputForm(i) != AccessForm::row ||
          !isa<FloatType>(arg.getType()) ||
          !llvm::all_of(arg.getUsers(), [&](Operation *user) {
            return user == contract.getOperation();
          }))
        return false;
    }
    return operands.size() == 1 + gemm.getEpilogueInputs().size();
  }
  if (!isa<FloatType>(yielded.getType()))
    return false;
  for (unsigned i = 0, e = gemm.getEpilogueInputs().size(); i < e; ++i)
    if (!isConstantForm(gemm.getInputForm(i)))
      return false;
  return true;
}

/// The values `gemm`'s tile outputs round (before their truncations).
SmallVector<std::pair<unsigned, Value>> roundedOutputs(GemmOp gemm) {
  SmallVector<std::pair<unsigned, Value>> outputs;
  for (auto [i, value] : llvm::enumerate(gemm.getYieldOp().getValues()))
    if (isa<FloatType>(value.getType()))
      outputs.push_back({static_cast<unsigned>(i), beforeRounding(value)});
  return outputs;
}

/// True when the adjoint of `gemm`'s epilogue needs the accumulator only
/// through the values its tile outputs round, so that, reading the outputs
/// (saved, as autograd saves a result) in their place, it reads no product:
/// every op between the accumulator and those values is linear in it (add,
/// sub, neg, casts, a product with a constant, a sum reduction), whose
/// derivative needs no value of the accumulator's side. A residual add with
/// the sums of squares of its result (the next RMSNorm's statistic) is one.
bool outputsStandIn(GemmOp gemm) {
  if (gemm->getNumResults() == 0 || roundsAccumulatorOnly(gemm))
    return false;
  DenseSet<Value> standIns;
  for (auto [index, value] : roundedOutputs(gemm))
    standIns.insert(value);
  if (standIns.empty())
    return false;
  // Values derived from the accumulator, other than the stand-ins; and
  // values that vary with a differentiated input (whose gradient through a
  // product would need the other factor).
  DenseSet<Value> derived = {gemm.getAccumulatorArg()}, varying;
  for (unsigned i = 0, e = gemm.getEpilogueInputs().size(); i < e; ++i)
    if (!isConstantForm(gemm.getInputForm(i)))
      varying.insert(gemm.getInputArg(i));
  for (Operation &op : gemm.getBody().without_terminator()) {
    unsigned fromAcc = 0;
    bool varies = false;
    for (Value operand : op.getOperands()) {
      fromAcc += derived.contains(operand);
      varies |= varying.contains(operand) || derived.contains(operand) ||
                standIns.contains(operand);
    }
    if (varies)
      for (Value result : op.getResults())
        varying.insert(result);
    if (!fromAcc)
      continue;
    bool linear =
        TypeSwitch<Operation *, bool>(&op)
            .Case<arith::AddFOp, arith::SubFOp, arith::NegFOp, arith::ExtFOp,
                  arith::TruncFOp>([](Operation *) { return true; })
            .Case<arith::MulFOp>([&](arith::MulFOp mul) {
              Value other =
                  derived.contains(mul.getLhs()) ? mul.getRhs() : mul.getLhs();
              return fromAcc == 1 && !varying.contains(other);
            })
            .Case<RowReduceOp, ColReduceOp>([](auto reduce) {
              return reduce.getKind() == ReductionKind::sum;
            })
            .Default([](Operation *) { return false; });
    if (!linear)
      return false;
    for (Value result : op.getResults())
      if (!standIns.contains(result))
        derived.insert(result);
  }
  return true;
}

void BackwardBuilder::differentiate(ReducePartialsOp reduce) {
  if (Value g = adjoints.lookup(reduce.getResult()))
    finishedPartials[reduce.getPartials()] = {g, reduce.getResult(),
                                              reduce.getKind()};
}

LogicalResult BackwardBuilder::differentiate(GemmOp gemm) {
  Location loc = gemm.getLoc();
  // After everything so far: the seeds come from later ops' backward.
  rewriter.setInsertionPointToEnd(gemm->getBlock());
  if (savingAccumulator.contains(gemm)) {
    if (!adjoints.lookup(gemm->getResult(0)))
      return success();
    FailureOr<Value> dAcc =
        adjointInProducer(gemm, gemm->getResults().drop_front());
    if (failed(dAcc))
      return failure();
    if (*dAcc) {
      differentiateOperands(gemm, *dAcc);
      return success();
    }
  }
  Value lhs = gemm.getLhs(), rhs = gemm.getRhs();
  Type operandElement = gemm.getLhsType().getElementType();
  bool transposeB = gemm.getTransposeB();

  // What flows back into the epilogue, per output: a tile gradient (tile),
  // the finished vector's gradient and the vector (partials), the gradient
  // of the selected values (row_select). Outputs nobody uses contribute 0.
  struct Seed {
    unsigned output;
    SmallVector<unsigned> args; // indices among the added inputs
  };
  SmallVector<Seed> seeds;
  SmallVector<EpilogueInput> added;
  ValueRange yielded = gemm.getYieldOp().getValues();
  for (OpResult result : gemm->getResults()) {
    Value value = yielded[result.getResultNumber()];
    Seed seed{result.getResultNumber(), {}};
    // Values written once per group (a quantization's scales) are constants
    // of the backward, as the straight-through estimator treats scales.
    if (isa<GroupedType>(value.getType()))
      continue;
    if (isa<PartialType>(value.getType())) {
      auto it = finishedPartials.find(result);
      if (it == finishedPartials.end())
        continue;
      AccessForm form = isa<RowReduceOp>(value.getDefiningOp())
                            ? AccessForm::row
                            : AccessForm::col;
      seed.args.push_back(added.size());
      added.push_back({it->second.gradient, form});
      if (it->second.kind == ReductionKind::logsumexp) {
        seed.args.push_back(added.size());
        added.push_back({it->second.finished, form});
      }
    } else if (Value g = adjoints.lookup(result)) {
      seed.args.push_back(added.size());
      AccessForm form = AccessForm::tile;
      if (isa<RowType>(value.getType()))
        form = AccessForm::row;
      else if (isa<PairType>(value.getType()))
        form = AccessForm::pair;
      added.push_back({g, form});
    } else {
      continue;
    }
    seeds.push_back(seed);
  }
  if (seeds.empty())
    return success();

  Value dAcc;
  Value firstSeed = added[0].value;
  if (roundsAccumulatorOnly(gemm) &&
      getElementTypeOrSelf(firstSeed.getType()) == operandElement) {
    dAcc = firstSeed;
  } else {
    // The adjoint GEMM: destinations for dAcc, then per input its gradient
    // (tile: a tile; row / column: partials).
    SmallVector<Value> outputs = {tensor::EmptyOp::create(
        rewriter, loc, outputSizes(gemm), operandElement)};
    SmallVector<std::pair<unsigned, AccessForm>> inputGradients;
    ValueRange inputs = gemm.getEpilogueInputs();
    for (unsigned i = 0, e = inputs.size(); i < e; ++i) {
      AccessForm form = gemm.getInputForm(i);
      if (!isFloatTensor(inputs[i].getType()) || isConstantForm(form) ||
          !reachesYieldedFloat(gemm.getInputArg(i)))
        continue;
      if (form == AccessForm::pair)
        return gemm.emitOpError("pair input ")
               << i << " is not differentiated by --coda-derive-backward";
      inputGradients.push_back({i, form});
      if (form == AccessForm::tile)
        outputs.push_back(
            emptyLike(inputs[i], getElementTypeOrSelf(inputs[i].getType())));
      else
        outputs.push_back(
            partialsDestination(gemm, form == AccessForm::row));
    }

    // A saved accumulator (the forward's last output) stands for the
    // product: the adjoint's own accumulator is then unread, and the
    // kernel is its epilogue alone.
    std::optional<unsigned> savedIndex;
    if (readingSavedAccumulator.contains(gemm)) {
      savedIndex = added.size();
      added.push_back({gemm->getResults().back(), AccessForm::tile});
    }
    // Saved outputs stand for the values they round (outputsStandIn).
    SmallVector<std::pair<Value, unsigned>> standIns;
    if (readingOutputs.contains(gemm))
      for (auto [index, value] : roundedOutputs(gemm)) {
        standIns.push_back({value, static_cast<unsigned>(added.size())});
        added.push_back({gemm->getResult(index), AccessForm::tile});
      }
    auto readSaved = [&](OpBuilder &b, Value, ValueRange addedArgs) -> Value {
      return convertFloat(b, loc, addedArgs[*savedIndex], b.getF32Type());
    };
    LogicalResult swept = success();
    GemmOp adjoint = rebuildGemm(
        rewriter, gemm, lhs, rhs, transposeB, added, outputs,
        [&](OpBuilder &b, IRMapping &mapping,
            ValueRange addedArgs) -> SmallVector<Value> {
          for (auto [value, index] : standIns)
            mapping.map(
                value, convertFloat(b, loc, addedArgs[index], value.getType()));
          EpilogueAdjoints sweep(b, loc, mapping);
          for (const Seed &seed : seeds) {
            Value value = yielded[seed.output];
            Operation *def = value.getDefiningOp();
            Value g = addedArgs[seed.args[0]];
            if (auto select = dyn_cast_or_null<RowSelectOp>(def)) {
              // Only the selected column gets the row's gradient.
              Value column = mapping.lookup(select.getColumn());
              if (!column.getType().isIndex())
                column = arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                                    column);
              Value hit = arith::CmpIOp::create(
                  b, loc, arith::CmpIPredicate::eq,
                  ColIndexOp::create(b, loc), column);
              Value zero = arith::ConstantOp::create(
                  b, loc, b.getFloatAttr(g.getType(), 0.0));
              sweep.accumulate(select.getValue(),
                               arith::SelectOp::create(b, loc, hit, g, zero));
              continue;
            }
            if (isa_and_nonnull<RowReduceOp, ColReduceOp>(def)) {
              // sum: every summand gets the total's gradient; logsumexp:
              // its softmax weight exp(v - lse) of it, an exponential of a
              // value at most 0 that allows approximation (afn), as the
              // forward's log-sum-exp takes its exponentials in GPU
              // kernels (ex2.approx).
              Value summand = def->getOperand(0);
              Value v = mapping.lookup(summand);
              g = sweep.convert(g, v.getType());
              if (seed.args.size() > 1) {
                Value lse =
                    sweep.convert(addedArgs[seed.args[1]], v.getType());
                Value weight = math::ExpOp::create(
                    b, loc, arith::SubFOp::create(b, loc, v, lse),
                    arith::FastMathFlags::afn);
                g = arith::MulFOp::create(b, loc, g, weight);
              }
              sweep.accumulate(summand, g);
              continue;
            }
            sweep.accumulate(value, g);
          }
          swept = sweep.propagateBlock(gemm.getBody());
          auto gradientOf = [&](Value old, Type type) -> Value {
            Value g = sweep.get(old);
            if (!g)
              return arith::ConstantOp::create(b, loc,
                                               b.getFloatAttr(type, 0.0));
            return sweep.convert(g, type);
          };
          SmallVector<Value> results = {
              gradientOf(gemm.getAccumulatorArg(), operandElement)};
          for (auto [index, form] : inputGradients) {
            BlockArgument arg = gemm.getInputArg(index);
            if (form == AccessForm::tile) {
              results.push_back(gradientOf(arg, arg.getType()));
              continue;
            }
            Value g = gradientOf(arg, b.getF32Type());
            results.push_back(
                form == AccessForm::row
                    ? RowReduceOp::create(b, loc, g, ReductionKind::sum, tile)
                          .getResult()
                    : ColReduceOp::create(b, loc, g, ReductionKind::sum, tile)
                          .getResult());
          }
          return results;
        },
        savedIndex ? AccumulatorTransform(readSaved) : AccumulatorTransform());
    if (failed(swept))
      return failure();
    setRole(adjoint, "adjoint:" + forwardName(gemm));
    dAcc = adjoint.getResult(0);
    for (auto [k, entry] : llvm::enumerate(inputGradients)) {
      auto [index, form] = entry;
      Value input = inputs[index];
      Value g = adjoint.getResult(k + 1);
      if (form != AccessForm::tile) {
        // The partials are f32 whatever the input's type; so is the
        // gradient they finish into (a bf16 bias's gradient stays f32).
        bool rows = form == AccessForm::row;
        auto finish = ReducePartialsOp::create(
            rewriter, loc, g, emptyLike(input, rewriter.getF32Type()),
            ReductionKind::sum, rows ? ReductionAxis::row : ReductionAxis::col);
        setRole(finish, "grad:" + forwardName(gemm) + ".input" + Twine(index));
        g = finish.getResult();
      }
      accumulate(input, g);
    }
  }

  differentiateOperands(gemm, dAcc);
  return success();
}

void BackwardBuilder::differentiateOperands(GemmOp gemm, Value dAcc) {
  Value lhs = gemm.getLhs(), rhs = gemm.getRhs();
  Type operandElement = gemm.getLhsType().getElementType();
  bool transposeB = gemm.getTransposeB();
  // dA = dAcc x B^T; dB = A^T x dAcc (K x N rhs) or dAcc^T x A (N x K rhs).
  // With op(X) = X^T where X is read transposed: acc = op(A) op(B), so
  // d op(A) = dAcc op(B)^T and d op(B) = op(A)^T dAcc; each is computed in
  // the layout of A (B) itself by swapping the product's sides when that
  // operand is stored transposed. The operands are read as stored: no
  // transposes are materialized.
  bool transposeA = gemm.getTransposeA();
  std::string lhsRole = ("grad:" + forwardName(gemm) + ".lhs").str();
  std::string rhsRole = ("grad:" + forwardName(gemm) + ".rhs").str();
  if (!transposeA) // dA = dAcc op(B)^T
    accumulateGemm(lhs, {dAcc, false}, {rhs, !transposeB}, operandElement,
                   lhsRole);
  else // dA = op(B) dAcc^T
    accumulateGemm(lhs, {rhs, transposeB}, {dAcc, true}, operandElement,
                   lhsRole);
  if (!transposeB) // dB = op(A)^T dAcc
    accumulateGemm(rhs, {lhs, !transposeA}, {dAcc, false}, operandElement,
                   rhsRole);
  else // dB = dAcc^T op(A)
    accumulateGemm(rhs, {dAcc, true}, {lhs, transposeA}, operandElement,
                   rhsRole);
}

GemmOp BackwardBuilder::saveAccumulator(GemmOp gemm) {
  Location loc = gemm.getLoc();
  rewriter.setInsertionPoint(gemm);
  Type element = gemm.getLhsType().getElementType();
  Type f32 = rewriter.getF32Type();
  auto contract =
      gemm.getYieldOp().getValues()[0].getDefiningOp<PairContractOp>();
  SmallVector<Value> outputs(gemm.getOutputs());
  if (contract)
    for (int half = 0; half < 2; ++half)
      outputs.push_back(emptyLike(gemm.getOutputs()[0], element));
  else
    outputs.push_back(
        tensor::EmptyOp::create(rewriter, loc, outputSizes(gemm), element));
  auto round = [&](OpBuilder &b, Value v) -> Value {
    return element == f32 ? v : arith::TruncFOp::create(b, loc, element, v);
  };
  GemmOp saved = rebuildGemm(
      rewriter, gemm, gemm.getLhs(), gemm.getRhs(), gemm.getTransposeB(), {},
      outputs, [&](OpBuilder &b, IRMapping &mapping, ValueRange) {
        SmallVector<Value> yields;
        for (Value v : gemm.getYieldOp().getValues())
          yields.push_back(mapping.lookup(v));
        Value acc = mapping.lookup(gemm.getAccumulatorArg());
        if (!contract) {
          yields.push_back(round(b, acc));
          return yields;
        }
        // The gate (first) and up (second) columns of each pair.
        for (unsigned half = 0; half < 2; ++half) {
          OpBuilder::InsertionGuard guard(b);
          auto column = PairContractOp::create(
              b, loc, TypeRange{PairType::get(element)}, ValueRange{acc},
              /*stride=*/1);
          Block *pair = b.createBlock(&column.getBody(), {}, {f32, f32},
                                      {loc, loc});
          YieldOp::create(b, loc, round(b, pair->getArgument(half)));
          yields.push_back(column.getResult(0));
        }
        return yields;
      });
  if (Attribute role = gemm->getAttr(kKernelRoleAttrName))
    saved->setAttr(kKernelRoleAttrName, role);
  rewriter.replaceOp(gemm,
                     saved->getResults().take_front(gemm->getNumResults()));
  return saved;
}

FailureOr<Value> BackwardBuilder::adjointInProducer(GemmOp gemm,
                                                    ValueRange savedAccumulator) {
  Value dY = adjoints.lookup(gemm->getResult(0));
  auto producer = dY.getDefiningOp<GemmOp>();
  if (!producer || !dY.use_empty() || !roundsAccumulatorOnly(producer) ||
      !producer.getEpilogueInputs().empty())
    return Value();
  Location loc = gemm.getLoc();
  Type element = gemm.getLhsType().getElementType();
  Type f32 = rewriter.getF32Type();
  Value yielded = gemm.getYieldOp().getValues()[0];
  auto contract = yielded.getDefiningOp<PairContractOp>();

  rewriter.setInsertionPointAfter(producer);
  SmallVector<OpFoldResult> sizes = outputSizes(producer);
  if (contract) {
    // Two columns of dAcc per column of dY.
    if (auto n = getConstantIntValue(sizes[1]))
      sizes[1] = rewriter.getIndexAttr(2 * *n);
    else
      sizes[1] = arith::MulIOp::create(
                     rewriter, loc, cast<Value>(sizes[1]),
                     arith::ConstantIndexOp::create(rewriter, loc, 2))
                     .getResult();
  }
  SmallVector<Value> outputs = {
      tensor::EmptyOp::create(rewriter, loc, sizes, element)};
  if (contract)
    for (unsigned i = 0, e = gemm.getEpilogueInputs().size(); i < e; ++i)
      outputs.push_back(partialsDestination(producer, /*rows=*/true));
  SmallVector<EpilogueInput> inputs;
  for (Value saved : savedAccumulator)
    inputs.push_back({saved, AccessForm::tile});
  for (unsigned i = 0, e = gemm.getEpilogueInputs().size(); i < e; ++i)
    inputs.push_back({gemm.getEpilogueInputs()[i], gemm.getInputForm(i)});
  LogicalResult swept = success();
  // The epilogue's own accumulator is dY; the forward accumulator comes
  // from the saved inputs.
  GemmOp fused = createGemm(
      rewriter, loc, producer.getLhs(), producer.getRhs(),
      producer.getTransposeA(), producer.getTransposeB(), inputs, outputs,
      [&](OpBuilder &b, Block &body) {
        Value dYArg = body.getArgument(0);
        ValueRange savedArgs =
            body.getArguments().slice(1, savedAccumulator.size());
        IRMapping mapping;
        EpilogueAdjoints sweep(b, loc, mapping);
        auto gradientOf = [&](Value old) -> Value {
          Value g = sweep.get(old);
          if (!g)
            return arith::ConstantOp::create(b, loc,
                                             b.getFloatAttr(element, 0.0));
          return sweep.convert(g, element);
        };
        if (contract) {
          Block &pair = contract.getBody().front();
          mapping.map(pair.getArgument(0), sweep.convert(savedArgs[0], f32));
          mapping.map(pair.getArgument(1), sweep.convert(savedArgs[1], f32));
          // A row input has the same value at both columns of a pair.
          ValueRange inputArgs =
              body.getArguments().drop_front(1 + savedAccumulator.size());
          for (unsigned i = 0, e = inputArgs.size(); i < e; ++i) {
            mapping.map(pair.getArgument(2 + 2 * i), inputArgs[i]);
            mapping.map(pair.getArgument(3 + 2 * i), inputArgs[i]);
          }
          for (Operation &op : pair.without_terminator())
            b.clone(op, mapping);
          sweep.accumulate(
              beforeRounding(pair.getTerminator()->getOperand(0)), dYArg);
          swept = sweep.propagateBlock(pair);
          SmallVector<Value> results = {
              InterleaveOp::create(b, loc, InterleavedType::get(element),
                                   gradientOf(pair.getArgument(0)),
                                   gradientOf(pair.getArgument(1)))};
          // Each row input's gradient, summed over the pair's two columns
          // and over the row: row partials of this GEMM's columns.
          for (unsigned i = 0, e = inputArgs.size(); i < e; ++i) {
            Value first = sweep.get(pair.getArgument(2 + 2 * i));
            Value second = sweep.get(pair.getArgument(3 + 2 * i));
            Value g = first && second
                          ? arith::AddFOp::create(b, loc, first, second)
                          : (first ? first : second);
            if (!g)
              g = arith::ConstantOp::create(b, loc, b.getFloatAttr(f32, 0.0));
            results.push_back(RowReduceOp::create(b, loc, sweep.convert(g, f32),
                                                  ReductionKind::sum, tile)
                                  .getResult());
          }
          return results;
        }
        mapping.map(gemm.getAccumulatorArg(), sweep.convert(savedArgs[0], f32));
        for (unsigned i = 0, e = gemm.getEpilogueInputs().size(); i < e; ++i)
          mapping.map(gemm.getInputArg(i),
                      body.getArgument(1 + savedAccumulator.size() + i));
        for (Operation &op : gemm.getBody().without_terminator())
          b.clone(op, mapping);
        sweep.accumulate(beforeRounding(yielded), dYArg);
        swept = sweep.propagateBlock(gemm.getBody());
        return SmallVector<Value>{gradientOf(gemm.getAccumulatorArg())};
      });
  if (failed(swept))
    return failure();
  setRole(fused, "adjoint:" + forwardName(gemm));
  if (contract)
    for (auto [i, input] : llvm::enumerate(gemm.getEpilogueInputs())) {
      auto finish = ReducePartialsOp::create(
          rewriter, loc, fused.getResult(1 + i), emptyLike(input, f32),
          ReductionKind::sum, ReductionAxis::row);
      setRole(finish, "grad:" + forwardName(gemm) + ".input" + Twine(i));
      accumulate(input, finish.getResult());
    }
  return fused.getResult(0);
}

LogicalResult BackwardBuilder::differentiate(linalg::GenericOp generic) {
  SmallVector<std::pair<unsigned, Value>> seeds;
  for (OpResult result : generic->getResults())
    if (Value g = adjoints.lookup(result))
      seeds.push_back({result.getResultNumber(), g});
  if (seeds.empty())
    return success();
  Location loc = generic.getLoc();
  rewriter.setInsertionPointToEnd(generic->getBlock());
  Block &body = *generic.getBlock();
  unsigned numLoops = generic.getNumLoops();

  // One generic per float tensor input over the forward's iteration space:
  // the forward body, its reverse sweep, and the input's adjoint added into
  // an accumulator read with the input's map (so broadcast dimensions are
  // reduced).
  for (OpOperand *input : generic.getDpsInputOperands()) {
    Value value = input->get();
    if (!isFloatTensor(value.getType()))
      continue;
    Type element = getElementTypeOrSelf(value.getType());
    AffineMap inputMap = generic.getMatchingIndexingMap(input);
    SmallVector<Value> ins(generic.getDpsInputs());
    SmallVector<AffineMap> maps;
    for (OpOperand *operand : generic.getDpsInputOperands())
      maps.push_back(generic.getMatchingIndexingMap(operand));
    for (auto &[index, g] : seeds) {
      ins.push_back(g);
      maps.push_back(generic.getIndexingMapsArray()[generic.getNumDpsInputs() +
                                                    index]);
    }
    maps.push_back(inputMap);
    SmallVector<utils::IteratorType> iterators(numLoops,
                                               utils::IteratorType::reduction);
    for (AffineExpr expr : inputMap.getResults())
      iterators[cast<AffineDimExpr>(expr).getPosition()] =
          utils::IteratorType::parallel;
    unsigned position = input->getOperandNumber();
    LogicalResult swept = success();
    auto adjoint = linalg::GenericOp::create(
        rewriter, loc, TypeRange{value.getType()}, ins,
        ValueRange{zerosLike(value)}, maps, iterators,
        [&](OpBuilder &b, Location l, ValueRange args) {
          IRMapping mapping;
          for (unsigned i = 0, e = generic.getNumDpsInputs(); i < e; ++i)
            mapping.map(body.getArgument(i), args[i]);
          cloneCapturedConstants(b, body, mapping);
          for (Operation &op : body.without_terminator())
            b.clone(op, mapping);
          EpilogueAdjoints sweep(b, l, mapping);
          ValueRange yields = body.getTerminator()->getOperands();
          for (auto [k, seed] : llvm::enumerate(seeds))
            sweep.accumulate(yields[seed.first],
                             args[generic.getNumDpsInputs() + k]);
          swept = sweep.propagateBlock(body);
          Value g = sweep.get(body.getArgument(position));
          Value total = args.back();
          if (g)
            total = arith::AddFOp::create(b, l, total,
                                          sweep.convert(g, element));
          linalg::YieldOp::create(b, l, total);
        });
    if (failed(swept))
      return failure();
    accumulate(value, adjoint.getResult(0));
  }
  return success();
}

FailureOr<func::FuncOp> BackwardBuilder::build(func::FuncOp forward,
                                               StringRef name) {
  if (failed(check(forward)))
    return failure();
  // With `save`, f returns what the backward would otherwise recompute: the
  // results of its GEMMs that are not results of f, and the accumulators of
  // GEMMs whose epilogue is differentiated in the GEMM producing their
  // output's gradient.
  unsigned numResults = forward.getFunctionType().getNumResults();
  SmallVector<Value> saved;
  DenseSet<Operation *> saving, savedForAdjoint, outputsSaved;
  if (save) {
    for (GemmOp gemm : llvm::to_vector(forward.getOps<GemmOp>())) {
      if (canDifferentiateInProducer(gemm))
        saving.insert(saveAccumulator(gemm));
      else if (gemm->hasAttr(kSaveAccumulatorAttr) &&
               !roundsAccumulatorOnly(gemm) &&
               !gemm.getYieldOp()
                    .getValues()[0]
                    .getDefiningOp<PairContractOp>())
        savedForAdjoint.insert(saveAccumulator(gemm));
      else if (outputsStandIn(gemm))
        outputsSaved.insert(gemm);
    }
    auto ret = cast<func::ReturnOp>(forward.getBody().front().getTerminator());
    DenseSet<Value> returned(ret.getOperands().begin(),
                             ret.getOperands().end());
    for (GemmOp gemm : forward.getOps<GemmOp>()) {
      // A tile output the adjoint reads is saved even when f returns it
      // (then f returns it twice).
      DenseSet<unsigned> read;
      if (outputsSaved.contains(gemm))
        for (auto [index, value] : roundedOutputs(gemm))
          read.insert(index);
      for (OpResult result : gemm->getResults())
        if (!returned.contains(result) ||
            read.contains(result.getResultNumber()))
          saved.push_back(result);
    }
    rewriter.modifyOpInPlace(ret,
                             [&] { ret.getOperandsMutable().append(saved); });
    forward.setFunctionType(rewriter.getFunctionType(
        forward.getArgumentTypes(), ret.getOperandTypes()));
  }
  FunctionType type = forward.getFunctionType();

  // Arguments only read as scalar or periodic epilogue inputs (an epsilon,
  // RoPE tables) are constants to the derivative and get no gradient.
  SmallVector<unsigned> differentiated;
  for (BlockArgument arg : forward.getArguments()) {
    if (!isFloatTensor(arg.getType()))
      continue;
    unsigned constantUses = 0, uses = 0;
    for (OpOperand &use : arg.getUses()) {
      ++uses;
      auto gemm = dyn_cast<GemmOp>(use.getOwner());
      unsigned first = gemm ? gemm.getEpilogueInputs().getBeginOperandIndex()
                            : 0;
      if (gemm && use.getOperandNumber() >= first &&
          use.getOperandNumber() < first + gemm.getEpilogueInputs().size() &&
          isConstantForm(gemm.getInputForm(use.getOperandNumber() - first)))
        ++constantUses;
    }
    if (constantUses && constantUses != uses)
      return forward.emitError("--coda-derive-backward: argument ")
             << arg.getArgNumber()
             << " is read as a scalar or periodic epilogue input (a constant "
                "to the derivative) and also differentiated";
    if (!constantUses)
      differentiated.push_back(arg.getArgNumber());
  }

  SmallVector<Type> inputs(type.getInputs());
  llvm::append_range(inputs, type.getResults().drop_front(numResults));
  llvm::append_range(inputs, type.getResults().take_front(numResults));
  SmallVector<Type> results;
  for (unsigned i : differentiated)
    results.push_back(type.getInput(i));

  rewriter.setInsertionPointAfter(forward);
  auto backward = func::FuncOp::create(
      rewriter, forward.getLoc(), name,
      rewriter.getFunctionType(inputs, results));
  Block *entry = backward.addEntryBlock();
  // The forward body, recomputed: the backward needs its GEMM operands.
  IRMapping mapping;
  for (auto [old, arg] :
       llvm::zip(forward.getArguments(), entry->getArguments()))
    mapping.map(old, arg);
  rewriter.setInsertionPointToStart(entry);
  func::ReturnOp forwardReturn;
  SmallVector<Operation *> recomputed;
  for (Operation &op : forward.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      forwardReturn = ret;
      continue;
    }
    recomputed.push_back(rewriter.clone(op, mapping));
    if (saving.contains(&op))
      savingAccumulator.insert(recomputed.back());
    if (savedForAdjoint.contains(&op))
      readingSavedAccumulator.insert(recomputed.back());
    if (outputsSaved.contains(&op))
      readingOutputs.insert(recomputed.back());
  }
  ValueRange savedArgs =
      entry->getArguments().slice(type.getNumInputs(), saved.size());
  ValueRange upstream =
      entry->getArguments().drop_front(type.getNumInputs() + saved.size());
  for (auto [value, g] : llvm::zip_equal(
           forwardReturn.getOperands().take_front(numResults), upstream))
    accumulate(mapping.lookup(value), g);

  for (Operation *op : llvm::reverse(recomputed)) {
    LogicalResult result =
        TypeSwitch<Operation *, LogicalResult>(op)
            .Case<GemmOp, linalg::GenericOp>(
                [&](auto typed) { return differentiate(typed); })
            .Case<ReducePartialsOp>([&](ReducePartialsOp reduce) {
              differentiate(reduce);
              return success();
            })
            .Default([](Operation *) { return success(); });
    if (failed(result))
      return failure();
  }

  // The backward reads the saved values instead of its copy of the forward.
  for (auto [value, arg] : llvm::zip(saved, savedArgs))
    rewriter.replaceAllUsesWith(mapping.lookup(value), arg);

  rewriter.setInsertionPointToEnd(entry);
  SmallVector<Value> gradients;
  for (unsigned i : differentiated) {
    BlockArgument arg = entry->getArgument(i);
    Value g = adjoints.lookup(arg);
    gradients.push_back(g ? convertElements(g, getElementTypeOrSelf(arg))
                          : zerosLike(arg));
  }
  func::ReturnOp::create(rewriter, forward.getLoc(), gradients);
  return backward;
}

struct CodaDeriveBackwardPass
    : coda::impl::CodaDeriveBackwardBase<CodaDeriveBackwardPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> forwards;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      if (function.empty() ? !func.getOps<GemmOp>().empty()
                           : func.getSymName() == function)
        forwards.push_back(func);
    }
    if (!function.empty() && forwards.empty()) {
      module.emitError("--coda-derive-backward: no function @") << function;
      return signalPassFailure();
    }
    IRRewriter rewriter(&getContext());
    SymbolTable symbols(module);
    for (func::FuncOp forward : forwards) {
      std::string target = name.empty() || !function.size()
                               ? (forward.getSymName() + "_backward").str()
                               : name.getValue();
      if (symbols.lookup(target)) {
        forward.emitError("--coda-derive-backward: @")
            << target << " exists already";
        return signalPassFailure();
      }
      // The forward's kernels by role; the backward's copies of them carry
      // it (kKernelRoleAttrName), and its own kernels are named after them.
      int64_t numGemms = 0, numFinishes = 0;
      forward.walk([&](Operation *op) {
        if (isa<GemmOp>(op))
          op->setAttr(kKernelRoleAttrName,
                      rewriter.getStringAttr(kForwardRole + "gemm" +
                                             Twine(numGemms++)));
        else if (isa<ReducePartialsOp>(op))
          op->setAttr(kKernelRoleAttrName,
                      rewriter.getStringAttr(kForwardRole + "finish" +
                                             Twine(numFinishes++)));
      });
      BackwardBuilder builder(rewriter, tile, save);
      FailureOr<func::FuncOp> backward = builder.build(forward, target);
      if (failed(backward))
        return signalPassFailure();
      symbols.insert(*backward);
      // Drops what the backward does not use (forward values it does not
      // need, the copied epilogue ops that only fed forward outputs, the
      // epilogue inputs they read) and writes a gradient computed twice
      // (an accumulator's that is also a residual's) once.
      DominanceInfo dominance;
      eliminateCommonSubExpressions(rewriter, dominance, *backward);
      RewritePatternSet patterns(&getContext());
      GemmOp::getCanonicalizationPatterns(patterns, &getContext());
      (void)applyPatternsGreedily(*backward, std::move(patterns));
    }
  }
};

} // namespace
