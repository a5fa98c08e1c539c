"""coda: GEMMs with fused epilogue programs, as an MLIR dialect.

The compiler entry points (needs the package built against MLIR 22):

    import coda
    text = coda.run_pipeline(source, "builtin.module(coda-lower-to-linalg)")
    coda.verify(source)   # raises coda.CompilerError with MLIR's diagnostics
    coda.compile(source, "out/dir")   # linalg fused first; cubins,
                                      # manifest.json for coda_runtime
    coda.compile(source, "out/bw", derive_backward=True, save_for_backward=True,
                 schedule="staged")       # coda-compile's options
"""

from ._coda_compiler import (SPILL_ALLOWANCE_BYTES, CompilerError, compile,
                             find_ptxas, run_pipeline, verify)

__all__ = ["SPILL_ALLOWANCE_BYTES", "CompilerError", "compile", "find_ptxas",
           "run_pipeline", "verify"]
