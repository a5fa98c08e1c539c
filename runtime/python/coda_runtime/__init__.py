"""coda runtime: load what coda-compile wrote and launch its kernels.

    import coda_runtime
    module = coda_runtime.Module("out/block")
    module.launch("block_gemm0", [x, w, ...])        # torch tensors, numbers
"""

from ._coda_runtime import Error, Module, TensorRef, validate

__all__ = ["Error", "Module", "TensorRef", "validate"]
