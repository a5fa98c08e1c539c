"""Loads kernels compiled by coda-compile and launches them on torch tensors.

Driver API only (cuda.bindings), following the ABI in docs/KernelABI.md: TMA
descriptors are encoded here with cuTensorMapEncodeTiled and passed as device
pointers; every memref argument expands to (allocated, aligned, offset,
sizes..., strides...); index arguments are 64-bit.
"""

import ctypes
import json
import math
import os
import re

import torch
from cuda.bindings import driver as cu

_DTYPES = {
    "bf16": (torch.bfloat16, cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16),
    "f16": (torch.float16, cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16),
    "f32": (torch.float32, cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32),
    "i64": (torch.int64, None),
    "i32": (torch.int32, None),
}
_SCALARS = {"f32": ctypes.c_float, "f64": ctypes.c_double, "i32": ctypes.c_int32,
            "i64": ctypes.c_int64, "index": ctypes.c_int64}


def _check(result):
    err = result[0] if isinstance(result, tuple) else result
    if err != cu.CUresult.CUDA_SUCCESS:
        name = cu.cuGetErrorName(err)[1]
        raise RuntimeError(f"CUDA driver error {name}")
    if isinstance(result, tuple):
        return result[1] if len(result) == 2 else result[1:]
    return None


class KernelError(ValueError):
    pass


class CompiledModule:
    def __init__(self, directory):
        with open(os.path.join(directory, "manifest.json")) as f:
            self.manifest = json.load(f)
        torch.cuda.init()
        torch.empty(1, device="cuda")  # makes the primary context current
        _check(cu.cuInit(0))
        self.modules = {}
        for kernel in self.manifest["kernels"]:
            name = kernel["module"]
            if name not in self.modules:
                with open(os.path.join(directory, name + ".cubin"), "rb") as f:
                    self.modules[name] = _check(cu.cuModuleLoadData(f.read()))
        self.kernels = {k["name"]: k for k in self.manifest["kernels"]}
        self.functions = {}
        # Descriptors are encoded once per (tensor address, layout, box).
        self.tensormaps = {}

    def kernels_of(self, function):
        return [k for k in self.manifest["kernels"] if k["function"] == function]

    def launch(self, name, args, stream=None):
        """Launches kernel `name`; `args` are the host function's arguments."""
        kernel = self.kernels[name]
        smem = kernel["shared_memory_bytes"]
        func = self.functions.get(name)
        if func is None:
            func = _check(cu.cuModuleGetFunction(self.modules[kernel["module"]], name.encode()))
            _check(cu.cuFuncSetAttribute(
                func, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem))
            self.functions[name] = func
        params = kernel["params"]
        lhs, rhs = args[params[0]["source"]], args[params[1]["source"]]
        transpose_b = kernel["transpose_b"]
        sizes = {"M": lhs.shape[0], "K": lhs.shape[1],
                 "N": rhs.shape[0] if transpose_b else rhs.shape[1]}
        values, types, keep = [], [], []
        for p in params:
            kind = p["kind"]
            if kind == "tensormap":
                tensor = args[p["source"]]
                self._validate(p, tensor)
                key = (tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride()),
                       p["dtype"], tuple(p["box"]))
                desc = self.tensormaps.get(key)
                if desc is None:
                    desc = self.tensormaps[key] = self._tensormap(p, tensor)
                keep.append(desc)
                values.append(desc.data_ptr())
                types.append(ctypes.c_void_p)
            elif kind == "index":
                values.append(sizes[p["name"]])
                types.append(ctypes.c_int64)
            elif kind == "scalar":
                values.append(args[p["source"]])
                types.append(_SCALARS[p["dtype"]])
            else:
                tensor = args[p["source"]]
                self._validate(p, tensor)
                values += [tensor.data_ptr(), tensor.data_ptr(), 0]
                types += [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
                values += list(tensor.shape) + list(tensor.stride())
                types += [ctypes.c_int64] * (2 * tensor.dim())
        grid = [self._eval(g, sizes) for g in kernel["grid"]]
        if min(grid) == 0:
            return
        block = kernel["block"]
        handle = stream.cuda_stream if stream is not None else torch.cuda.current_stream().cuda_stream
        _check(cu.cuLaunchKernel(func, *grid, *block, smem, handle,
                                 (tuple(values), tuple(types)), 0))
        self._keep = keep  # descriptors must outlive the launch

    @staticmethod
    def _eval(expr, sizes):
        m = re.fullmatch(r"ceildiv\((\w), (\d+)\)", expr)
        if m:
            return math.ceil(sizes[m.group(1)] / int(m.group(2)))
        return int(expr)

    @staticmethod
    def _validate(p, tensor):
        dtype = _DTYPES[p["dtype"]][0]
        if tensor.dtype != dtype:
            raise KernelError(f"{p['name']}: expected {p['dtype']}, got {tensor.dtype}")
        if not tensor.is_cuda:
            raise KernelError(f"{p['name']}: tensor is not on the GPU")
        if "shape" in p:
            if tensor.dim() != len(p["shape"]):
                raise KernelError(f"{p['name']}: expected rank {len(p['shape'])}, got {tensor.dim()}")
            for want, got in zip(p["shape"], tensor.shape):
                if want != -1 and want != got:
                    raise KernelError(f"{p['name']}: expected shape {p['shape']}, got {list(tensor.shape)}")
        if p["kind"] == "tensormap":
            if tensor.stride(-1) != 1 or (tensor.stride(0) * tensor.element_size()) % 16 \
                    or tensor.data_ptr() % 16:
                raise KernelError(f"{p['name']}: TMA needs a 16-byte aligned, row-major tensor")

    @staticmethod
    def _tensormap(p, tensor):
        dtype = _DTYPES[p["dtype"]][1]
        rows, cols = tensor.shape
        dims = [cu.cuuint64_t(cols), cu.cuuint64_t(rows)]
        strides = [cu.cuuint64_t(tensor.stride(0) * tensor.element_size())]
        box = [cu.cuuint32_t(b) for b in p["box"]]
        ones = [cu.cuuint32_t(1), cu.cuuint32_t(1)]
        tmap = _check(cu.cuTensorMapEncodeTiled(
            dtype, 2, tensor.data_ptr(), dims, strides, box, ones,
            cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
            cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE))
        raw = ctypes.string_at(tmap.getPtr(), 128)
        return torch.frombuffer(bytearray(raw), dtype=torch.uint8).cuda()
