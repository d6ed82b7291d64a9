/*===- cofactor_compiler.h - the in-process compiler's C ABI -----------------===*
 *
 * libcofactor-compiler.so runs cofactor's whole pipeline inside the caller's process:
 * parse MLIR, cofactor's passes and the standard lowering (as cofactor-opt), translation
 * to LLVM IR (as mlir-translate), O2 with Enzyme when asked (as opt), code generation (as
 * llc) into memory, and linking with lld into a shared library (as cc). The Python driver
 * (frontend/cofactor/native_compiler.py) loads it with ctypes. Calls are serialized by a
 * lock inside the library, so it may be called from any thread.
 *
 *===--------------------------------------------------------------------------===*/
#ifndef COFACTOR_COMPILER_H
#define COFACTOR_COMPILER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Opens the Enzyme plugin after checking it; returns a descriptor, or -1 (the caller then
 * knows why). Called at most once per process, when a module first needs Enzyme. */
typedef int (*cofactor_open_plugin_fn)(void);

typedef struct cofactor_compile_request {
  const char *mlir;            /* the module's text */
  const char *mlir_pipeline;   /* textual MLIR pipeline, e.g. "pass-a,pass-b" */
  const char *plain_pipeline;  /* LLVM new-PM pipeline without Enzyme */
  const char *enzyme_pipeline; /* ... and with it (module calls __enzyme_autodiff*) */
  cofactor_open_plugin_fn open_plugin;
  const char *output;          /* the shared library to write; NULL: stop after opt */
  const char *const *link_args; /* lld arguments after the object ("-L", "-l:..."), */
  int num_link_args;           /* the system libraries are added by the library */
  int keep_stages;             /* nonzero: return the text of every stage */
  int num_runtime_link_args;   /* the last ones of link_args link the runtime: only for a */
                               /* module that calls it (cf_rt_*); since ABI version 7 */
} cofactor_compile_request;

typedef struct cofactor_compile_result {
  /* On failure: the stage that failed ("cofactor-opt", "mlir-translate", "opt", "llc",
   * "link") and its diagnostics; both NULL on success. */
  char *stage;
  char *message;
  /* With keep_stages (else NULL): lowered MLIR, LLVM IR, optimized LLVM IR. */
  char *mlir_opt;
  char *llvmir;
  char *llvmir_opt;
  /* Milliseconds: MLIR passes and translation, printing the stage texts, opt, codegen, link;
   * then the parts of opt: opening and loading the Enzyme plugin, the pipeline's elements
   * before its last one (Enzyme), its last element (O2). */
  double ms[8];
  /* Nonzero when LLVM or Enzyme crashed (a signal such as SIGSEGV inside the compile): the
   * process survived, but LLVM's global state may be damaged, so the caller should not use
   * the library again in this process. */
  int crashed;
} cofactor_compile_result;

/* Returns 0 on success, nonzero on failure (result->stage says where). */
int cofactor_compile(const cofactor_compile_request *request,
                     cofactor_compile_result *result);

/* Frees the strings of a result (not the struct). */
void cofactor_free_result(cofactor_compile_result *result);

/* The one-time set-up (dialect and pass registries, code generation targets), for a thread
 * that preloads the library; cofactor_compile does it too when needed. */
void cofactor_compiler_warm_up(void);

/* Loads the Enzyme plugin from `fd` (a descriptor of the checked plugin, not closed here)
 * unless it is loaded already, so that a later compile that needs it does not (beside a
 * compile's lowering at most; COFACTOR_COMPILER_SERIAL_ENZYME_LOAD=1: under the compile
 * lock): for a thread that prepares it while the program is traced. The descriptor
 * is given, not asked for through a callback: a Python callback would wait for the GIL,
 * which the tracing thread holds, for up to Python's switch interval (5 ms). Returns 0
 * when the plugin is loaded, 1 when it could not be (the compile that needs it reports
 * why), 2 when the load crashed (as `crashed` of a compile result: do not use the library
 * again). Since ABI version 6 (before: a callback that opened the plugin). */
int cofactor_compiler_load_enzyme(int fd);

/* cofactor_compiler_load_enzyme(fd) in a thread of the library's own, once per process
 * (a copy of `fd` is kept until the load ends): the caller does not wait for a thread to
 * start, nor does the load wait for the GIL. Returns 0 when the thread was started, 1 when
 * not (a load was started before, or no thread). Since ABI version 7. */
int cofactor_compiler_load_enzyme_async(int fd);

/* The status of the load cofactor_compiler_load_enzyme_async started: -1 when none was,
 * -2 while it runs (unless `wait`, which waits for its end), else what
 * cofactor_compiler_load_enzyme returned. Since ABI version 7. */
int cofactor_compiler_enzyme_load_status(int wait);

/* The ABI version the Python driver checks before its first call. */
int cofactor_compiler_abi_version(void);

#ifdef __cplusplus
}
#endif

#endif /* COFACTOR_COMPILER_H */
