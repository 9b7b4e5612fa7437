#!/usr/bin/env bash
# Builds UCX from Debian's source package against the emulator and our library.
#
#   ucx/build.sh <build dir> <gdrcopy install prefix> <emulator dir (libcuda.so.1, ...)>
#
# Fetches `apt-get source ucx` with a deb-src entry private to <build dir> (the machine's apt
# sources are not touched), takes the CUDA 12 headers from the pip wheels
# nvidia-cuda-runtime-cu12, nvidia-nvml-dev-cu12 and nvidia-cuda-nvcc-cu12 (crt/), links
# against the emulator's libcuda.so.1, libcudart.so.12 and libnvidia-ml.so.1, and installs
# UCX (libraries, ucx_info, ucx_perftest) into <build dir>/inst and its gtest binary into
# <build dir>/obj/test/gtest. A finished build is reused (<build dir>/inst/.built); exit 77
# when a tool is missing and CI is not set.
set -euo pipefail

DIR=$1 GDR=$2 SIM=$3
SUITE=${UCX_DEB_SUITE:-bookworm}
STAMP="$DIR/inst/.built"
KEY="ucx $SUITE $(sha256sum "$0" | cut -c1-16)"

skip() {
    echo "test-ucx: SKIP: $*" >&2
    if [ -n "${CI:-}" ]; then exit 1; fi
    exit 77
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$KEY" ]; then
    echo "UCX already built in $DIR ($KEY)"
    exit 0
fi

for t in apt-get dpkg-source autoreconf libtoolize g++ python3; do
    command -v "$t" >/dev/null || skip "$t not found (see .ci/apt-packages)"
done
mkdir -p "$DIR"

# CUDA 12 headers from the wheels (the libraries are the emulator's).
CUDA="$DIR/cuda"
rm -rf "$CUDA" && mkdir -p "$CUDA/include" "$CUDA/lib64"
python3 - "$CUDA/include" <<'PY' || skip "CUDA 12 headers not found: pip install nvidia-cuda-runtime-cu12 nvidia-nvml-dev-cu12 nvidia-cuda-nvcc-cu12"
import os, sys
import nvidia
dest = sys.argv[1]
want = {"cuda_runtime/include": ["cuda.h", "cuda_runtime.h"], "nvml_dev/include": ["nvml.h"],
        "cuda_nvcc/include": ["crt"]}
roots = list(nvidia.__path__)
for sub, names in want.items():
    src = next((os.path.join(r, sub) for r in roots
                if all(os.path.exists(os.path.join(r, sub, n)) for n in names)), None)
    if src is None:
        sys.exit(f"{sub} not found in {roots}")
    for n in os.listdir(src) if sub != "cuda_nvcc/include" else ["crt"]:
        link = os.path.join(dest, n)
        if not os.path.lexists(link):
            os.symlink(os.path.join(src, n), link)
PY
grep -q "define CUDA_VERSION 12" "$CUDA/include/cuda.h" || skip "cuda.h in $CUDA/include is not CUDA 12"
for l in libcuda.so.1 libcudart.so.12 libnvidia-ml.so.1; do
    [ -e "$SIM/$l" ] || { echo "test-ucx: $SIM/$l missing (make sim)" >&2; exit 1; }
    ln -sfn "$SIM/$l" "$CUDA/lib64/$l"
    ln -sfn "$l" "$CUDA/lib64/${l%.so.*}.so"
done

# Debian's source package, with a deb-src entry private to this build.
APT="$DIR/apt"
mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$DIR/src"
echo "deb-src http://deb.debian.org/debian $SUITE main" > "$APT/sources.list"
APTOPT=(-o "Dir::Etc::SourceList=$APT/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State::Lists=$APT/lists" -o "Dir::Cache=$APT/cache" -o Debug::NoLocking=1
        -o APT::Sandbox::User=root)
if ! ls "$DIR"/src/ucx_*.dsc >/dev/null 2>&1; then
    apt-get "${APTOPT[@]}" -qq update
    (cd "$DIR/src" && apt-get "${APTOPT[@]}" -qq source --download-only ucx)
fi
echo "UCX source fetched (${SECONDS}s)"
DSC=$(ls "$DIR"/src/ucx_*.dsc | head -1)
SRC="$DIR/src/tree"
rm -rf "$SRC" && dpkg-source -q -x "$DSC" "$SRC" >/dev/null
(cd "$SRC" && ./autogen.sh >/dev/null 2>&1)
echo "UCX source unpacked and autogen.sh run (${SECONDS}s)"

OBJ="$DIR/obj"
rm -rf "$OBJ" "$DIR/inst" && mkdir -p "$OBJ"
cd "$OBJ"
# The emulator's libcudart.so.12 needs libcuda.so.1 (NVIDIA's loads it at run time): tell the
# linker where to find it when it checks the runtime's symbols.
"$SRC/configure" -q --prefix="$DIR/inst" --with-cuda="$CUDA" --with-gdrcopy="$GDR" \
    --enable-gtest --disable-doxygen-doc --disable-static --without-java --without-go \
    --without-verbs --without-rdmacm --without-knem --without-xpmem --without-rocm --without-ugni \
    LDFLAGS="-Wl,-rpath-link,$CUDA/lib64" >/dev/null
grep -q "^#define HAVE_CUDA 1" config.h || { echo "test-ucx: UCX configured without CUDA" >&2; exit 1; }
grep -q '^#define uct_cuda_MODULES ":gdrcopy"' config.h \
    || { echo "test-ucx: UCX configured without gdrcopy" >&2; exit 1; }
echo "UCX configured (${SECONDS}s)"
# gcc 12 flags a use-after-free in UCX 1.13's gtest sources, which UCX builds with -Werror.
# GTEST_CXXFLAGS (configure's value plus the exception) is used by the gtest's compile lines
# only; CXXFLAGS cannot carry it: the perftest library appends its own C++ flags to CXXFLAGS,
# which a command-line value would replace.
GTEST_FLAGS="$(sed -n 's/^GTEST_CXXFLAGS = *//p' test/gtest/Makefile) -Wno-error=use-after-free"
make -s -j"$(nproc)" GTEST_CXXFLAGS="$GTEST_FLAGS" >/dev/null
make -s install >/dev/null
echo "$KEY" > "$STAMP"
echo "UCX built and installed in $DIR (${SECONDS}s): $(ls "$DIR/inst/lib/ucx" | grep -c '\.so$') modules"
