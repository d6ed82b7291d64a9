// Support for Enzyme custom gradients (include/cofactor/gradient_support.h): the tapes
// that carry residuals from an augmented forward to its reverse, and the trampoline
// into Python callbacks.
//
// These functions sit under Enzyme-differentiated code, which must never see them fail
// by throwing or aborting: every entry point catches everything and returns a status.
// They respect a pending error of the runtime's error slot (read through the public
// cf_rt_error_code) by doing nothing, like the rest of the runtime, and report their own
// failures there (cf_rt_report_error), so that the caller raises instead of using garbage.
#pragma GCC visibility push(default)
#include "cofactor/gradient_support.h"
#include "cofactor/runtime.h"
#pragma GCC visibility pop

#include <atomic>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace {

using Buffer = std::vector<unsigned char>;

// Tapes are global rather than per thread: Enzyme runs the reverse on the thread of the
// forward, but a caller may legitimately hand a tape to another thread.
struct TapeStore {
    std::mutex mutex;
    std::unordered_map<int64_t, std::vector<Buffer>> tapes;
    int64_t next = 1;
};

TapeStore &store() {
    static TapeStore *s = new TapeStore; // never destroyed: usable during exit
    return *s;
}

std::atomic<cf_callback_trampoline> trampoline{nullptr};

} // namespace

extern "C" {

int64_t cf_rt_tape_save(int64_t tape, const void *data, int64_t nbytes) {
    if (cf_rt_error_code() != CF_OK || tape < 0 || nbytes < 0 || (nbytes > 0 && !data))
        return -1;
    try {
        Buffer copy(static_cast<const unsigned char *>(data),
                    static_cast<const unsigned char *>(data) + nbytes);
        TapeStore &s = store();
        std::lock_guard<std::mutex> lock(s.mutex);
        if (tape == 0) {
            tape = s.next++;
            s.tapes[tape].push_back(std::move(copy));
            return tape;
        }
        auto it = s.tapes.find(tape);
        if (it == s.tapes.end()) {
            cf_rt_report_error(CF_ERR_INTERNAL, "cf_rt_tape_save: unknown tape");
            return -1;
        }
        it->second.push_back(std::move(copy));
        return tape;
    } catch (...) { // std::bad_alloc
        cf_rt_report_error(CF_ERR_OUT_OF_MEMORY, "cf_rt_tape_save: out of memory saving a tape");
        return -1;
    }
}

int64_t cf_rt_tape_load(int64_t tape, int64_t index, void *dst, int64_t nbytes) {
    if (int64_t code = cf_rt_error_code(); code != CF_OK) return code;
    TapeStore &s = store();
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.tapes.find(tape);
    if (it == s.tapes.end() || index < 0 || index >= static_cast<int64_t>(it->second.size())) {
        cf_rt_report_error(CF_ERR_INTERNAL, "cf_rt_tape_load: no such tape entry");
        return CF_ERR_INTERNAL;
    }
    const Buffer &buffer = it->second[static_cast<size_t>(index)];
    if (static_cast<int64_t>(buffer.size()) != nbytes || (nbytes > 0 && !dst)) {
        cf_rt_report_error(CF_ERR_INTERNAL, "cf_rt_tape_load: size mismatch");
        return CF_ERR_INTERNAL;
    }
    if (nbytes > 0) std::memcpy(dst, buffer.data(), buffer.size());
    return CF_OK;
}

int64_t cf_rt_tape_free(int64_t tape) {
    // Not skipped on a pending error: freeing never hurts and avoids leaks.
    if (tape <= 0) return CF_OK;
    TapeStore &s = store();
    std::lock_guard<std::mutex> lock(s.mutex);
    return s.tapes.erase(tape) ? CF_OK : CF_ERR_INVALID_ARGUMENT;
}

int64_t cf_rt_tape_live_count(void) {
    TapeStore &s = store();
    std::lock_guard<std::mutex> lock(s.mutex);
    return static_cast<int64_t>(s.tapes.size());
}

void cf_rt_set_callback_trampoline(cf_callback_trampoline fn) { trampoline.store(fn); }

int64_t cf_rt_callback(int64_t callback_id, int64_t kind, int64_t num_args, void *const *args) {
    if (int64_t code = cf_rt_error_code(); code != CF_OK) return code;
    cf_callback_trampoline fn = trampoline.load();
    if (!fn) {
        cf_rt_report_error(CF_ERR_NOT_SUPPORTED,
                           "cf_rt_callback: no Python callback trampoline is installed");
        return CF_ERR_NOT_SUPPORTED;
    }
    // The trampoline is Python's (a ctypes CFUNCTYPE, which never lets an exception
    // escape into C); its status says whether the callback raised.
    if (fn(callback_id, kind, num_args, args) == 0) return CF_OK;
    cf_rt_report_error(CF_ERR_INTERNAL, "cf_rt_callback: a Python callback failed");
    return CF_ERR_INTERNAL;
}

} // extern "C"
