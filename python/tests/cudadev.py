"""Device memory for the tests, through the CUDA driver API with ctypes: the emulator's
libcuda.so.1 in CI, the real driver on a GPU machine. ``DeviceArray`` exposes
``__cuda_array_interface__`` (and, on request, only ``__dlpack__``) over memory from
``cuMemAlloc`` or from ``cuMemCreate`` exportable as a POSIX file descriptor (what the Vulkan
import maps, as abi-tests/c/gpu.h's gpu_vmm_alloc makes it); its bytes are checked with
``cuMemcpyDtoH``/``cuMemcpyHtoD``, independently of the library under test."""

import ctypes
import threading
from ctypes import POINTER, Structure, byref, c_int, c_size_t, c_uint64, c_ulonglong, c_void_p

from gdrapi_rs import _device

CUdeviceptr = c_ulonglong


class CUmemLocation(Structure):
    _fields_ = [("type", c_int), ("id", c_int)]


class _AllocFlags(Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class CUmemAllocationProp(Structure):
    _fields_ = [("type", c_int), ("requestedHandleTypes", c_int), ("location", CUmemLocation),
                ("win32HandleMetaData", c_void_p), ("allocFlags", _AllocFlags)]


class CUmemAccessDesc(Structure):
    _fields_ = [("location", CUmemLocation), ("flags", c_int)]


assert ctypes.sizeof(CUmemAllocationProp) == 32 and ctypes.sizeof(CUmemAccessDesc) == 12

_cuda = None
_lock = threading.Lock()


class CudaError(RuntimeError):
    pass


def cuda():
    """libcuda.so.1 (the emulator's when it is preloaded), initialised, with device 0's primary
    context current in the calling thread."""
    global _cuda
    with _lock:
        if _cuda is None:
            lib = ctypes.CDLL("libcuda.so.1")
            for name, args in [
                ("cuInit", [ctypes.c_uint]),
                ("cuDeviceGet", [POINTER(c_int), c_int]),
                ("cuDeviceGetCount", [POINTER(c_int)]),
                ("cuDevicePrimaryCtxRetain", [POINTER(c_void_p), c_int]),
                ("cuCtxSetCurrent", [c_void_p]),
                ("cuMemAlloc_v2", [POINTER(CUdeviceptr), c_size_t]),
                ("cuMemFree_v2", [CUdeviceptr]),
                ("cuMemcpyHtoD_v2", [CUdeviceptr, c_void_p, c_size_t]),
                ("cuMemcpyDtoH_v2", [c_void_p, CUdeviceptr, c_size_t]),
                ("cuMemGetAllocationGranularity", [POINTER(c_size_t), POINTER(CUmemAllocationProp), c_int]),
                ("cuMemCreate", [POINTER(c_uint64), c_size_t, POINTER(CUmemAllocationProp), c_uint64]),
                ("cuMemAddressReserve", [POINTER(CUdeviceptr), c_size_t, c_size_t, CUdeviceptr, c_uint64]),
                ("cuMemMap", [CUdeviceptr, c_size_t, c_size_t, c_uint64, c_uint64]),
                ("cuMemSetAccess", [CUdeviceptr, c_size_t, POINTER(CUmemAccessDesc), c_size_t]),
                ("cuMemUnmap", [CUdeviceptr, c_size_t]),
                ("cuMemRelease", [c_uint64]),
                ("cuMemAddressFree", [CUdeviceptr, c_size_t]),
                ("cuCtxSynchronize", []),
            ]:
                fn = getattr(lib, name)
                fn.argtypes = args
                fn.restype = c_int
            check(lib.cuInit(0), "cuInit")
            dev = c_int()
            check(lib.cuDeviceGet(byref(dev), 0), "cuDeviceGet")
            ctx = c_void_p()
            check(lib.cuDevicePrimaryCtxRetain(byref(ctx), dev), "cuDevicePrimaryCtxRetain")
            lib.ctx = ctx
            _cuda = lib
    check(_cuda.cuCtxSetCurrent(_cuda.ctx), "cuCtxSetCurrent")
    return _cuda


def device_count():
    n = c_int()
    check(cuda().cuDeviceGetCount(byref(n)), "cuDeviceGetCount")
    return n.value


def check(rc, call):
    if rc != 0:
        raise CudaError("%s failed: CUresult %d" % (call, rc))


def htod(ptr, data):
    """Writes ``data`` at device address ``ptr`` with cuMemcpyHtoD, then waits for it: from
    pageable memory the copy may still be on its way to the GPU when cuMemcpyHtoD returns
    (only its staging is done), so a read through a BAR mapping could see the old bytes."""
    check(cuda().cuMemcpyHtoD_v2(ptr, data, len(data)), "cuMemcpyHtoD")
    check(cuda().cuCtxSynchronize(), "cuCtxSynchronize")


class DeviceArray:
    """``nbytes`` of device memory from a 64 KiB boundary, freed by ``free()`` (or at garbage
    collection); ``vmm=True`` allocates as NCCL's cuMem allocator does. cuMemAlloc memory is
    over-allocated so that the 64 KiB pages around any of its bytes lie in the allocation (a
    pin covers them), as abi-tests/c/gpu.h's gpu_alloc does."""

    def __init__(self, nbytes, vmm=False):
        lib = cuda()
        self.nbytes = nbytes
        self.vmm = vmm
        self.freed = False
        p = CUdeviceptr()
        if not vmm:
            check(lib.cuMemAlloc_v2(byref(p), nbytes + 2 * 65536), "cuMemAlloc_v2")
            self.raw = p.value
            self.ptr = (p.value + 0xFFFF) & ~0xFFFF
            return
        prop = CUmemAllocationProp()
        prop.type = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
        prop.requestedHandleTypes = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        prop.location = CUmemLocation(1, 0)  # CU_MEM_LOCATION_TYPE_DEVICE, device 0
        prop.allocFlags.gpuDirectRDMACapable = 1
        gran = c_size_t()
        check(lib.cuMemGetAllocationGranularity(byref(gran), byref(prop), 1), "granularity")
        self.span = (nbytes + gran.value - 1) // gran.value * gran.value
        h = c_uint64()
        check(lib.cuMemCreate(byref(h), self.span, byref(prop), 0), "cuMemCreate")
        self.handle = h.value
        check(lib.cuMemAddressReserve(byref(p), self.span, gran.value, 0, 0), "cuMemAddressReserve")
        check(lib.cuMemMap(p, self.span, 0, h, 0), "cuMemMap")
        access = CUmemAccessDesc(CUmemLocation(1, 0), 3)  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        check(lib.cuMemSetAccess(p, self.span, byref(access), 1), "cuMemSetAccess")
        self.ptr = p.value

    @property
    def __cuda_array_interface__(self):
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.ptr, False),
                "version": 3, "strides": None, "stream": None}

    def read(self, offset=0, n=None):
        """The device bytes, through cuMemcpyDtoH."""
        n = self.nbytes - offset if n is None else n
        buf = ctypes.create_string_buffer(n)
        check(cuda().cuMemcpyDtoH_v2(buf, self.ptr + offset, n), "cuMemcpyDtoH")
        return buf.raw

    def write(self, offset, data):
        """Writes ``data`` to the device through cuMemcpyHtoD, complete when it returns."""
        htod(self.ptr + offset, bytes(data))

    def free(self):
        if self.freed:
            return
        self.freed = True
        lib = cuda()
        if not self.vmm:
            check(lib.cuMemFree_v2(self.raw), "cuMemFree")
            return
        check(lib.cuMemUnmap(self.ptr, self.span), "cuMemUnmap")
        check(lib.cuMemRelease(self.handle), "cuMemRelease")
        check(lib.cuMemAddressFree(self.ptr, self.span), "cuMemAddressFree")

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass


class DLPackOnly:
    """An object that offers its device memory through ``__dlpack__`` only, as a 2-D array of
    ``typestr`` elements (``rows`` rows), with an optional byte offset; counts the deleter
    calls of the capsules it made."""

    def __init__(self, array, typestr="<i4", rows=1, byte_offset=0, device_type=2):
        self.array = array
        self.typestr = typestr
        self.rows = rows
        self.byte_offset = byte_offset
        self.device_type = device_type
        self.released = 0

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, stream=None):
        itemsize = int(self.typestr[2:])
        n = (self.array.nbytes - self.byte_offset) // itemsize
        shape = (self.rows, n // self.rows)
        cap = _device.dlpack_capsule(self.array.ptr, shape, self.typestr, 0, self._release)
        # Rewrite what the producer filled: the device type and the byte offset.
        m = _device.DLManagedTensor.from_address(
            _device._api.PyCapsule_GetPointer(cap, _device._DLTENSOR))
        m.dl_tensor.device.device_type = self.device_type
        m.dl_tensor.byte_offset = self.byte_offset
        return cap

    def _release(self):
        self.released += 1


def counters():
    """The emulator's counters (gdrsim_get_counters), or None on a real driver."""
    lib = cuda()
    try:
        fn = lib.gdrsim_get_counters
    except AttributeError:
        return None
    out = (c_uint64 * 11)()
    fn.argtypes = [c_void_p, c_size_t]
    fn.restype = c_int
    check(fn(out, ctypes.sizeof(out)), "gdrsim_get_counters")
    names = ("live_pins", "live_mappings", "live_allocations", "open_files", "ioctls",
             "live_dmabufs", "live_vmm_exports", "live_vk_imports", "live_vk_mappings",
             "live_vk_devices", "live_vk_instances")
    return dict(zip(names, out))


def set_fail(spec):
    """The emulator's fault injection (gdrsim_set_fail); False on a real driver."""
    lib = cuda()
    try:
        fn = lib.gdrsim_set_fail
    except AttributeError:
        return False
    fn.argtypes = [ctypes.c_char_p]
    fn.restype = c_int
    check(fn(spec.encode() if spec else None), "gdrsim_set_fail")
    return True
