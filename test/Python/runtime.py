# RUN: coda-opt %S/../Runtime/kernels.mlir --coda-to-gpu --coda-export-kernel-manifest=path=%t.json -o /dev/null
# RUN: %python %s %t.json | FileCheck %s
# REQUIRES: python-bindings

# The runtime's Python bindings check launch arguments without a GPU; torch
# tensors are taken by duck typing (data_ptr, shape, stride, dtype, device).

import sys

import coda_runtime

manifest = sys.argv[1]


class FakeDevice:
    def __init__(self, type, index):
        self.type, self.index = type, index


class FakeTensor:
    """What the bindings read from a torch.Tensor."""

    def __init__(self, dtype, shape, device="cuda", data=0x10000):
        self.dtype, self.shape, self._data = dtype, shape, data
        self.device = FakeDevice(device, 0 if device == "cuda" else None)

    def data_ptr(self):
        return self._data

    def stride(self):
        strides, step = [], 1
        for size in reversed(self.shape):
            strides.insert(0, step)
            step *= size
        return strides


def ref(dtype, sizes, data=0x20000):
    strides, step = [], 1
    for size in reversed(sizes):
        strides.insert(0, step)
        step *= size
    return coda_runtime.TensorRef(data, dtype, sizes, strides)


args = [ref("bf16", [200, 256]), ref("bf16", [328, 256]), ref("bf16", [200, 328]),
        ref("f32", [200]), 0.5, ref("bf16", [200, 328]), ref("f32", [200, 3])]
print(coda_runtime.validate(manifest, "norm_gemm0", args))
# CHECK: (200, 328, 256)

args[0] = FakeTensor("torch.bfloat16", [200, 256])
print(coda_runtime.validate(manifest, "norm_gemm0", args))
# CHECK: (200, 328, 256)

args[0] = FakeTensor("torch.float32", [200, 256], device="cpu")
try:
    coda_runtime.validate(manifest, "norm_gemm0", args)
except coda_runtime.Error as e:
    print(e)
# CHECK: cannot launch norm_gemm0:
# CHECK-NEXT: - lhs, argument 0 must be bf16, got f32
# CHECK-NEXT: - lhs, argument 0 is in host memory; coda kernels read GPU memory

try:
    coda_runtime.validate(manifest, "norm_gemm0", args[:1] + ["x"])
except coda_runtime.Error as e:
    print(e)
# CHECK: cannot pass a str to a coda kernel (expected a tensor or a number)

print(issubclass(coda_runtime.Error, ValueError))
# CHECK: True
