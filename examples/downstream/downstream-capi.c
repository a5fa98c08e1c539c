/*===- downstream-capi.c - coda through its C API ------------------------===*\
|*                                                                            *|
|* downstream-capi FILE [PIPELINE]: parses FILE with the func, linalg, tensor *|
|* and coda dialects loaded through their C API handles, runs PIPELINE        *|
|* (parsed from text after mlirRegisterCodaPasses) or, without one, the pass  *|
|* mlirCreateCodaTransformsCodaFuse() makes, and prints the module.           *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "coda-c/Coda.h"
#include "mlir-c/Dialect/Func.h"
#include "mlir-c/Dialect/Linalg.h"
#include "mlir-c/Dialect/Tensor.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void printTo(MlirStringRef text, void *stream) {
  fwrite(text.data, 1, text.length, (FILE *)stream);
}

static char *readFile(const char *path) {
  FILE *file = fopen(path, "rb");
  if (!file)
    return NULL;
  fseek(file, 0, SEEK_END);
  long size = ftell(file);
  fseek(file, 0, SEEK_SET);
  char *text = malloc(size + 1);
  size_t read = fread(text, 1, size, file);
  text[read] = '\0';
  fclose(file);
  return text;
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s FILE [PIPELINE]\n", argv[0]);
    return 2;
  }
  char *source = readFile(argv[1]);
  if (!source) {
    fprintf(stderr, "cannot read %s\n", argv[1]);
    return 1;
  }

  MlirStringRef name =
      mlirDialectHandleGetNamespace(mlirGetDialectHandle__coda__());
  printf("// dialect: %.*s\n", (int)name.length, name.data);

  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirDialectHandleInsertDialect(mlirGetDialectHandle__func__(), registry);
  mlirDialectHandleInsertDialect(mlirGetDialectHandle__linalg__(), registry);
  mlirDialectHandleInsertDialect(mlirGetDialectHandle__tensor__(), registry);
  mlirRegisterCodaDialects(registry);
  MlirContext context = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);

  int status = 1;
  MlirModule module =
      mlirModuleCreateParse(context, mlirStringRefCreateFromCString(source));
  if (mlirModuleIsNull(module)) {
    fprintf(stderr, "cannot parse %s\n", argv[1]);
    goto done;
  }
  MlirPassManager pm = mlirPassManagerCreate(context);
  if (argc == 3) {
    mlirRegisterCodaPasses();
    MlirLogicalResult parsed = mlirParsePassPipeline(
        mlirPassManagerGetAsOpPassManager(pm),
        mlirStringRefCreateFromCString(argv[2]), printTo, stderr);
    if (mlirLogicalResultIsFailure(parsed)) {
      fprintf(stderr, "\ncannot parse the pipeline\n");
      mlirPassManagerDestroy(pm);
      goto done;
    }
  } else {
    mlirPassManagerAddOwnedPass(pm, mlirCreateCodaTransformsCodaFuse());
  }
  if (mlirLogicalResultIsFailure(
          mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module)))) {
    fprintf(stderr, "the passes failed\n");
  } else {
    mlirOperationPrint(mlirModuleGetOperation(module), printTo, stdout);
    printf("\n");
    status = 0;
  }
  mlirPassManagerDestroy(pm);
done:
  if (!mlirModuleIsNull(module))
    mlirModuleDestroy(module);
  mlirContextDestroy(context);
  free(source);
  return status;
}
