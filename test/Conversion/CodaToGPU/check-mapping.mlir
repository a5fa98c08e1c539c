// RUN: coda-opt %s --coda-check-gpu-mapping --split-input-file --verify-diagnostics

func.func @host_loop(%m: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f32
  // expected-error @+1 {{this loop nest could not be mapped to a GPU kernel and would run on the host over device memory}}
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %f, %m[%i] : memref<?xf32>
  }
  return
}

// -----

// Loops inside a launch are fine.
func.func @in_launch(%m: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1)
             threads(%tx, %ty, %tz) in (%a = %c1, %b = %c1, %c = %c1) {
    scf.parallel (%i) = (%c0) to (%n) step (%c1) {
      memref.store %f, %m[%i] : memref<?xf32>
    }
    gpu.terminator
  }
  return
}

// -----

// A block the device cannot launch: 128 threads along z (at most 64).
func.func @block_z_beyond_the_limit(%m: memref<?xf32>) {
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %f = arith.constant 1.0 : f32
  // expected-error @+1 {{this loop nest maps to 128 threads along z, beyond the device's 64}}
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1)
             threads(%tx, %ty, %tz) in (%a = %c1, %b = %c1, %c = %c128) {
    memref.store %f, %m[%tz] : memref<?xf32>
    gpu.terminator
  }
  return
}

// -----

// Too many threads in all: 64 x 32.
func.func @block_beyond_1024_threads(%m: memref<?xf32>) {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %f = arith.constant 1.0 : f32
  // expected-error @+1 {{this loop nest maps to 2048 threads per block, beyond the device's 1024}}
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1)
             threads(%tx, %ty, %tz) in (%a = %c64, %b = %c32, %c = %c1) {
    memref.store %f, %m[%tx] : memref<?xf32>
    gpu.terminator
  }
  return
}
