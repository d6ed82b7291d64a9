/* cofactor runtime: support for Enzyme custom gradients (docs/gradients.md).
 *
 * Compiled code calls these from the `fwd_impl`/`rev_impl` functions that
 * `cofactor-opt --cofactor-custom-gradients` emits, and from the bodies of Python
 * callbacks. Every function is `extern "C"` and never aborts: failures are reported
 * by the returned status (0 = ok, otherwise a `cf_status` code of runtime.h), and
 * every function is a no-op returning that pending code while the runtime's error
 * slot holds an error (see runtime.h).
 */
#ifndef COFACTOR_GRADIENT_SUPPORT_H
#define COFACTOR_GRADIENT_SUPPORT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- tapes: residuals kept between an augmented forward and its reverse ----------- */
/* A tape is a list of byte buffers. `cf_rt_tape_save(0, data, n)` starts a new tape
 * holding a copy of the n bytes at data and returns its handle (> 0);
 * `cf_rt_tape_save(tape, data, n)` appends a copy to an existing tape and returns
 * `tape`. Returns -1 on failure (then saving to, loading from and freeing -1 are
 * harmless no-ops). Tapes may be created on one thread and used on another. */
int64_t cf_rt_tape_save(int64_t tape, const void *data, int64_t nbytes);
/* Copies buffer `index` (0-based, in save order) of `tape` to dst, which has room for
 * nbytes; nbytes must equal the saved size. Returns a status. */
int64_t cf_rt_tape_load(int64_t tape, int64_t index, void *dst, int64_t nbytes);
/* Frees a tape (0 and -1 are ignored). Returns a status. */
int64_t cf_rt_tape_free(int64_t tape);
/* How many tapes are alive (saved and not freed): for leak checks in tests. */
int64_t cf_rt_tape_live_count(void);

/* ---- the Python-callback trampoline ----------------------------------------------- */
enum cf_callback_kind {
    /* args: the inputs then the outputs; the callback writes the outputs. */
    CF_CALLBACK_PRIMAL = 0,
    /* args: the inputs, then one cotangent per output, then one buffer per input into
     * which the callback writes (overwrites) its vector-Jacobian product. */
    CF_CALLBACK_VJP = 1,
};
/* args[i] is the data pointer of argument i (contiguous, row-major); the shapes and
 * dtypes are known to the Python side from the callback's traced signature. Returns 0
 * on success, anything else on failure (Python keeps the exception to re-raise). */
typedef int64_t (*cf_callback_trampoline)(int64_t callback_id, int64_t kind,
                                          int64_t num_args, void *const *args);
/* Installs the trampoline (process-wide; NULL uninstalls). Python registers it once,
 * through ctypes, before running compiled code that contains callbacks. */
void cf_rt_set_callback_trampoline(cf_callback_trampoline fn);
/* Calls the trampoline. Returns CF_ERR_NOT_SUPPORTED when none is installed, and
 * CF_ERR_INTERNAL when the callback reports a failure. */
int64_t cf_rt_callback(int64_t callback_id, int64_t kind, int64_t num_args, void *const *args);

#ifdef __cplusplus
}
#endif
#endif /* COFACTOR_GRADIENT_SUPPORT_H */
