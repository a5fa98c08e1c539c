// RUN: coda-opt %s --pass-pipeline='builtin.module(gpu.module(coda-dependent-launch))' | FileCheck %s

// Every kernel waits for the grids before it in its stream before anything
// else (and signals no dependents early), and is marked for the manifest; a
// device function that is not a kernel is left alone, as is a kernel
// already marked (the pass runs once per kernel).

// CHECK-LABEL: gpu.func @scale
// CHECK-SAME: coda.dependent_launch
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NEXT: gpu.thread_id x
// CHECK-LABEL: gpu.func @helper
// CHECK-NOT: griddepcontrol
// CHECK: gpu.return
// CHECK-LABEL: gpu.func @marked
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NEXT: gpu.return
gpu.module @kernels {
  gpu.func @scale(%a: memref<?xf32>) kernel {
    %i = gpu.thread_id x
    %v = memref.load %a[%i] : memref<?xf32>
    %w = arith.addf %v, %v : f32
    memref.store %w, %a[%i] : memref<?xf32>
    gpu.return
  }
  gpu.func @helper(%x: f32) -> f32 {
    gpu.return %x : f32
  }
  gpu.func @marked() kernel attributes {coda.dependent_launch} {
    nvvm.griddepcontrol wait
    gpu.return
  }
}
