// An epilogue the selector's rules send to ping-pong (interleaved output),
// whose chain of accurate tanh / exp per element ptxas spills there; and the
// same GEMM with its configuration pinned, which the check leaves alone.
func.func @chained(%a: memref<?x1024xbf16>, %b: memref<1024x1024xbf16>, %d: memref<?x2048xf16>) {
  coda.gemm %a, %b : memref<?x1024xbf16>, memref<1024x1024xbf16>
      epilogue(%acc) outs(%d : memref<?x2048xf16>) {
    %t = math.tanh %acc : f32
    %e = math.exp %t : f32
    %u = math.tanh %e : f32
    %h = arith.truncf %u : f32 to f16
    %l = arith.truncf %acc : f32 to f16
    %i = coda.interleave %h, %l : f16
    coda.yield %i : !coda.interleaved<f16>
  }
  return
}

func.func @pinned(%a: memref<?x1024xbf16>, %b: memref<1024x1024xbf16>, %d: memref<?x2048xf16>) {
  coda.gemm %a, %b : memref<?x1024xbf16>, memref<1024x1024xbf16>
      epilogue(%acc) outs(%d : memref<?x2048xf16>)
      attributes {coda.gemm_config = #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4>} {
    %t = math.tanh %acc : f32
    %e = math.exp %t : f32
    %u = math.tanh %e : f32
    %h = arith.truncf %u : f32 to f16
    %l = arith.truncf %acc : f32 to f16
    %i = coda.interleave %h, %l : f16
    coda.yield %i : !coda.interleaved<f16>
  }
  return
}
