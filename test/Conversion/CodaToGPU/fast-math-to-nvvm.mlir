// RUN: coda-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(coda-fast-math-to-nvvm))' | FileCheck %s

// An exponential marked afn: ex2.approx.ftz of x log2(e); exp2: of x.
// CHECK-LABEL: gpu.func @exponentials
// CHECK-SAME: (%[[X:.*]]: f32, %[[Y:.*]]: f32)
// CHECK-DAG: %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// CHECK: %[[S:.*]] = arith.mulf %[[X]], %[[LOG2E]] : f32
// CHECK: %[[E:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%[[S]]) : (f32) -> f32
// CHECK: %[[E2:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%[[Y]]) : (f32) -> f32
// CHECK: gpu.return %[[E]], %[[E2]]
gpu.module @kernels {
  gpu.func @exponentials(%x: f32, %y: f32) -> (f32, f32) {
    %e = math.exp %x fastmath<afn> : f32
    %e2 = math.exp2 %y fastmath<afn> : f32
    gpu.return %e, %e2 : f32, f32
  }
}

// -----

// Divisions marked afn (with arcp or not, a reciprocal too): div.approx.ftz.
// CHECK-LABEL: gpu.func @divisions
// CHECK-SAME: (%[[A:.*]]: f32, %[[B:.*]]: f32, %[[D:.*]]: f32)
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.0
// CHECK: %[[QA:.*]] = llvm.call_intrinsic "llvm.nvvm.div.approx.ftz.f"(%[[A]], %[[D]]) : (f32, f32) -> f32
// CHECK: %[[QB:.*]] = llvm.call_intrinsic "llvm.nvvm.div.approx.ftz.f"(%[[B]], %[[D]]) : (f32, f32) -> f32
// CHECK: %[[R:.*]] = llvm.call_intrinsic "llvm.nvvm.div.approx.ftz.f"(%[[ONE]], %[[D]]) : (f32, f32) -> f32
// CHECK-NOT: arith.divf
// CHECK: gpu.return %[[QA]], %[[QB]], %[[R]]
gpu.module @kernels {
  gpu.func @divisions(%a: f32, %b: f32, %d: f32) -> (f32, f32, f32) {
    %one = arith.constant 1.0 : f32
    %qa = arith.divf %a, %d fastmath<arcp,afn> : f32
    %qb = arith.divf %b, %d fastmath<afn> : f32
    %r = arith.divf %one, %d fastmath<afn> : f32
    gpu.return %qa, %qb, %r : f32, f32, f32
  }
}

// -----

// A hyperbolic tangent marked afn: tanh.approx.f32 (inline PTX: NVVM has no
// intrinsic for it); without afn it stays.
// CHECK-LABEL: gpu.func @tangents
// CHECK-SAME: (%[[X:.*]]: f32)
// CHECK: %[[T:.*]] = llvm.inline_asm "tanh.approx.f32 $0, $1;", "=f,f" %[[X]] : (f32) -> f32
// CHECK: %[[K:.*]] = math.tanh %[[X]] : f32
// CHECK: gpu.return %[[T]], %[[K]]
gpu.module @kernels {
  gpu.func @tangents(%x: f32) -> (f32, f32) {
    %t = math.tanh %x fastmath<afn> : f32
    %k = math.tanh %x : f32
    gpu.return %t, %k : f32, f32
  }
}

// -----

// Without afn, and on f64 or vectors, the usual lowering stays.
// CHECK-LABEL: gpu.func @kept
// CHECK: math.exp %{{.*}} : f32
// CHECK: arith.divf %{{.*}} fastmath<arcp> : f32
// CHECK: arith.divf %{{.*}} fastmath<afn> : f64
// CHECK: arith.divf %{{.*}} fastmath<afn> : vector<2xf32>
// CHECK-NOT: llvm.call_intrinsic
gpu.module @kernels {
  gpu.func @kept(%x: f32, %a: f64, %v: vector<2xf32>) -> (f32, f32, f64, vector<2xf32>) {
    %e = math.exp %x : f32
    %q = arith.divf %x, %e fastmath<arcp> : f32
    %d = arith.divf %a, %a fastmath<afn> : f64
    %w = arith.divf %v, %v fastmath<afn> : vector<2xf32>
    gpu.return %e, %q, %d, %w : f32, f32, f64, vector<2xf32>
  }
}
