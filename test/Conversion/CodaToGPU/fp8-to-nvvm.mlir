// RUN: coda-opt %s --pass-pipeline='builtin.module(gpu.module(coda-fp8-to-nvvm))' --split-input-file | FileCheck %s

// Scalar conversions to and from FP8 in GPU kernels become PTX's cvt, with
// arith.truncf's meaning: cvt saturates, so a value that rounds beyond
// e4m3's finite range becomes NaN before it (cvt keeps NaN), and beyond
// e5m2's the saturated code becomes the next one, the infinity, after it;
// no check where constants clamp the value within the range.

// CHECK-LABEL: gpu.func @trunc_e4m3
// CHECK-DAG: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[NAN:.+]] = arith.constant 0x7FC00000 : f32
// CHECK-DAG: %[[MID:.+]] = arith.constant 4.640000e+02 : f32
// CHECK: %[[ABS:.+]] = math.absf %[[X:.+]] : f32
// 464 itself rounds to 448 (ties to even): only beyond is NaN.
// CHECK: %[[BEYOND:.+]] = arith.cmpf ogt, %[[ABS]], %[[MID]] : f32
// CHECK: %[[IN:.+]] = arith.select %[[BEYOND]], %[[NAN]], %[[X]] : f32
// CHECK: %[[PAIR:.+]] = nvvm.convert.f32x2.to.f8x2 %[[ZERO]], %[[IN]] {rnd = #nvvm.fp_rnd_mode<rn>, sat = #nvvm.sat_mode<satfinite>} : vector<2xi8>(f8E4M3FN)
// CHECK: %[[BYTE:.+]] = vector.extract %[[PAIR]][0] : i8 from vector<2xi8>
// CHECK: %[[R:.+]] = arith.bitcast %[[BYTE]] : i8 to f8E4M3FN
// CHECK: memref.store %[[R]]
gpu.module @k {
  gpu.func @trunc_e4m3(%x: f32, %p: memref<4xf8E4M3FN>) kernel {
    %c0 = arith.constant 0 : index
    %a = arith.truncf %x : f32 to f8E4M3FN
    memref.store %a, %p[%c0] : memref<4xf8E4M3FN>
    gpu.return
  }
}

// -----

// Clamped to [-448, 448] as FP8 recipes quantize: no range check.
// CHECK-LABEL: gpu.func @trunc_clamped
// CHECK: %[[C:.+]] = arith.minimumf
// CHECK: %[[PAIR:.+]] = nvvm.convert.f32x2.to.f8x2 %{{.+}}, %[[C]]
// CHECK: %[[BYTE:.+]] = vector.extract %[[PAIR]][0]
// CHECK: %[[CVT:.+]] = arith.bitcast %[[BYTE]] : i8 to f8E4M3FN
// CHECK-NOT: arith.select
// CHECK: memref.store %[[CVT]]
gpu.module @k {
  gpu.func @trunc_clamped(%x: f32, %p: memref<4xf8E4M3FN>) kernel {
    %c0 = arith.constant 0 : index
    %lo = arith.constant -448.0 : f32
    %hi = arith.constant 448.0 : f32
    %m = arith.maximumf %x, %lo : f32
    %n = arith.minimumf %m, %hi : f32
    %a = arith.truncf %n : f32 to f8E4M3FN
    memref.store %a, %p[%c0] : memref<4xf8E4M3FN>
    gpu.return
  }
}

// -----

// A clamp wider than the range keeps the check.
// CHECK-LABEL: gpu.func @trunc_clamped_too_wide
// CHECK: arith.cmpf ogt
// CHECK: arith.select
// CHECK: nvvm.convert.f32x2.to.f8x2
gpu.module @k {
  gpu.func @trunc_clamped_too_wide(%x: f32, %p: memref<4xf8E4M3FN>) kernel {
    %c0 = arith.constant 0 : index
    %lo = arith.constant -448.0 : f32
    %hi = arith.constant 500.0 : f32
    %m = arith.maximumf %x, %lo : f32
    %n = arith.minimumf %m, %hi : f32
    %a = arith.truncf %n : f32 to f8E4M3FN
    memref.store %a, %p[%c0] : memref<4xf8E4M3FN>
    gpu.return
  }
}

// -----

// e5m2 from bf16 (widened exactly first): from 61440 on (the tie rounds to
// the infinity, whose mantissa is even) the code after the saturated one,
// the infinity of the value's sign; NaN is not beyond, cvt keeps it.
// CHECK-LABEL: gpu.func @trunc_e5m2
// CHECK-DAG: %[[ONE:.+]] = arith.constant 1 : i8
// CHECK-DAG: %[[MID:.+]] = arith.constant 6.144000e+04 : f32
// CHECK: %[[X:.+]] = arith.extf %{{.+}} : bf16 to f32
// CHECK: %[[PAIR:.+]] = nvvm.convert.f32x2.to.f8x2 %{{.+}}, %[[X]] {{.*}} : vector<2xi8>(f8E5M2)
// CHECK: %[[BYTE:.+]] = vector.extract %[[PAIR]][0] : i8 from vector<2xi8>
// CHECK: %[[ABS:.+]] = math.absf %[[X]]
// CHECK: %[[BEYOND:.+]] = arith.cmpf oge, %[[ABS]], %[[MID]]
// CHECK: %[[NEXT:.+]] = arith.addi %[[BYTE]], %[[ONE]] : i8
// CHECK: %[[SEL:.+]] = arith.select %[[BEYOND]], %[[NEXT]], %[[BYTE]] : i8
// CHECK: arith.bitcast %[[SEL]] : i8 to f8E5M2
gpu.module @k {
  gpu.func @trunc_e5m2(%h: bf16, %q: memref<2xf8E5M2>) kernel {
    %c0 = arith.constant 0 : index
    %c = arith.truncf %h : bf16 to f8E5M2
    memref.store %c, %q[%c0] : memref<2xf8E5M2>
    gpu.return
  }
}

// -----

// FP8 to wider types: exactly through cvt.rn.f16x2.e4m3x2.
// CHECK-LABEL: gpu.func @ext
// CHECK: %[[BYTE:.+]] = arith.bitcast %[[V:.+]] : f8E4M3FN to i8
// CHECK: %[[BYTES:.+]] = vector.from_elements %[[BYTE]], %{{.+}} : vector<2xi8>
// CHECK: %[[HALVES:.+]] = nvvm.convert.f8x2.to.f16x2 %[[BYTES]] : vector<2xi8>(f8E4M3FN) -> vector<2xf16>
// CHECK: %[[HALF:.+]] = vector.extract %[[HALVES]][0] : f16 from vector<2xf16>
// CHECK: %[[F:.+]] = arith.extf %[[HALF]] : f16 to f32
// CHECK: memref.store %[[F]]
// CHECK: nvvm.convert.f8x2.to.f16x2
// CHECK: %[[G:.+]] = arith.extf %{{.+}} : f16 to f32
// CHECK: %[[B:.+]] = arith.truncf %[[G]] : f32 to bf16
// CHECK: memref.store %[[B]]
gpu.module @k {
  gpu.func @ext(%p: memref<4xf8E4M3FN>, %o: memref<4xf32>, %ob: memref<4xbf16>) kernel {
    %c0 = arith.constant 0 : index
    %v = memref.load %p[%c0] : memref<4xf8E4M3FN>
    %f = arith.extf %v : f8E4M3FN to f32
    memref.store %f, %o[%c0] : memref<4xf32>
    %g = arith.extf %v : f8E4M3FN to bf16
    memref.store %g, %ob[%c0] : memref<4xbf16>
    gpu.return
  }
}
