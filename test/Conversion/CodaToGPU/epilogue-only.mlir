// RUN: coda-opt %s --canonicalize --coda-to-gpu="cooperative=1" --canonicalize --split-input-file | FileCheck %s
// RUN: coda-opt %s --canonicalize --coda-to-gpu="ping-pong=1" --canonicalize --split-input-file | FileCheck %s

// A GEMM whose epilogue does not read the accumulator (RoPE's adjoint once
// the table gradients nobody reads are dropped) becomes its epilogue alone:
// no operand tile is loaded, no WGMMA issued; the tile input is still read.
// CHECK-LABEL: gpu.func @rope_adjoint_gemm0
// CHECK-NOT: wgmma.mma_async
// CHECK-NOT: nvgpu.tma.async.load
func.func @rope_adjoint(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %cos: memref<?x128xbf16>,
                        %dy: memref<?x?xbf16>, %dx: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, periodic %c = %cos : memref<?x128xbf16>, tile %d = %dy : memref<?x?xbf16>)
      outs(%dx : memref<?x?xbf16>) {
    %dv = arith.extf %d : bf16 to f32
    %r:2 = coda.pair_map stride 64 (%x0, %x1) = %acc, (%c0, %c1) = %c, (%d0, %d1) = %dv
        : f32, bf16, f32 -> f32, f32 {
      %e0 = arith.extf %c0 : bf16 to f32
      %e1 = arith.extf %c1 : bf16 to f32
      %g0 = arith.mulf %d0, %e0 : f32
      %g1 = arith.mulf %d1, %e1 : f32
      %t0 = arith.mulf %d0, %x0 : f32
      %t1 = arith.mulf %d1, %x1 : f32
      coda.yield %g0, %g1, %t0, %t1 : f32, f32, f32, f32
    }
    %t = arith.truncf %r#0 : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// The same epilogue reading the accumulator keeps the mainloop.
// CHECK-LABEL: gpu.func @rope_forward_gemm0
// CHECK: nvgpu.tma.async.load
// CHECK: wgmma.mma_async
func.func @rope_forward(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %cos: memref<?x128xbf16>,
                        %dx: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, periodic %c = %cos : memref<?x128xbf16>)
      outs(%dx : memref<?x?xbf16>) {
    %r = coda.pair_map stride 64 (%x0, %x1) = %acc, (%c0, %c1) = %c : f32, bf16 -> f32 {
      %e0 = arith.extf %c0 : bf16 to f32
      %g0 = arith.mulf %x0, %e0 : f32
      %g1 = arith.mulf %x1, %e0 : f32
      coda.yield %g0, %g1 : f32, f32
    }
    %t = arith.truncf %r : f32 to bf16
    coda.yield %t : bf16
  }
  return
}
