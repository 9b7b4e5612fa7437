#!/usr/bin/env python3
"""Finds NCCL and the CUDA runtime for `make test-nccl` and prints them as shell assignments.

NCCL: NCCL_HOME (include/nccl.h, lib/libnccl.so.2), else the pip wheel nvidia-nccl-cu13 or
-cu12 of this Python (site-packages/nvidia/nccl), else the system's (/usr/include,
/usr/lib/<arch>). The CUDA runtime (cuda_runtime.h with the crt/ and nv/target headers that
nccl.h pulls in, and libcudart): CUDA_HOME, else /usr/local/cuda, else the wheels
(nvidia-cuda-runtime with nvidia-cuda-crt and nvidia-cuda-cccl for CUDA 13, nvidia/cu13; the
-cu12 wheels, nvidia/cuda_runtime and nvidia/cuda_cccl). Prints NCCL_INCLUDE, NCCL_LIBDIR,
NCCL_FROM, CUDART_CFLAGS, CUDART_LIBDIR, CUDART_LIB and CUDART_FROM, or WHY (what is missing)
and exits 1.
"""
import glob
import os
import platform
import shlex
import sys


def nvidia_dirs():
    """The site-packages/nvidia folders of this Python (a namespace package: no __file__)."""
    try:
        import nvidia  # noqa: F401  (only its __path__)
    except ImportError:
        return []
    return list(nvidia.__path__)


def wheel_version(*names):
    try:
        from importlib import metadata
    except ImportError:
        return None
    for n in names:
        try:
            return "%s %s" % (n, metadata.version(n))
        except Exception:
            continue
    return None


def find_nccl(nv):
    home = os.environ.get("NCCL_HOME")
    if home:
        inc = os.path.join(home, "include")
        for lib in ("lib", "lib64"):
            libdir = os.path.join(home, lib)
            if os.path.exists(os.path.join(inc, "nccl.h")) and glob.glob(libdir + "/libnccl.so.2*"):
                return inc, libdir, "NCCL_HOME=" + home
        return None
    for d in nv:
        for sub in ["nccl"] + sorted(os.path.basename(p) for p in glob.glob(d + "/*")):
            inc, libdir = os.path.join(d, sub, "include"), os.path.join(d, sub, "lib")
            if os.path.exists(os.path.join(inc, "nccl.h")) and os.path.exists(
                os.path.join(libdir, "libnccl.so.2")
            ):
                wheel = wheel_version("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")
                return inc, libdir, "%s (%s)" % (wheel or "a pip wheel", os.path.join(d, sub))
    arch = platform.machine() + "-linux-gnu"
    for libdir in ("/usr/lib/" + arch, "/usr/lib64", "/usr/local/lib"):
        if os.path.exists("/usr/include/nccl.h") and os.path.exists(libdir + "/libnccl.so.2"):
            return "/usr/include", libdir, "the system (/usr/include, %s)" % libdir
    return None


def complete(incs):
    """True when the include folders hold every CUDA header nccl.h needs from C."""
    need = ["cuda_runtime.h", "crt/host_config.h", "cuda_fp16.h", "nv/target"]
    return all(any(os.path.exists(os.path.join(i, h)) for i in incs) for h in need)


def cudart_in(libdirs):
    for libdir in libdirs:
        for so in sorted(glob.glob(libdir + "/libcudart.so.[0-9]*"), key=len):
            return libdir, os.path.basename(so)
    return None


def find_cudart(nv):
    cands = []  # (include folders, library folders, where)
    homes = [os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    for home in [h for h in homes if h]:
        inc = os.path.join(home, "include")
        incs = [inc] + [p for p in [os.path.join(inc, "cccl")] if os.path.isdir(p)]
        libdirs = [os.path.join(home, l) for l in ("lib64", "lib", "targets/%s-linux/lib" % platform.machine())]
        cands.append((incs, libdirs, home))
    for d in nv:
        for sub in sorted(glob.glob(d + "/cu[0-9]*"), reverse=True):
            inc = os.path.join(sub, "include")
            incs = [inc] + [p for p in [os.path.join(inc, "cccl")] if os.path.isdir(p)]
            wheel = wheel_version("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu13")
            cands.append((incs, [os.path.join(sub, "lib")], "%s (%s)" % (wheel or "pip wheels", sub)))
        rt = os.path.join(d, "cuda_runtime")
        if os.path.isdir(rt):
            incs = [os.path.join(rt, "include")]
            for extra in ("cuda_cccl", "cuda_nvcc", "cuda_crt"):
                if os.path.isdir(os.path.join(d, extra, "include")):
                    incs.append(os.path.join(d, extra, "include"))
            wheel = wheel_version("nvidia-cuda-runtime-cu12")
            cands.append((incs, [os.path.join(rt, "lib")], "%s (%s)" % (wheel or "pip wheels", rt)))
    missing = []
    for incs, libdirs, where in cands:
        lib = cudart_in(libdirs)
        if complete(incs) and lib:
            return incs, lib[0], lib[1], where
        if os.path.exists(os.path.join(incs[0], "cuda_runtime.h")):
            missing.append(where)
    return missing


def main():
    nv = nvidia_dirs()
    out = {}
    nccl = find_nccl(nv)
    if not nccl:
        print("WHY=" + shlex.quote(
            "no NCCL: neither NCCL_HOME, nor the pip wheel nvidia-nccl-cu13 or -cu12 of %s, "
            "nor /usr/include/nccl.h with libnccl.so.2" % sys.executable))
        return 1
    out["NCCL_INCLUDE"], out["NCCL_LIBDIR"], out["NCCL_FROM"] = nccl
    rt = find_cudart(nv)
    if isinstance(rt, list):
        why = "no complete CUDA runtime: cuda_runtime.h, crt/host_config.h, cuda_fp16.h, " \
              "nv/target and libcudart.so are needed (CUDA_HOME, /usr/local/cuda, or the wheels " \
              "nvidia-cuda-runtime, nvidia-cuda-crt and nvidia-cuda-cccl)"
        if rt:
            why += "; incomplete: " + ", ".join(rt)
        print("WHY=" + shlex.quote(why))
        return 1
    incs, libdir, lib, where = rt
    out["CUDART_CFLAGS"] = " ".join("-isystem " + i for i in incs)
    out["CUDART_LIBDIR"], out["CUDART_LIB"], out["CUDART_FROM"] = libdir, lib, where
    for k, v in out.items():
        print("%s=%s" % (k, shlex.quote(v)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
