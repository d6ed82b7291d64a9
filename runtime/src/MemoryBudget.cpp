// How many bytes the process may still allocate before the kernel kills it, and the check
// that turns "too much" into CF_ERR_OUT_OF_MEMORY (declared in StateVectorDevice.hpp).
//
// Linux overcommits, so a too-large std::vector does not throw bad_alloc: the process is
// OOM-killed later, when its pages are first touched. Two budgets can do that:
// - the machine's: MemAvailable of /proc/meminfo (not MemFree: page cache is reclaimable);
// - the memory cgroup's (a container's `--memory`, systemd's MemoryMax, a batch job's
//   limit): /proc/meminfo shows the whole machine there, so a state that fits the machine
//   but not the container got the process killed (27 qubits in a 1.2 GiB cgroup: SIGKILL,
//   session 16). Its budget is limit - usage + inactive file cache (reclaimable), at every
//   level from the process's cgroup up to the root of the mounted hierarchy; v2 and v1.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <limits>
#include <string>
#include <unistd.h>

#include "Error.hpp"
#include "StateVectorDevice.hpp"

namespace cf {

namespace {

constexpr double kUnlimited = std::numeric_limits<double>::infinity();

// The first number in `path` (a cgroup file such as memory.max); NaN when the file is
// missing or says "max".
double readNumber(const std::string &path) {
    std::ifstream in(path);
    double value;
    if (in >> value) return value;
    return std::numeric_limits<double>::quiet_NaN();
}

// The value of `key` in a "key value" file (memory.stat, /proc/meminfo); NaN if absent.
double readKey(const std::string &path, const std::string &key) {
    std::ifstream in(path);
    std::string k, rest;
    double value;
    while (in >> k >> value) {
        std::getline(in, rest);
        if (k == key) return value;
    }
    return std::numeric_limits<double>::quiet_NaN();
}

// The budget of one cgroup folder (kUnlimited when it sets no limit).
double folderBudget(const std::string &dir, bool v2) {
    const double limit = readNumber(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
    // v1 writes "no limit" as a huge page-rounded number
    if (!(limit == limit) || limit >= 0x1p62) return kUnlimited;
    const double usage = readNumber(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
    if (!(usage == usage)) return kUnlimited;
    double reclaimable = readKey(dir + "/memory.stat", v2 ? "inactive_file" : "total_inactive_file");
    if (!(reclaimable == reclaimable)) reclaimable = 0;
    return std::max(0.0, limit - usage + reclaimable);
}

// The smallest budget from `mount` + `path` up to `mount` itself. In a container the
// process's path usually names a folder of the host, absent from the container's mount;
// the folders that exist are the ones that count.
double hierarchyBudget(const std::string &mount, std::string path, bool v2) {
    double budget = kUnlimited;
    while (true) {
        budget = std::min(budget, folderBudget(mount + path, v2));
        if (path.empty() || path == "/") break;
        const size_t slash = path.find_last_of('/');
        path = slash == std::string::npos ? "" : path.substr(0, slash);
    }
    return budget;
}

double cgroupBudget() {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    double budget = kUnlimited;
    while (std::getline(in, line)) {
        // "hierarchy-id:controllers:path"; v2 has id 0 and no controllers
        const size_t a = line.find(':'), b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
        if (controllers.empty()) {
            budget = std::min(budget, hierarchyBudget("/sys/fs/cgroup", path, true));
            budget = std::min(budget, hierarchyBudget("/sys/fs/cgroup/unified", path, true));
        } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
            budget = std::min(budget, hierarchyBudget("/sys/fs/cgroup/memory", path, false));
        }
    }
    return budget;
}

thread_local double resultBytes = 0; // set by cf_rt_call (capi_alloc.cpp)

} // namespace

double pendingResultBytes() { return resultBytes; }
void setPendingResultBytes(double bytes) { resultBytes = bytes; }

double availableMemory() {
    double avail = readKey("/proc/meminfo", "MemAvailable:") * 1024.0;
    if (!(avail == avail)) {
        const long pages = sysconf(_SC_AVPHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
        avail = pages > 0 && pageSize > 0 ? double(pages) * double(pageSize) : 1e18;
    }
    return std::min(avail, cgroupBudget());
}

void checkMemory(double bytes, const char *what) {
    if (bytes <= kSmallAllocation) return; // not worth reading /proc/meminfo for
    const double avail = availableMemory();
    // The result arrays of the compiled call in progress are allocated but not yet written:
    // they still need their memory (capi_alloc.cpp).
    const double results = pendingResultBytes();
    if (bytes + results > 0.9 * avail) {
        std::string also;
        if (results > 0)
            also = " (and the call's results " + std::to_string(int64_t(results / (1 << 20))) +
                   " MiB more)";
        fail(CF_ERR_OUT_OF_MEMORY, what, " needs ", bytes / (1 << 20), " MiB", also,
             " but only ", avail / (1 << 20), " MiB of memory are available (to this process's "
             "memory cgroup, if it has a limit): use fewer qubits or a machine with more memory");
    }
}

} // namespace cf
