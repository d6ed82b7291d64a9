// The one place the single-process runtime knows about MPI: when distribution is switched on
// (COFACTOR_MPI=1 or cf_rt_set_distributed), device_acquire gets its device from
// libcofactor_runtime_mpi.so, loaded here with dlopen from the folder this library lives in.
// Programs that never ask never load it, so they never load libmpi either.
#pragma GCC visibility push(default)
#include "cofactor/runtime.h"
#pragma GCC visibility pop

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <mutex>
#include <string>

#include "DistributedLoader.hpp"
#include "Error.hpp"

namespace cf {
namespace {

// The entry points of libcofactor_runtime_mpi.so (mpi/DistributedDevice.cpp).
using MakeFn = QuantumDevice *(*)(int, int64_t, int64_t, char *, size_t);
using InfoFn = int (*)(int *, int *, char *, size_t);
using AbortFn = void (*)(const char *);

struct MpiLibrary {
    MakeFn make = nullptr;
    InfoFn info = nullptr;
    AbortFn abort = nullptr;
    std::string error; // why loading failed, if it did
};

std::atomic<int> requested{-1}; // -1: not decided yet (read COFACTOR_MPI)

const MpiLibrary &mpiLibrary() {
    static MpiLibrary lib;
    static std::once_flag once;
    std::call_once(once, [] {
        Dl_info self;
        std::string dir;
        if (dladdr(reinterpret_cast<void *>(&cf_rt_set_distributed), &self) && self.dli_fname) {
            dir = self.dli_fname;
            const size_t slash = dir.rfind('/');
            dir = slash == std::string::npos ? std::string() : dir.substr(0, slash + 1);
        }
        const std::string path = dir + "libcofactor_runtime_mpi.so";
        void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            lib.error = std::string("cannot load ") + path + " (" + dlerror() +
                        "); the runtime was built without MPI: install OpenMPI "
                        "(make setup installs openmpi-bin and libopenmpi-dev) and rebuild";
            return;
        }
        lib.make = reinterpret_cast<MakeFn>(dlsym(h, "cf_mpi_make_device"));
        lib.info = reinterpret_cast<InfoFn>(dlsym(h, "cf_mpi_info"));
        lib.abort = reinterpret_cast<AbortFn>(dlsym(h, "cf_mpi_abort"));
        if (!lib.make || !lib.info || !lib.abort) {
            lib.error = path + " lacks the cf_mpi_* entry points (a stale build?)";
            lib.make = nullptr;
        }
    });
    return lib;
}

const MpiLibrary &loadedOrFail() {
    const MpiLibrary &lib = mpiLibrary();
    if (!lib.make) fail(CF_ERR_NOT_SUPPORTED, "distributed device: ", lib.error);
    return lib;
}

} // namespace

bool distributedRequested() {
    int r = requested.load();
    if (r < 0) {
        const char *env = std::getenv("COFACTOR_MPI");
        r = env && std::strcmp(env, "") != 0 && std::strcmp(env, "0") != 0 ? 1 : 0;
        requested.store(r);
    }
    return r == 1;
}

std::unique_ptr<QuantumDevice> makeDistributedDevice(int numQubits, int64_t shots, int64_t seed) {
    const MpiLibrary &lib = loadedOrFail();
    char message[512] = {0};
    QuantumDevice *dev = lib.make(numQubits, shots, seed, message, sizeof message);
    if (!dev) fail(CF_ERR_INVALID_ARGUMENT, "distributed device: ", message);
    return std::unique_ptr<QuantumDevice>(dev);
}

} // namespace cf

extern "C" {

int64_t cf_rt_set_distributed(int64_t on) {
    if (on) {
        const cf::MpiLibrary &lib = cf::mpiLibrary();
        if (!lib.make) {
            cf_rt_report_error(CF_ERR_NOT_SUPPORTED, ("cf_rt_set_distributed: " + lib.error).c_str());
            return CF_ERR_NOT_SUPPORTED;
        }
    }
    cf::requested.store(on ? 1 : 0);
    return CF_OK;
}

int64_t cf_rt_distributed_info(int64_t *rank, int64_t *size) {
    const cf::MpiLibrary &lib = cf::mpiLibrary();
    if (!lib.make) {
        cf_rt_report_error(CF_ERR_NOT_SUPPORTED, ("cf_rt_distributed_info: " + lib.error).c_str());
        return CF_ERR_NOT_SUPPORTED;
    }
    int r = 0, s = 1;
    char message[512] = {0};
    if (!lib.info(&r, &s, message, sizeof message)) {
        cf_rt_report_error(CF_ERR_INTERNAL, message);
        return CF_ERR_INTERNAL;
    }
    if (rank) *rank = r;
    if (size) *size = s;
    return CF_OK;
}

void cf_rt_distributed_abort(const char *message) {
    const cf::MpiLibrary &lib = cf::mpiLibrary();
    if (lib.abort) lib.abort(message ? message : "error");
}

} // extern "C"
