# RUN: %python %s | FileCheck %s
# REQUIRES: python-bindings

# A pass that fails makes run_pipeline raise, with the pass's diagnostic, and
# the next call starts clean.

import coda

EMPTY = "func.func @nothing() { return }"

# CHECK: the pipeline failed:
# CHECK-NEXT: error: expects functions @fused and @reference
try:
    coda.run_pipeline(EMPTY, "builtin.module(coda-test-differential-main)")
    print("a failing pass went unnoticed")
except coda.CompilerError as error:
    print(error)

# CHECK: func.func @nothing()
print(coda.run_pipeline(EMPTY, "builtin.module(canonicalize)"))
