# -*- Python -*-
# lit configuration for the coda regression tests.

import os
import shutil

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "CODA"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test", ".py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.coda_obj_root, "test")
config.excludes = ["lib", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py",
                   "check_mlp_example.py", "GPU", "Inputs"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%shlibext", config.shlib_ext))
config.substitutions.append(("%coda_src_root", config.coda_src_root))
config.substitutions.append(("%coda_obj_root", config.coda_obj_root))
config.substitutions.append(("%coda_tools_dir", config.coda_tools_dir))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()
# FileCheck, not, count: from the LLVM tool directory (Debian has no llvm-lit
# build tree).
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

lib = lambda name: os.path.join(config.mlir_lib_dir, name + config.shlib_ext)
mlir_runner_utils = lib("libmlir_runner_utils")
mlir_c_runner_utils = lib("libmlir_c_runner_utils")
# The APFloat calls --coda-to-llvm-cpu makes for 8-bit float arithmetic.
mlir_apfloat_wrappers = lib("libmlir_apfloat_wrappers")
coda_runner_utils = os.path.join(
    config.coda_lib_dir, "libcoda_test_runner_utils" + config.shlib_ext)
coda_opt = os.path.join(config.coda_tools_dir, "coda-opt")
mlir_runner = os.path.join(config.llvm_tools_dir, "mlir-runner")

# `%cpu-runner`: the whole CPU path, from coda IR on stdin to a run of @main
# under mlir-runner with the upstream runner utils and coda's test helpers.
# `%differential`: builds that @main from @fused and @reference (see
# test/lib/Passes/TestDifferentialMain.cpp).
config.substitutions.append(
    ("%differential", f"{coda_opt} --coda-test-differential-main"))
# `%run-main`: runs @main of lowered LLVM-dialect IR on stdin.
run_main = (f"{mlir_runner} -e main -entry-point-result=void "
            f"-shared-libs={mlir_runner_utils},{mlir_c_runner_utils},"
            f"{mlir_apfloat_wrappers},{coda_runner_utils}")
config.substitutions.append(("%run-main", run_main))
config.substitutions.append(
    ("%cpu-runner", f"{coda_opt} --coda-to-llvm-cpu | {run_main}"))
config.substitutions.append(
    ("%coda_plugin", os.path.join(config.coda_lib_dir, "CodaPlugin" + config.shlib_ext)))
config.substitutions.append(("%python", config.python_executable))
# `%cmake`, `%c_compiler`, `%cxx_compiler`: what built coda, for tests that
# install it and build a project against the installed package.
config.substitutions.append(("%cmake", config.cmake_command))
config.substitutions.append(("%c_compiler", config.c_compiler))
config.substitutions.append(("%cxx_compiler", config.cxx_compiler))

tool_dirs = [config.coda_tools_dir, config.llvm_tools_dir]
tools = [
    "coda-opt",
    "coda-compile",
    "coda-runtime-check",
    "mlir-runner",
    ToolSubst("mlir-opt", command=os.path.join(config.llvm_tools_dir, "mlir-opt")),
]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# Feature `exhaustive` (`--param exhaustive=1`: `scripts/test --all`, CI):
# the long sweeps run too, every kernel of every shipped program through
# ptxas and the generator's long runs; a test marked `REQUIRES: exhaustive`
# is otherwise reported unsupported, so that the default run stays short.
if lit_config.params.get("exhaustive", "0") not in ("0", "", "false"):
    config.available_features.add("exhaustive")

# The Python package, when it was built (pybind11 present).
python_package = os.path.join(config.coda_obj_root, "python")
if os.path.isdir(os.path.join(python_package, "coda")):
    config.available_features.add("python-bindings")
    llvm_config.with_environment("PYTHONPATH", python_package, append_path=True)

# Feature `ptxas`: the CUDA toolkit's ptxas and libdevice. The GPU pipeline
# links libdevice into kernels that use math functions and, with format=bin,
# assembles PTX with ptxas.
# Looked up like MLIR's serializer does: CUDA_ROOT/CUDA_HOME/CUDA_PATH, PATH,
# then the default install.
cuda_roots = [os.environ.get(v) for v in ("CUDA_ROOT", "CUDA_HOME", "CUDA_PATH")]
ptxas_candidates = [os.path.join(r, "bin", "ptxas") for r in cuda_roots if r]
ptxas_candidates += [shutil.which("ptxas") or "", "/usr/local/cuda/bin/ptxas"]
ptxas = next((p for p in ptxas_candidates if p and os.access(p, os.X_OK)), None)
# libdevice (exp, log, ... in kernels) ships next to it in the toolkit.
if ptxas and os.path.isdir(os.path.join(os.path.dirname(ptxas), "..", "nvvm", "libdevice")):
    config.available_features.add("ptxas")
    llvm_config.with_environment("PATH", os.path.dirname(ptxas), append_path=True)
    config.substitutions.append(("%ptxas", ptxas))
