// RUN: coda-opt %s --coda-to-gpu --split-input-file --verify-diagnostics | FileCheck %s

// A configuration pinned on the GEMM decides its kernel, whatever the pass
// options: each schedule and cluster shape reaches the kernel.

// CHECK-LABEL: gpu.func @pingpong_gemm0
//  CHECK-SAME:   block = [384, 1, 1], cluster = [2, 1, 1]
//  CHECK-SAME:   persistent = true
//  CHECK-SAME:   stages = 4 : i64, tile = [128, 128, 64]
//       CHECK:   nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
//       CHECK:   wgmma.mma_async.sync.aligned.m64n128k16
func.func @pingpong(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4, cluster_m = 2>} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// CHECK-LABEL: gpu.func @cooperative_gemm0
//  CHECK-SAME:   block = [384, 1, 1], cluster = [1, 1, 1]
//  CHECK-SAME:   persistent = true
//  CHECK-SAME:   stages = 3 : i64, tile = [128, 256, 64]
//       CHECK:   nvvm.setmaxregister  increase 232
//       CHECK:   wgmma.mma_async.sync.aligned.m64n256k16
func.func @cooperative(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 3>} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// CHECK-LABEL: gpu.func @ws_gemm0
//  CHECK-SAME:   block = [384, 1, 1]
//  CHECK-SAME:   persistent = false
//  CHECK-SAME:   tile = [128, 256, 64]
func.func @ws(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = warp_specialized, tile_m = 128, tile_n = 256, stages = 4>} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// CHECK-LABEL: gpu.func @single_gemm0
//  CHECK-SAME:   block = [128, 1, 1]
//  CHECK-SAME:   tile = [64, 128, 64]
func.func @single(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = single, tile_m = 64, tile_n = 128, stages = 4>} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// The raster order: along M, consecutive cluster tiles fill a band of
// `swizzle` tile columns (3 here) before moving down M, so the band's
// width (3) scales the cluster-tile rows (M / 256) and the columns left
// (N / 256 minus the band's first) bound it. Along N (the default, the
// kernels above) the band is cluster-tile rows.

// CHECK-LABEL: gpu.func @raster_gemm0(
//  CHECK-SAME:   %{{[a-z0-9]+}}: !llvm.array<16 x i64>, %{{[a-z0-9]+}}: !llvm.array<16 x i64>, %[[M:[a-z0-9]+]]: index, %[[N:[a-z0-9]+]]: index,
//       CHECK:   scf.for %[[TILE:[a-z0-9]+]] =
//       CHECK:     %[[TILES_N:.+]] = arith.ceildivui %[[N]], %c256
//       CHECK:     %[[TILES_M:.+]] = arith.ceildivui %[[M]], %c256
//       CHECK:     %[[PER_BAND:.+]] = arith.muli %c3{{.*}}, %[[TILES_M]]
//       CHECK:     %[[BAND:.+]] = arith.divui %[[TILE]], %[[PER_BAND]]
//       CHECK:     %[[FIRST:.+]] = arith.muli %[[BAND]], %c3
//       CHECK:     %[[LEFT:.+]] = arith.subi %[[TILES_N]], %[[FIRST]]
//       CHECK:     arith.minui %[[LEFT]], %c3
func.func @raster(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4, cluster_m = 2, raster = along_m, swizzle = 3>} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// epilogue_unroll sets the rows a shared-tile epilogue's threads take per
// iteration; the kernel's ABI records it where it is not the lowering's own.
// CHECK-LABEL: gpu.func @ws_one_row_gemm0
//  CHECK-SAME:   epilogue_unroll = 1 : i64
//  CHECK-SAME:   schedule = "warp_specialized"
// CHECK-LABEL: gpu.func @ws_default_rows_gemm0
//   CHECK-NOT:   epilogue_unroll
//       CHECK:   gpu.return
func.func @ws_one_row(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = warp_specialized, tile_m = 128, tile_n = 256, stages = 4, epilogue_unroll = 1>} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}
func.func @ws_default_rows(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = warp_specialized, tile_m = 128, tile_n = 256, stages = 4>} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// A register epilogue has no shared tile to walk.
func.func @unroll_in_registers(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  // expected-error @+1 {{epilogue_unroll: schedule ping_pong's epilogue reads the accumulators from registers}}
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4, epilogue_unroll = 1>} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// A configuration the epilogue cannot take is an error, not a silent
// change of kernel.
func.func @too_wide(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %rs: memref<?x?xf32>) {
  // expected-warning @+2 {{ping-pong schedule not applied}}
  // expected-error @+1 {{cannot take #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4>}}
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%rs : memref<?x?xf32>) attributes {coda.gemm_config = #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4>} {
    %s = coda.row_reduce sum %acc tile 256 : f32
    coda.yield %s : !coda.partial<f32>
  }
  return
}

// -----

// An array of configurations dispatched by K: a kernel for each, the
// bounded one named for its bound, both recording the GEMM's name and their
// bound in their ABI; the host code compares K with the bound and launches
// one of them.

// CHECK-LABEL: func.func @dispatched
//       CHECK:   %[[K:.+]] = memref.dim %{{.+}}, %c1
//       CHECK:   %[[IN:.+]] = arith.cmpi ule, %[[K]], %c4096
//       CHECK:   scf.if %[[IN]] {
//       CHECK:     gpu.launch_func @coda_kernels::@dispatched_gemm0_k4096
//       CHECK:   } else {
//       CHECK:     gpu.launch_func @coda_kernels::@dispatched_gemm0
//       CHECK:   }
//       CHECK: gpu.func @dispatched_gemm0_k4096
//  CHECK-SAME:   max_k = 4096 : i64
//  CHECK-SAME:   tile = [128, 128, 64]
//  CHECK-SAME:   variant_of = "dispatched_gemm0"
//       CHECK: gpu.func @dispatched_gemm0(
//  CHECK-SAME:   max_k = 0 : i64
//  CHECK-SAME:   tile = [128, 256, 64]
//  CHECK-SAME:   variant_of = "dispatched_gemm0"
func.func @dispatched(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = [
        #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4, max_k = 4096>,
        #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4, cluster_m = 2>]} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// An array dispatched by waves: the first configuration takes the GEMM's
// name, the second its position; both record their wave_cost; the host code
// weighs each one's waves (tiles over 132 SMs, clusters of two over 66) and
// launches the first where its waves weigh no more.

// CHECK-LABEL: func.func @by_waves
//   CHECK-DAG:   %[[M:.+]] = memref.dim %{{.+}}, %c1
//   CHECK-DAG:   %[[N:.+]] = memref.dim %{{.+}}, %c1
//       CHECK:   arith.ceildivui %[[N]], %c256
//       CHECK:   arith.ceildivui %[[M]], %c256
//       CHECK:   %[[WIDE:.+]] = arith.ceildivui %{{.+}}, %c66
//       CHECK:   %[[WIDEW:.+]] = arith.muli %[[WIDE]], %c198
//       CHECK:   arith.ceildivui %{{.+}}, %c128
//       CHECK:   arith.ceildivui %{{.+}}, %c128
//       CHECK:   %[[NARROW:.+]] = arith.ceildivui %{{.+}}, %c132
//       CHECK:   %[[NARROWW:.+]] = arith.muli %[[NARROW]], %c100
//       CHECK:   %[[FIRST:.+]] = arith.cmpi ule, %[[WIDEW]], %[[NARROWW]]
//       CHECK:   scf.if %[[FIRST]] {
//       CHECK:     gpu.launch_func @coda_kernels::@by_waves_gemm0 blocks
//       CHECK:   } else {
//       CHECK:     gpu.launch_func @coda_kernels::@by_waves_gemm0_w1 blocks
//       CHECK:   }
//       CHECK: gpu.func @by_waves_gemm0(
//  CHECK-SAME:   tile = [128, 256, 64]
//  CHECK-SAME:   variant_of = "by_waves_gemm0"
//  CHECK-SAME:   wave_cost = 198 : i64
//       CHECK: gpu.func @by_waves_gemm0_w1(
//  CHECK-SAME:   tile = [128, 128, 64]
//  CHECK-SAME:   variant_of = "by_waves_gemm0"
//  CHECK-SAME:   wave_cost = 100 : i64
func.func @by_waves(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_a : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = [
        #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4, cluster_m = 2, wave_cost = 198>,
        #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 128, stages = 4, wave_cost = 100>]} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

func.func @waves_and_bound(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  // expected-error @+1 {{'coda.gemm_config': in an array dispatched by waves every configuration has a wave_cost and none a max_k}}
  coda.gemm %a, %b transpose_a : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = [
        #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4, wave_cost = 198>,
        #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 128, stages = 4>]} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

func.func @bound_then_waves(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  // expected-error @+1 {{'coda.gemm_config': an array dispatched by K weighs no waves (wave_cost)}}
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = [
        #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4, max_k = 4096>,
        #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4, wave_cost = 100>]} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

func.func @waves_alone(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  // expected-error @+1 {{'coda.gemm_config' bounds K (max_k) or weighs waves (wave_cost) only in an array of configurations}}
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4, wave_cost = 100>} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

func.func @bound_alone(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  // expected-error @+1 {{'coda.gemm_config' bounds K (max_k) or weighs waves (wave_cost) only in an array of configurations}}
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4, max_k = 4096>} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

func.func @bounded_last(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  // expected-error @+1 {{'coda.gemm_config': the last configuration takes every larger K and has no max_k}}
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = [
        #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4, max_k = 2048>,
        #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4, max_k = 4096>]} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

func.func @descending(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  // expected-error @+1 {{'coda.gemm_config': every configuration but the last needs a max_k above the previous one's}}
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = [
        #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4, max_k = 4096>,
        #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 3, max_k = 2048>,
        #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4>]} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

func.func @one_in_array(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  // expected-error @+1 {{'coda.gemm_config' must be a #coda.gemm_config or an array of two or more dispatched by K or by waves}}
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = [
        #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4>]} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

func.func @misplaced(%x: f32) -> f32 {
  // expected-error @+1 {{'coda.gemm_config' belongs on coda.gemm}}
  %y = arith.addf %x, %x {coda.gemm_config = #coda.gemm_config<schedule = single, tile_m = 64, tile_n = 128, stages = 4>} : f32
  return %y : f32
}

// -----

func.func @bad_sizes(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  // expected-error @+1 {{'coda.gemm_config' needs positive sizes}}
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = single, tile_m = 0, tile_n = 128, stages = 4>} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

func.func @bad_swizzle(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  // expected-error @+1 {{'coda.gemm_config' needs positive sizes}}
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4, swizzle = 0>} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

func.func @bad_unroll(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  // expected-error @+1 {{'coda.gemm_config' needs positive sizes}}
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = single, tile_m = 128, tile_n = 128, stages = 4, epilogue_unroll = -1>} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}
