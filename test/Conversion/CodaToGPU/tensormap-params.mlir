// RUN: coda-opt %s --pass-pipeline="builtin.module(gpu.module(coda-tensormap-params))" --split-input-file --verify-diagnostics | FileCheck %s
// RUN: coda-compile %coda_src_root/test/GPU/cases/primitives.mlir --format=isa -o %t && FileCheck %s --check-prefix=PTX --input-file=%t/coda_kernels.ptx

// A kernel's TMA descriptors are parameters passed by value: each
// `!llvm.array<16 x i64>` parameter, stored into its own aligned alloca by
// --coda-to-gpu, becomes a byval pointer to the parameter itself, 64-byte
// aligned and grid-constant; its uses take the parameter's address. Other
// parameters and non-marked functions are left alone.
// CHECK-LABEL: llvm.func @plain_gemm0(
//  CHECK-SAME:   %[[MAP:.*]]: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<16 x i64>, nvvm.grid_constant},
//  CHECK-SAME:   %[[N:.*]]: i64)
//  CHECK-NOT:    coda.tensormap_params
//  CHECK-NOT:    llvm.alloca
//  CHECK-NOT:    llvm.store
//       CHECK:   nvvm.prefetch tensormap, %[[MAP]]
//       CHECK:   llvm.load %[[MAP]] : !llvm.ptr -> i64
// CHECK-LABEL: llvm.func @unmarked(
//  CHECK-SAME:   %{{.*}}: !llvm.array<16 x i64>)
//       CHECK:   llvm.alloca
gpu.module @kernels {
  llvm.func @plain_gemm0(%map: !llvm.array<16 x i64>, %n: i64)
      attributes {coda.tensormap_params, gpu.kernel, nvvm.kernel} {
    %one = llvm.mlir.constant(1 : i32) : i32
    %slot = llvm.alloca %one x !llvm.array<16 x i64> {alignment = 64 : i64} : (i32) -> !llvm.ptr
    llvm.store %map, %slot : !llvm.array<16 x i64>, !llvm.ptr
    nvvm.prefetch tensormap, %slot : !llvm.ptr
    %word = llvm.load %slot : !llvm.ptr -> i64
    llvm.return
  }
  llvm.func @unmarked(%map: !llvm.array<16 x i64>) attributes {nvvm.kernel} {
    %one = llvm.mlir.constant(1 : i32) : i32
    %slot = llvm.alloca %one x !llvm.array<16 x i64> {alignment = 64 : i64} : (i32) -> !llvm.ptr
    llvm.store %map, %slot : !llvm.array<16 x i64>, !llvm.ptr
    llvm.return
  }
}

// -----

// A descriptor parameter read as a value cannot live in parameter space
// behind a pointer: refused.
gpu.module @kernels {
  // expected-error @below {{TMA descriptor parameter #0 is not only stored into its own alloca; it cannot be passed by value}}
  llvm.func @copied(%map: !llvm.array<16 x i64>, %out: !llvm.ptr)
      attributes {coda.tensormap_params, gpu.kernel, nvvm.kernel} {
    llvm.store %map, %out : !llvm.array<16 x i64>, !llvm.ptr
    llvm.return
  }
}

// -----

gpu.module @kernels {
  // expected-error @below {{'coda.tensormap_params' is only meaningful on an NVVM kernel definition}}
  llvm.func @device(%map: !llvm.array<16 x i64>) attributes {coda.tensormap_params} {
    llvm.return
  }
}

// In the PTX of a GEMM kernel: the descriptors (lhs, rhs and the output's
// store descriptor) are 128-byte parameters of 64-byte alignment, whose
// parameter-space addresses TMA takes.
// PTX-LABEL: .visible .entry plain_nt_gemm0(
//  PTX-NEXT: .param .align 64 .b8 plain_nt_gemm0_param_0[128],
//  PTX-NEXT: .param .align 64 .b8 plain_nt_gemm0_param_1[128],
//  PTX-NEXT: .param .u64 plain_nt_gemm0_param_2,
//       PTX: .param .align 64 .b8 plain_nt_gemm0_param_12[128]
//   PTX-NOT: .entry
//       PTX: mov.b64 [[LHSP:%rd[0-9]+]], plain_nt_gemm0_param_0;
//       PTX: mov.b64 [[RHSP:%rd[0-9]+]], plain_nt_gemm0_param_1;
//       PTX: mov.b64 [[OUTP:%rd[0-9]+]], plain_nt_gemm0_param_12;
//       PTX: cvta.param.u64 [[OUT:%rd[0-9]+]], [[OUTP]];
//       PTX: cvta.param.u64 [[RHS:%rd[0-9]+]], [[RHSP]];
//       PTX: cvta.param.u64 [[LHS:%rd[0-9]+]], [[LHSP]];
//       PTX: cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [[[OUT]],
//       PTX: prefetch.tensormap [[[LHS]]];
//       PTX: prefetch.tensormap [[[RHS]]];
//       PTX: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{{%rd[0-9]+}}], [[[LHS]], {{{.*}}}]
//       PTX: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [{{%rd[0-9]+}}], [[[RHS]], {{{.*}}}]
