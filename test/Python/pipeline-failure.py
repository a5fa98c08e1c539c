# RUN: %python %s | FileCheck %s
# REQUIRES: python-bindings

# A pass that fails makes run_pipeline raise, with the pass's diagnostic, and
# a later call starts clean.

import coda

# math.exp on a whole tensor has no bufferization: one-shot-bufferize fails.
UNBUFFERIZABLE = """
func.func @exp(%t: tensor<4xf32>) -> tensor<4xf32> {
  %0 = math.exp %t : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""

# CHECK: the pipeline failed:
# CHECK-NEXT: error: op was not bufferized
# CHECK-NEXT: note: see current operation: {{.*}}"math.exp"
try:
    coda.run_pipeline(UNBUFFERIZABLE, "builtin.module(one-shot-bufferize)")
    print("a failing pass went unnoticed")
except coda.CompilerError as error:
    print(error)

# CHECK: func.func @nothing()
print(coda.run_pipeline("func.func @nothing() { return }", "builtin.module(canonicalize)"))
