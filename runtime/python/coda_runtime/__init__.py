"""coda runtime: load what coda-compile wrote and launch its kernels.

    import coda_runtime
    module = coda_runtime.Module("out/block")
    module.launch("block_gemm0", [x, w, ...])        # torch tensors, numbers
    module.set_callback("attention", attention)      # external calls
    module.launch_function("block", [x, ..., out])   # a function whole
"""

from ._coda_runtime import Error, Module, TensorRef, validate

__all__ = ["Error", "Module", "TensorRef", "to_torch", "validate"]

# dtype: (torch dtype name, __cuda_array_interface__ typestr). bf16 and the
# 8-bit floats have no typestr: their bits travel as int16 / uint8 and are
# viewed as the float type.
_TORCH = {"bf16": ("bfloat16", "<i2"), "f16": ("float16", "<f2"),
          "f32": ("float32", "<f4"), "f64": ("float64", "<f8"),
          "i32": ("int32", "<i4"), "i64": ("int64", "<i8"),
          "i8": ("int8", "|i1"), "i1": ("bool", "|b1"),
          "f8E4M3FN": ("float8_e4m3fn", "|u1"), "f8E5M2": ("float8_e5m2", "|u1")}


def to_torch(ref):
    """A torch tensor over the GPU memory of `ref` (a TensorRef a callback
    receives), without a copy."""
    import torch

    name, typestr = _TORCH[ref.dtype]
    itemsize = int(typestr[2:])

    class _Memory:
        __cuda_array_interface__ = {
            "shape": tuple(ref.sizes),
            "strides": tuple(s * itemsize for s in ref.strides),
            "typestr": typestr, "data": (ref.data, False), "version": 3}

    tensor = torch.as_tensor(_Memory(), device=f"cuda:{ref.device}")
    viewed = ref.dtype in ("bf16", "f8E4M3FN", "f8E5M2")
    return tensor.view(getattr(torch, name)) if viewed else tensor
