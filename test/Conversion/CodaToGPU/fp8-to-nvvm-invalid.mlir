// RUN: coda-opt %s --pass-pipeline='builtin.module(gpu.module(coda-fp8-to-nvvm))' --split-input-file --verify-diagnostics

// What --coda-fp8-to-nvvm cannot turn into cvt is an error on the op, not
// an LLVM translation failure later.

gpu.module @k {
  gpu.func @vector(%x: vector<4xf32>, %p: memref<4xf8E4M3FN>) kernel {
    %c0 = arith.constant 0 : index
    // expected-error @+1 {{'arith.truncf' op cannot be lowered for the GPU: it converts vectors; --coda-fp8-to-nvvm converts scalars}}
    %a = arith.truncf %x : vector<4xf32> to vector<4xf8E4M3FN>
    vector.store %a, %p[%c0] : memref<4xf8E4M3FN>, vector<4xf8E4M3FN>
    gpu.return
  }
}

// -----

gpu.module @k {
  gpu.func @from_f64(%x: f64, %p: memref<4xf8E4M3FN>) kernel {
    %c0 = arith.constant 0 : index
    // expected-error @+1 {{'arith.truncf' op cannot be lowered for the GPU: it converts from a type other than f32, f16 or bf16 to FP8 (from f64, two roundings would differ from one)}}
    %a = arith.truncf %x : f64 to f8E4M3FN
    memref.store %a, %p[%c0] : memref<4xf8E4M3FN>
    gpu.return
  }
}

// -----

gpu.module @k {
  gpu.func @toward_zero(%x: f32, %p: memref<4xf8E5M2>) kernel {
    %c0 = arith.constant 0 : index
    // expected-error @+1 {{'arith.truncf' op cannot be lowered for the GPU: it rounds other than to nearest even, which is all PTX's FP8 conversion does}}
    %a = arith.truncf %x toward_zero : f32 to f8E5M2
    memref.store %a, %p[%c0] : memref<4xf8E5M2>
    gpu.return
  }
}
