//===- RuntimeModule.cpp - Python bindings of the coda runtime ------------===//
//
// `coda_runtime.Module(directory)` loads a coda-compile output directory;
// `.launch(kernel, args, stream=0)` validates and launches. Arguments are torch
// tensors (anything with data_ptr(), shape, stride(), dtype and device),
// `TensorRef`s for raw pointers, or Python numbers for scalar inputs.
//
//===----------------------------------------------------------------------===//

#include "coda/Runtime/Runtime.h"

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

namespace py = pybind11;
using namespace coda::runtime;

namespace {

DType dtypeOf(const py::handle &dtype) {
  std::string name = py::str(dtype);
  static const std::pair<const char *, DType> names[] = {
      {"torch.bfloat16", DType::bf16}, {"torch.float16", DType::f16},
      {"torch.float32", DType::f32},   {"torch.float64", DType::f64},
      {"torch.int32", DType::i32},     {"torch.int64", DType::i64},
      {"torch.int8", DType::i8},       {"torch.bool", DType::i1},
      {"torch.float8_e4m3fn", DType::f8e4m3fn},
      {"torch.float8_e5m2", DType::f8e5m2}};
  for (auto &[n, d] : names)
    if (name == n)
      return d;
  throw Error("unsupported tensor dtype " + name);
}

Argument toArgument(const py::handle &object) {
  if (py::isinstance<TensorRef>(object))
    return object.cast<TensorRef>();
  if (py::isinstance<py::float_>(object) || py::isinstance<py::int_>(object))
    return object.cast<double>();
  if (py::hasattr(object, "data_ptr") && py::hasattr(object, "stride")) {
    TensorRef t;
    t.data = object.attr("data_ptr")().cast<uint64_t>();
    t.dtype = dtypeOf(object.attr("dtype"));
    for (py::handle size : object.attr("shape"))
      t.sizes.push_back(size.cast<int64_t>());
    t.strides = object.attr("stride")().cast<std::vector<int64_t>>();
    py::object device = object.attr("device");
    t.device = device.attr("type").cast<std::string>() == "cuda"
                   ? device.attr("index").cast<int>()
                   : -1;
    return t;
  }
  throw Error("cannot pass a " +
              std::string(py::str(object.get_type().attr("__name__"))) +
              " to a coda kernel (expected a tensor or a number)");
}

std::vector<Argument> toArguments(const py::sequence &args) {
  std::vector<Argument> out;
  for (py::handle a : args)
    out.push_back(toArgument(a));
  return out;
}

} // namespace

PYBIND11_MODULE(_coda_runtime, m) {
  m.doc() = "coda runtime: load coda-compile output and launch its kernels";
  py::register_exception<Error>(m, "Error", PyExc_ValueError);

  py::class_<TensorRef>(m, "TensorRef")
      .def(py::init([](uint64_t data, const std::string &dtype,
                       std::vector<int64_t> sizes, std::vector<int64_t> strides,
                       int device) {
             return TensorRef{data, parseDType(dtype), std::move(sizes),
                              std::move(strides), device};
           }),
           py::arg("data"), py::arg("dtype"), py::arg("sizes"),
           py::arg("strides"), py::arg("device") = 0)
      .def_readonly("data", &TensorRef::data)
      .def_property_readonly(
          "dtype", [](const TensorRef &t) { return dtypeName(t.dtype); })
      .def_readonly("sizes", &TensorRef::sizes)
      .def_readonly("strides", &TensorRef::strides)
      .def_readonly("device", &TensorRef::device)
      .def("__repr__", [](const TensorRef &t) {
        std::string sizes;
        for (int64_t d : t.sizes)
          sizes += (sizes.empty() ? "" : ", ") + std::to_string(d);
        return "TensorRef(" + std::string(dtypeName(t.dtype)) + "[" + sizes +
               "] at " + std::to_string(t.data) + ", device " +
               std::to_string(t.device) + ")";
      });

  m.def(
      "validate",
      [](const std::string &manifestPath, const std::string &kernel,
         const py::sequence &args) {
        GemmSizes s = validate(Manifest::load(manifestPath).kernel(kernel),
                               toArguments(args));
        return py::make_tuple(s.m, s.n, s.k);
      },
      py::arg("manifest"), py::arg("kernel"), py::arg("args"),
      "Checks launch arguments against a manifest without a GPU; returns "
      "(M, N, K) or raises Error listing every problem.");

  py::class_<Module>(m, "Module")
      .def(py::init([](const std::string &directory, int device) {
             return Module::load(directory, device);
           }),
           py::arg("directory"), py::arg("device") = 0)
      .def_property("dependent_launch", &Module::dependentLaunch,
                    &Module::setDependentLaunch,
                    "Whether kernels marked dependent_launch in the manifest "
                    "are launched with programmatic stream serialization, "
                    "scheduled as the kernel before them exits (True by "
                    "default).")
      .def_property_readonly("kernels",
                             [](const Module &self) {
                               std::vector<std::string> names;
                               for (const KernelSpec &k :
                                    self.manifest().kernels)
                                 names.push_back(k.name);
                               return names;
                             })
      .def(
          "kernel_for",
          [](const Module &self, const std::string &function,
             const std::string &role) {
            return self.manifest().kernelFor(function, role).name;
          },
          py::arg("function"), py::arg("role"),
          "The name of the kernel of `function` with role `role` (for "
          "example 'adjoint:gemm0' or 'grad:gemm0.rhs'; KernelABI.md).")
      .def(
          "kernels_of",
          [](const Module &self, const std::string &function) {
            std::vector<std::string> names;
            // In launch order; a GEMM dispatched by K or by waves is named
            // once (its other variants are launched through that name). Loop
            // kernels run in the function's program only.
            for (const KernelSpec &k : self.manifest().kernels)
              if (k.function == function && !k.isDispatchedVariant() &&
                  k.kind != KernelSpec::Kind::loop)
                names.push_back(k.name);
            return names;
          },
          py::arg("function"),
          "The GEMM and finish kernels of a function, in launch order")
      .def(
          "validate",
          [](const Module &self, const std::string &kernel,
             const py::sequence &args) {
            GemmSizes s = validate(self.manifest().kernel(kernel),
                                   toArguments(args));
            return py::make_tuple(s.m, s.n, s.k);
          },
          py::arg("kernel"), py::arg("args"))
      .def(
          "launch",
          [](Module &self, const std::string &kernel, const py::sequence &args,
             uint64_t stream) {
            self.launch(kernel, toArguments(args), stream);
          },
          py::arg("kernel"), py::arg("args"), py::arg("stream") = 0)
      .def(
          "launch_kernel",
          [](Module &self, const std::string &kernel, const py::sequence &args,
             uint64_t stream) {
            self.launchKernel(kernel, toArguments(args), stream);
          },
          py::arg("kernel"), py::arg("args"), py::arg("stream") = 0,
          "Like launch, with the kernel's own tensor and scalar parameters in "
          "their order (M, N, K excepted)")
      .def_property_readonly("functions",
                             [](const Module &self) {
                               std::vector<std::string> names;
                               for (const FunctionSpec &f :
                                    self.manifest().functions)
                                 names.push_back(f.name);
                               return names;
                             })
      .def("workspace_bytes", &Module::workspaceBytes, py::arg("function"),
           "The workspace launch_function needs for the function's "
           "temporaries, in bytes")
      .def(
          "set_callback",
          [](Module &self, const std::string &name, py::function callback) {
            self.setCallback(name, [callback](const std::vector<Argument> &args,
                                              uint64_t stream) {
              py::list list;
              for (const Argument &a : args) {
                if (std::holds_alternative<TensorRef>(a))
                  list.append(py::cast(std::get<TensorRef>(a)));
                else
                  list.append(std::get<double>(a));
              }
              callback(list, stream);
            });
          },
          py::arg("name"), py::arg("callback"),
          "Registers the host function that a program's call of `name` "
          "runs: callback(args, stream), args being TensorRefs (outputs "
          "last) and numbers")
      .def(
          "launch_function",
          [](Module &self, const std::string &function,
             const py::sequence &args, uint64_t stream,
             const py::object &workspace) {
            // The workspace is bytes: any tensor (uint8 is usual) or a
            // TensorRef.
            std::optional<TensorRef> space;
            if (py::isinstance<TensorRef>(workspace)) {
              space = workspace.cast<TensorRef>();
            } else if (!workspace.is_none()) {
              // Its bytes are one range only where it is contiguous.
              if (py::hasattr(workspace, "is_contiguous") &&
                  !workspace.attr("is_contiguous")().cast<bool>())
                throw Error("the workspace of " + function +
                            " must be a contiguous tensor");
              space = TensorRef{};
              space->data = workspace.attr("data_ptr")().cast<uint64_t>();
              space->dtype = DType::i8;
              space->sizes = {workspace.attr("nbytes").cast<int64_t>()};
              space->strides = {1};
              py::object device = workspace.attr("device");
              space->device = device.attr("type").cast<std::string>() == "cuda"
                                  ? device.attr("index").cast<int>()
                                  : -1;
            }
            self.launchFunction(function, toArguments(args), stream,
                                space ? &*space : nullptr);
          },
          py::arg("function"), py::arg("args"), py::arg("stream") = 0,
          py::arg("workspace") = py::none(),
          "Runs a function whole (its program in the manifest): args are "
          "its arguments, outputs last; temporaries in `workspace` (a GPU "
          "tensor of workspace_bytes(function) bytes) or the module's own");
}
