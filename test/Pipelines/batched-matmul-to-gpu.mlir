// REQUIRES: ptxas
// RUN: rm -rf %t && coda-compile %s --format=isa -o %t > /dev/null 2>&1
// RUN: FileCheck %s --input-file=%t/manifest.json
// RUN: %ptxas -arch=sm_90a -v %t/coda_kernels.ptx -o %t/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: FileCheck %s --input-file=%t/coda_kernels.ptx --check-prefix=PTX

// A batched product as torch-mlir lowers `torch.bmm` (attention scores,
// each batch its own rhs), scaled and rounded to bf16: coda-compile fuses
// the scale into the epilogue and compiles one kernel for every batch,
// which loads both operands through 3-D TMA descriptors and assembles
// with no spill.

// CHECK: "batched": true
// CHECK: "name": "B"
// PTXAS: Compiling entry function 'scores_gemm0'
// PTXAS-NEXT: Function properties for scores_gemm0
// PTXAS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTX: cp.async.bulk.tensor.3d.shared::cluster.global
func.func @scores(%q: tensor<8x?x64xbf16>, %k: tensor<8x64x128xbf16>) -> tensor<8x?x128xbf16> {
  %c1 = arith.constant 1 : index
  %t = tensor.dim %q, %c1 : tensor<8x?x64xbf16>
  %e = tensor.empty(%t) : tensor<8x?x128xf32>
  %zero = arith.constant 0.0 : f32
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x?x128xf32>) -> tensor<8x?x128xf32>
  %s = linalg.batch_matmul ins(%q, %k : tensor<8x?x64xbf16>, tensor<8x64x128xbf16>) outs(%z : tensor<8x?x128xf32>) -> tensor<8x?x128xf32>
  %eb = tensor.empty(%t) : tensor<8x?x128xbf16>
  %scale = arith.constant 0.125 : f32
  %r = linalg.generic {indexing_maps = [affine_map<(b, m, n) -> (b, m, n)>, affine_map<(b, m, n) -> (b, m, n)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<8x?x128xf32>) outs(%eb : tensor<8x?x128xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %y = arith.mulf %x, %scale : f32
    %yb = arith.truncf %y : f32 to bf16
    linalg.yield %yb : bf16
  } -> tensor<8x?x128xbf16>
  return %r : tensor<8x?x128xbf16>
}
