/* cofactor runtime: the C ABI that compiled cofactor programs (and the Python tests, via
 * ctypes) call to run quantum operations on a CPU simulator.
 *
 * Conventions
 * - Every function is `extern "C"`, named `cf_rt_*`, and never aborts or exits on bad
 *   input. Errors go to a per-thread error slot: the first error is kept, later operations
 *   become no-ops until `cf_rt_clear_error()`, and the caller (the Python launcher after a
 *   compiled call returns, or a test) reads `cf_rt_error_code()`/`cf_rt_error_message()` and
 *   raises. Functions that return a status return that same code (0 = ok).
 * - Wires are int64 indices into the current device's register, 0 .. num_qubits-1.
 * - Complex data (state vectors, matrices) is passed as `double*` to interleaved
 *   (re, im) pairs, which is bit-identical to numpy's complex128 and C's double _Complex.
 *   Matrices are row-major, dimension 2^k for k wires, wire order as given (first wire =
 *   most significant bit, PennyLane's convention).
 * - There is one "current device" per thread. `cf_rt_device_acquire` makes one current;
 *   a device of the same size is reused (its state reset to |0...0>) rather than
 *   re-allocated, so repeated calls of a compiled circuit do not pay for allocation.
 */
#ifndef COFACTOR_RUNTIME_H
#define COFACTOR_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- gate ids: position in gates.def ----------------------------------------------- */
enum cf_gate_id {
#define COFACTOR_GATE(name, np, nw) CF_GATE_##name,
#include "cofactor/gates.def"
#undef COFACTOR_GATE
    CF_GATE_COUNT
};

/* ---- error slot --------------------------------------------------------------------- */
enum cf_status {
    CF_OK = 0,
    CF_ERR_INVALID_ARGUMENT = 1, /* bad wire, repeated wire, wrong size, unknown id ... */
    CF_ERR_OUT_OF_MEMORY = 2,    /* too many qubits for the machine's memory */
    CF_ERR_NO_DEVICE = 3,        /* an operation with no current device */
    CF_ERR_POSTSELECTION = 4,    /* postselecting an outcome of zero probability */
    CF_ERR_NOT_SUPPORTED = 5,    /* e.g. a Jacobian method that does not apply */
    CF_ERR_INTERNAL = 6,
    CF_ERR_INDEX = 7,       /* compiled code indexed an array out of bounds (Python: IndexError) */
    CF_ERR_INTERRUPTED = 8, /* SIGINT arrived while compiled code ran (KeyboardInterrupt) */
    CF_ERR_NOT_FINITE = 9,  /* sampling a state with NaN/inf amplitudes, a NaN matrix (ValueError) */
};
int64_t cf_rt_error_code(void);
const char *cf_rt_error_message(void);
void cf_rt_clear_error(void);
/* Records an error in the slot (kept only if none is pending), for the parts of the
 * runtime outside the simulator (tapes, callbacks) and for callers. */
void cf_rt_report_error(int64_t code, const char *message);
/* Compiled code indexed axis `axis` (of size `size`) with `index` out of range: records
 * CF_ERR_INDEX with numpy's message "index I is out of bounds for axis A with size N" (kept
 * only if no error is pending, so the first bad index of a loop is the one reported). */
void cf_rt_index_error(int64_t index, int64_t axis, int64_t size);

/* ---- compiled code's memory (capi_alloc.cpp) ---------------------------------------- */
/* malloc / calloc for compiled code (the compiler renames its calls after Enzyme and the
 * optimizer). A request over 64 MiB is checked against the memory the process may still use
 * (its memory cgroup's too), less the bytes of the current cf_rt_call's results; a refused or
 * failed request records CF_ERR_OUT_OF_MEMORY and, inside cf_rt_call, returns from it (the
 * compiled function is abandoned); outside one it returns NULL. Freed with free(). */
void *cf_rt_alloc(size_t bytes);
void *cf_rt_calloc(size_t count, size_t size);
/* Calls the compiled function fn(args[0], ..., args[num_args - 1]) (each argument a pointer,
 * as an `_mlir_ciface_` entry takes them; at most CF_RT_CALL_MAX_ARGS). result_bytes: the
 * bytes of the result arrays the caller has allocated for it but not yet written, counted by
 * every memory check during the call. Returns the error slot's status (CF_ERR_OUT_OF_MEMORY
 * after an allocation failed: the device the call acquired is released). */
#define CF_RT_CALL_MAX_ARGS 64
int64_t cf_rt_call(void *fn, void *const *args, int64_t num_args, int64_t result_bytes);

/* ---- device lifecycle --------------------------------------------------------------- */
/* shots == 0: analytic. seed == -2: keep the random stream of the device as the previous
 * acquire left it (the shots of a one-shot loop); other seed < 0: seed from the system's
 * entropy. Returns a status. */
int64_t cf_rt_device_acquire(int64_t num_qubits, int64_t shots, int64_t seed);
void cf_rt_device_release(void);
/* The launcher brackets each call of a seeded program (qjit(seed=...)) on this thread:
 * between begin and end, the k-th acquire (k = 0, 1, ...) with one seed s >= 0 seeds its
 * stream from s and k, so a circuit run several times in one call (twice, in a loop, per
 * batch element, per shifted evaluation) gets fresh samples each time while every call
 * repeats the previous one (Catalyst: one seeded generator per call, shared by the runs).
 * Outside a bracket a seed is used as given. begin returns the previous state for end
 * (a callback may call another seeded program inside a call). */
int64_t cf_rt_seeded_call_begin(void);
void cf_rt_seeded_call_end(int64_t previous);
int64_t cf_rt_num_qubits(void);
int64_t cf_rt_shots(void);

/* ---- distribution over MPI ranks (docs/distributed.md) ------------------------------ */
/* on != 0: devices acquired from now on (in this process) are sharded over the ranks of
 * MPI_COMM_WORLD (libcofactor_runtime_mpi.so, loaded then; MPI_Init_thread on first use).
 * The default is on when the environment has COFACTOR_MPI=1. Returns a status
 * (CF_ERR_NOT_SUPPORTED when the runtime was built without MPI). */
int64_t cf_rt_set_distributed(int64_t on);
/* Loads the MPI part and initialises MPI (if not yet) and writes this process's rank and
 * the number of ranks. Returns a status. */
int64_t cf_rt_distributed_info(int64_t *rank, int64_t *size);
/* Prints `message` on stderr and ends every rank (MPI_Abort), when MPI is initialised; a
 * no-op otherwise. Never returns in the first case. */
void cf_rt_distributed_abort(const char *message);

/* ---- gates -------------------------------------------------------------------------- */
/* wires: the target wires; ctrl_wires/ctrl_values: control wires and the value (0/1) each
 * must hold; adjoint != 0 applies the inverse. */
void cf_rt_gate(int64_t gate_id, const double *params, int64_t num_params,
                const int64_t *wires, int64_t num_wires, int8_t adjoint,
                const int64_t *ctrl_wires, const int8_t *ctrl_values, int64_t num_ctrls);
/* PauliRot(theta, word) = exp(-i theta/2 P_word); word is a NUL-terminated string over
 * "IXYZ" with one letter per wire. */
void cf_rt_pauli_rot(double theta, const char *word, const int64_t *wires, int64_t num_wires,
                     int8_t adjoint, const int64_t *ctrl_wires, const int8_t *ctrl_values,
                     int64_t num_ctrls);
/* QubitUnitary: matrix is 2^k x 2^k complex (interleaved doubles), checked for unitarity. */
void cf_rt_unitary(const double *matrix, const int64_t *wires, int64_t num_wires, int8_t adjoint,
                   const int64_t *ctrl_wires, const int8_t *ctrl_values, int64_t num_ctrls);

/* A run of gates in one call, as the compiler emits a straight-line gate sequence (one call
 * on a constant table instead of one call per gate). `table` holds `num_gates` records of
 * int64s, one after the other:
 *   kind, num_params, num_wires, num_ctrls, adjoint, param_offset,
 *   num_wires wire codes, num_ctrls control-wire codes, num_ctrls control values,
 *   and for kind CF_GATE_TABLE_PAULI_ROT the num_wires letters (ASCII) of the Pauli word;
 * kind is a gate id otherwise. A record's parameters are
 * params[param_offset .. param_offset + num_params). A wire code w >= 0 is the wire w
 * itself; w < 0 stands for dyn_wires[-w - 1] (a wire computed at run time). Each record is
 * applied exactly as the matching cf_rt_gate (cf_rt_pauli_rot) call: same validation,
 * errors and tape records; the first error stops the run. */
#define CF_GATE_TABLE_PAULI_ROT (-1)
void cf_rt_gate_table(const int64_t *table, int64_t num_gates, const double *params,
                      const int64_t *dyn_wires);

/* ---- observables: handles valid until the device is acquired again or released ----- */
enum cf_named_obs { CF_OBS_IDENTITY = 0, CF_OBS_PAULIX, CF_OBS_PAULIY, CF_OBS_PAULIZ, CF_OBS_HADAMARD };
int64_t cf_rt_obs_named(int64_t kind, int64_t wire);
int64_t cf_rt_obs_hermitian(const double *matrix, const int64_t *wires, int64_t num_wires);
int64_t cf_rt_obs_tensor(const int64_t *obs, int64_t num_obs);
int64_t cf_rt_obs_hamiltonian(const double *coeffs, const int64_t *obs, int64_t num_terms);
/* The same Hamiltonian, with coefficients that are differentiated: made while the tape
 * records, its num_terms coefficients become the next tape parameters (after the gates
 * recorded so far), and each recorded expval of it gives their Jacobian entries
 * d<H>/dc_k = <obs_k>, measured on the state at the expval (sampled with shots). Not
 * recording, it is cf_rt_obs_hamiltonian. Only expval records those entries: use the
 * handle in nothing else (a tensor or sum containing it would lose them). */
int64_t cf_rt_obs_hamiltonian_diff(const double *coeffs, const int64_t *obs, int64_t num_terms);

/* ---- measurements ------------------------------------------------------------------- */
/* With shots > 0, expval/var are estimated from `shots` samples per term (PennyLane's
 * finite-shot semantics, Hermitian factors diagonalised by their eigendecomposition), except
 * the variance of a sum of several terms, which stays analytic; probs are the frequencies of
 * `shots` samples (counts / shots, as on PennyLane's devices; NaN stays NaN); state is always
 * exact. When an error is pending (or raised),
 * expval/var return NaN, observable constructors -1, cf_rt_measure 0: check the error slot. */
double cf_rt_expval(int64_t obs);
double cf_rt_var(int64_t obs);
/* probs over `wires` (num_wires == 0: all wires); out has 2^num_wires entries. */
void cf_rt_probs(double *out, const int64_t *wires, int64_t num_wires);
/* the full state vector, 2^n complex entries (interleaved doubles). */
void cf_rt_state(double *out);
/* shots x num_wires computational-basis samples (0/1), row-major; num_wires == 0: all. */
void cf_rt_sample(int64_t *out, const int64_t *wires, int64_t num_wires);
/* counts of each basis state over `wires`: out has 2^num_wires entries (outcome = index). */
void cf_rt_counts(int64_t *out, const int64_t *wires, int64_t num_wires);
/* mid-circuit measurement: returns the outcome (0/1); reset != 0 puts the wire back in |0>;
 * postselect in {0, 1} forces that outcome (an error if its probability is zero), -1 none. */
int8_t cf_rt_measure(int64_t wire, int8_t reset, int64_t postselect);
/* (postselection of an outcome whose probability is below 1e-16 is CF_ERR_POSTSELECTION;
 * the state is renormalised otherwise, as PennyLane does analytically.) */

/* ---- differentiation ---------------------------------------------------------------- */
/* Between start and stop, every parametrised gate is recorded; its parameters are numbered
 * in execution order (a gate with k parameters takes k consecutive numbers). The tape in
 * fact holds every gate (and mid-circuit measurement) so that it can be walked backwards or
 * replayed; QubitUnitary is recorded but has no parameters. cf_rt_tape_start while recording
 * starts over; acquire and release discard the tape. The adjoint Jacobian needs the current
 * state to be the tape's output (nothing applied after cf_rt_tape_stop) and no mid-circuit
 * measurement on the tape; a replay restarts from |0...0>, so it needs the tape to cover
 * everything since the device was acquired. */
void cf_rt_tape_start(void);
void cf_rt_tape_stop(void);
int64_t cf_rt_tape_num_params(void);
/* Adjoint-method Jacobian of the expectation values of `obs` (num_obs handles) with respect
 * to every recorded parameter, evaluated on the current (final) state; jac is
 * num_obs x tape_num_params, row-major. */
void cf_rt_adjoint_jacobian(const int64_t *obs, int64_t num_obs, double *jac);
/* The Jacobian of every result measured while recording (each expval, and each entry of
 * each probs, in the order measured: num_results rows) with respect to every recorded gate
 * parameter (num_params columns), row-major, by the adjoint method on the current state
 * (probabilities as expectations of basis projectors; exact also when the device has
 * shots). Call it after cf_rt_tape_stop and before the device is released. It is an error
 * when var, state or a mid-circuit measurement was recorded, or the sizes differ. */
void cf_rt_jacobian_recorded(double *jac, int64_t num_results, int64_t num_params);
/* The same Jacobian by the parameter-shift rule: for each parameter, the tape is replayed
 * with that parameter shifted and the recorded results measured again (sampled, when the
 * device has shots, as PennyLane does). Gates whose generator has the eigenvalue gaps {1}
 * use the two-term rule (shifts +-pi/2), every other gate (controlled rotations,
 * excitations, IsingXY, anything with control wires) the four-term rule (+-pi/2, +-3pi/2),
 * which is exact for gaps in {1/2, 1}: every gate of gates.def. The device is left in the
 * unshifted final state. */
void cf_rt_jacobian_recorded_shift(double *jac, int64_t num_results, int64_t num_params);
/* Re-executes the recorded tape from |0...0> with parameter `param_index` shifted by
 * `shift` (all parameters as recorded otherwise), leaving the device in the final state so
 * that measurements can follow. Used for parameter-shift. */
void cf_rt_tape_replay_shifted(int64_t param_index, double shift);

/* ---- additions (not emitted by the lowering; for tests, tools and benchmarks) ---------- */
/* Overwrites the state with 2^n complex amplitudes (interleaved doubles), which must be
 * normalised to 1e-8. Not allowed while the tape records (a replay starts from |0...0>). */
void cf_rt_set_state(const double *amplitudes);
/* The name of gate `gate_id` (NULL if unknown; sets no error) and, through the pointers when
 * not NULL, its number of parameters and wires as in gates.def. */
const char *cf_rt_gate_info(int64_t gate_id, int64_t *num_params, int64_t *num_wires);
/* Applies the (uncontrolled, non-adjoint) gate `repeats` times after validating it once;
 * for timing kernels without the per-call overhead. Not allowed while the tape records. */
void cf_rt_gate_repeat(int64_t repeats, int64_t gate_id, const double *params, int64_t num_params,
                       const int64_t *wires, int64_t num_wires);

/* ---- threads ------------------------------------------------------------------------ */
/* Threads the simulator's loops over large states use: COFACTOR_NUM_THREADS, else the first
 * entry of OMP_NUM_THREADS, else the CPUs of the process's affinity mask (runtime/README.md,
 * "Threads"). Set changes it for the whole process; n <= 0 restores that default. Results
 * do not depend on it (bitwise). */
int64_t cf_rt_num_threads(void);
void cf_rt_set_num_threads(int64_t n);
/* Loops the pool has run on more than one thread since the process started (diagnostics:
 * the contention benchmark reports whether its default mode ran any parallel code). */
int64_t cf_rt_parallel_loops(void);

/* ---- interrupts (Ctrl-C) ------------------------------------------------------------- */
/* Bumped by the runtime's SIGINT handler. Compiled loops read it (volatile) at every
 * back-edge and compare it with the value read when their function started; when it
 * moved they call cf_rt_interrupt_poll. */
extern volatile int64_t cf_rt_interrupt_count;
/* Puts the runtime's SIGINT handler in front of the current one, which it calls in turn
 * (normally Python's, so Python still raises KeyboardInterrupt). A current SIG_DFL or
 * SIG_IGN is left alone. Compiled code with loops calls it on entry; the installed handler
 * is re-checked (one system call) at most every 50 ms. Returns 1 when ours is installed. */
int64_t cf_rt_interrupt_arm(void);
/* Called by a compiled loop after a SIGINT: in the process's main thread, reports
 * CF_ERR_INTERRUPTED in the error slot and returns 1 (the loop exits); in any other thread
 * returns 0 (the loop runs on: Python interrupts only the main thread). */
int8_t cf_rt_interrupt_poll(void);

#ifdef __cplusplus
}
#endif
#endif /* COFACTOR_RUNTIME_H */
