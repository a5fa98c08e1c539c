// A weight stored N x K (as nn.Linear keeps it) used without transpose_b.
func.func @mlp(%x: memref<128x256xbf16>, %w: memref<512x256xbf16>, %y: memref<128x512xbf16>) {
  coda.gemm %x, %w : memref<128x256xbf16>, memref<512x256xbf16>
      epilogue(%acc) outs(%y : memref<128x512xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}
