// RUN: mlir-opt %s --load-dialect-plugin=%coda_plugin -verify-diagnostics

// The plugin brings coda's verifiers along.
func.func @odd_pairs(%a: tensor<4x8xf32>, %b: tensor<8x5xf32>, %o: tensor<4x5xf32>) {
  // expected-error @+1 {{'coda.gemm' op has pairwise epilogue ops over columns (n, n + 1) in blocks of 2, but N = 5 is not a multiple of 2}}
  %0 = coda.gemm %a, %b : tensor<4x8xf32>, tensor<8x5xf32> epilogue(%acc) outs(%o : tensor<4x5xf32>) {
    %y = coda.pair_map (%x0, %x1) = %acc : f32 -> f32 {
      coda.yield %x1, %x0 : f32, f32
    }
    coda.yield %y : f32
  }
  return
}
