// Checked allocation for compiled code, and the call that makes a failed one an error
// (runtime.h, "compiled code's memory").
//
// Compiled code allocates its buffers with malloc/calloc, and a NULL result (RLIMIT_AS,
// `ulimit -v`) was used as a pointer: a segfault inside the compiled function. Under an
// overcommitting kernel or a memory cgroup, malloc does not fail at all, and the process is
// OOM-killed when the pages are touched. The compiler renames the calls of a program that
// uses the runtime to cf_rt_alloc / cf_rt_calloc after Enzyme and the optimizer, just before
// code generation (compiler/Compiler.cpp; compiler.py for the subprocess pipeline), so
// Enzyme still sees malloc/free. Here a large request is checked against the memory budget
// (MemoryBudget.cpp) plus the call's result arrays, which Python allocated before the call
// but whose pages are touched only when the compiled code copies its results into them
// (compiled qml.state(): the device's state, the compiled buffer cf_rt_state fills, the
// returned array: three state-sized buffers). A refused or failed request records
// CF_ERR_OUT_OF_MEMORY naming the sizes and jumps back to cf_rt_call, which called the
// compiled function: the compiled code cannot go on without its buffer (it has no error
// path of its own), and nothing in it needs unwinding (no destructors, no locks). What it
// had allocated before is leaked, as it would be by any C program that exits on an error.
#include "capi_context.hpp"

#include <csetjmp>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "StateVectorDevice.hpp"

namespace cf::capi {
namespace {

struct CompiledCall {
    std::jmp_buf jump;
    CompiledCall *outer;
};
thread_local CompiledCall *currentCall = nullptr;

// Calls fn(args[0], ..., args[N-1]), fn taking N pointers.
template <size_t... I> void callWith(void *fn, void *const *args, std::index_sequence<I...>) {
    using Fn = void (*)(decltype((void)I, static_cast<void *>(nullptr))...);
    reinterpret_cast<Fn>(fn)(args[I]...);
}
template <size_t... N> void callAny(void *fn, void *const *args, size_t n, std::index_sequence<N...>) {
    ((n == N ? (callWith(fn, args, std::make_index_sequence<N>()), true) : false) || ...);
}

[[noreturn]] void outOfMemory(const std::string &message) {
    setError(CF_ERR_OUT_OF_MEMORY, message);
    std::longjmp(currentCall->jump, 1);
}

void *checked(void *pointer, double bytes) {
    if (pointer || bytes == 0) return pointer;
    std::ostringstream os;
    os << "compiled code could not allocate a buffer of " << bytes / (1 << 20)
       << " MiB (the process's address space or memory is exhausted, e.g. by `ulimit -v`): "
          "use fewer qubits or smaller arrays";
    const std::string message = os.str();
    if (!currentCall) { // called outside cf_rt_call: report, and the caller gets NULL
        setError(CF_ERR_OUT_OF_MEMORY, message);
        return nullptr;
    }
    outOfMemory(message);
}

void checkBudget(double bytes) {
    if (!currentCall || bytes <= kSmallAllocation) return;
    try {
        checkMemory(bytes, "a buffer of compiled code");
    } catch (const Error &e) {
        outOfMemory(e.what());
    }
}

} // namespace
} // namespace cf::capi

using namespace cf::capi;

extern "C" {

void *cf_rt_alloc(size_t bytes) {
    checkBudget(double(bytes));
    return checked(std::malloc(bytes), double(bytes));
}

void *cf_rt_calloc(size_t count, size_t size) {
    const double bytes = double(count) * double(size);
    checkBudget(bytes);
    return checked(std::calloc(count, size), bytes);
}

int64_t cf_rt_call(void *fn, void *const *args, int64_t num_args, int64_t result_bytes) {
    if (num_args < 0 || num_args > CF_RT_CALL_MAX_ARGS) {
        setError(CF_ERR_INVALID_ARGUMENT, "cf_rt_call: " + std::to_string(num_args) +
                                              " arguments (at most " +
                                              std::to_string(CF_RT_CALL_MAX_ARGS) + ")");
        return ctx.errorCode;
    }
    CompiledCall call;
    call.outer = currentCall;
    // volatile: read after a longjmp (setjmp's rule for locals changed in between)
    const volatile bool deviceBefore = ctx.active;
    const double outerResultBytes = cf::pendingResultBytes();
    if (setjmp(call.jump) == 0) {
        currentCall = &call;
        cf::setPendingResultBytes(double(result_bytes));
        callAny(fn, args, size_t(num_args),
                std::make_index_sequence<CF_RT_CALL_MAX_ARGS + 1>());
        currentCall = call.outer;
        cf::setPendingResultBytes(outerResultBytes);
        return ctx.errorCode;
    }
    // An allocation failed: the compiled function is abandoned; the device it acquired is
    // released, as its own release call would have done.
    currentCall = call.outer;
    cf::setPendingResultBytes(outerResultBytes);
    if (!deviceBefore) cf_rt_device_release();
    return ctx.errorCode;
}

} // extern "C"
