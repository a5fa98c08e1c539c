//===- CudaDriver.cpp - the CUDA driver API, opened at run time -----------===//

#include "CudaDriver.h"

#include "coda/Runtime/Manifest.h"

#include <dlfcn.h>
#include <mutex>

using namespace coda::runtime;
using namespace coda::runtime::cuda;

namespace {
template <typename Fn>
void lookup(void *library, Fn &fn, const char *name) {
  fn = reinterpret_cast<Fn>(dlsym(library, name));
  if (!fn)
    throw Error(std::string("libcuda.so.1 has no ") + name +
                " (driver too old for sm_90 TMA?)");
}

Driver loadDriver() {
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library)
    throw Error(std::string("cannot open the CUDA driver (libcuda.so.1): ") +
                dlerror());
  Driver d;
  lookup(library, d.cuInit, "cuInit");
  lookup(library, d.cuDeviceGet, "cuDeviceGet");
  lookup(library, d.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  lookup(library, d.cuCtxGetDevice, "cuCtxGetDevice");
  lookup(library, d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  lookup(library, d.cuCtxGetCurrent, "cuCtxGetCurrent");
  lookup(library, d.cuCtxSetCurrent, "cuCtxSetCurrent");
  lookup(library, d.cuModuleLoadData, "cuModuleLoadData");
  lookup(library, d.cuModuleUnload, "cuModuleUnload");
  lookup(library, d.cuModuleGetFunction, "cuModuleGetFunction");
  lookup(library, d.cuFuncSetAttribute, "cuFuncSetAttribute");
  lookup(library, d.cuLaunchKernelEx, "cuLaunchKernelEx");
  lookup(library, d.cuGetErrorName, "cuGetErrorName");
  lookup(library, d.cuMemAlloc, "cuMemAlloc_v2");
  lookup(library, d.cuMemFree, "cuMemFree_v2");
  lookup(library, d.cuOccupancyMaxActiveClusters,
         "cuOccupancyMaxActiveClusters");
  lookup(library, d.cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled");
  return d;
}
} // namespace

const Driver &coda::runtime::cuda::driver() {
  static std::once_flag once;
  static Driver instance;
  static std::string failure;
  std::call_once(once, [] {
    try {
      instance = loadDriver();
    } catch (const Error &e) {
      failure = e.what();
    }
  });
  if (!failure.empty())
    throw Error(failure);
  return instance;
}

void coda::runtime::cuda::fail(CUresult result, const std::string &what) {
  const char *name = nullptr;
  driver().cuGetErrorName(result, &name);
  throw Error(what + ": " + (name ? name : "CUDA error " +
                                               std::to_string(result)));
}
