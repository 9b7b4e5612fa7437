"""Allocator and HostWritten: host-written GPU memory."""

import ctypes
import errno
import gc
import sys

import pytest

import cudadev
import gdrapi_rs
from gdrapi_rs import _device

try:
    import numpy as np
except ImportError:
    np = None


def test_alloc_write_read(allocator, backend, leaks):
    info = allocator.info()
    assert info.device == 0 and info.backend.name.lower() == backend
    assert info.memory in (gdrapi_rs.Memory.CUMEMCREATE, gdrapi_rs.Memory.CUMEMALLOC)
    flags = [allocator.alloc(8) for _ in range(100)]
    assert allocator.info().allocations == 100 and allocator.info().pins == 1
    for i, f in enumerate(flags):
        assert f.dev_ptr % 64 == 0 and len(f) == f.size == 8
        f.write_u64(0, i)
    assert [f.read_u64(0) for f in flags] == list(range(100))
    # The bytes are device memory: the CUDA driver sees them.
    dev = ctypes.create_string_buffer(8)
    cudadev.check(cudadev.cuda().cuMemcpyDtoH_v2(dev, flags[42].dev_ptr, 8), "DtoH")
    assert int.from_bytes(dev.raw, sys.byteorder) == 42
    cudadev.htod(flags[7].dev_ptr, (2**63).to_bytes(8, sys.byteorder))
    assert flags[7].read_u64(0) == 2**63
    for f in flags:
        f.free()
    assert allocator.info().allocations == 0


def test_bytes_readinto_and_bounds(allocator, leaks):
    x = allocator.alloc(4096, 4096)
    assert x.dev_ptr % 4096 == 0
    x.write(10, b"hello")
    assert x.read(10, 5) == b"hello"
    buf = bytearray(3)
    assert x.readinto(11, buf) == 3 and buf == b"ell"
    x.write(4090, b"123456")
    for call in (lambda: x.write(4091, b"123456"), lambda: x.read(-1, 1),
                 lambda: x.read(0, 4097), lambda: x.write_u64(4096, 1), lambda: x.read_u64(4092)):
        with pytest.raises(gdrapi_rs.GdrError) as e:
            call()
        assert e.value.errno == errno.EINVAL and "outside" in str(e.value)
    with pytest.raises(gdrapi_rs.GdrError) as e:
        x.write_u64(4, 1)
    assert e.value.errno == errno.EINVAL and "8-byte aligned" in str(e.value)
    with pytest.raises(TypeError):
        x.readinto(0, b"read-only")
    with pytest.raises(TypeError):
        x.write(0, "text")
    x.free()


def test_cuda_array_interface_and_dtype(allocator, leaks):
    x = allocator.alloc(64, dtype="int64")
    cai = x.__cuda_array_interface__
    assert cai["data"] == (x.dev_ptr, False) and cai["shape"] == (8,)
    assert cai["typestr"] == ("<i8" if sys.byteorder == "little" else ">i8")
    assert cai["version"] == 3 and cai["strides"] is None and cai["stream"] is None
    assert x.dtype == cai["typestr"] and x.shape == (8,)
    assert allocator.alloc(16, dtype="u1").__cuda_array_interface__["typestr"] == "|u1"
    assert allocator.alloc(16, dtype="torch.float32").dtype[1:] == "f4"
    if np is not None:
        assert allocator.alloc(16, dtype=np.dtype(np.int32)).dtype[1:] == "i4"
    for bad in ("q", "x8", "int128"):
        with pytest.raises(TypeError):
            allocator.alloc(16, dtype=bad)
    with pytest.raises(gdrapi_rs.GdrError) as e:
        allocator.alloc(12, dtype="i8")
    assert e.value.errno == errno.EINVAL
    x.free()
    with pytest.raises(AttributeError):
        x.__cuda_array_interface__


def test_dlpack_export(allocator, leaks):
    x = allocator.alloc(256, dtype="f4")
    assert x.__dlpack_device__() == (_device.DL_CUDA, 0)
    cap = x.__dlpack__(stream=1)
    assert _device.live_exports() >= 1
    # Read the capsule as a consumer would.
    m = _device.DLManagedTensor.from_address(_device._api.PyCapsule_GetPointer(cap, b"dltensor"))
    t = m.dl_tensor
    assert t.data == x.dev_ptr and t.ndim == 1 and t.shape[0] == 64 and not t.strides
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (2, 32, 1)
    assert (t.device.device_type, t.device.device_id) == (2, 0)
    with pytest.raises(BufferError):
        x.free()  # a consumer may still hold it
    n = _device.live_exports()
    del cap, m, t
    gc.collect()
    assert _device.live_exports() == n - 1  # dropped unconsumed: released
    # A consumer that takes the capsule calls the deleter itself.
    cap = x.__dlpack__()
    ptr = _device._api.PyCapsule_GetPointer(cap, b"dltensor")
    _device._api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
    _device._api.PyCapsule_SetName(cap, b"used_dltensor")
    m = _device.DLManagedTensor.from_address(ptr)
    m.deleter(ptr)
    del cap, m
    gc.collect()
    # DLPack 1.0 when the consumer asks for it.
    cap = x.__dlpack__(max_version=(1, 0))
    assert _device._api.PyCapsule_IsValid(cap, b"dltensor_versioned")
    v = _device.DLManagedTensorVersioned.from_address(
        _device._api.PyCapsule_GetPointer(cap, b"dltensor_versioned"))
    assert (v.version.major, v.version.minor, v.flags) == (1, 0, 0)
    assert v.dl_tensor.data == x.dev_ptr and v.dl_tensor.shape[0] == 64
    old = x.__dlpack__(max_version=(0, 8))
    assert _device._api.PyCapsule_IsValid(old, b"dltensor")
    del old
    n = _device.live_exports()
    del cap, v
    gc.collect()
    assert _device.live_exports() == n - 1
    x.free()
    for kw in ({"copy": True}, {"dl_device": (1, 0)}):
        with pytest.raises(BufferError):
            allocator.alloc(8).__dlpack__(**kw)


def test_pin_of_an_allocation(allocator, session, leaks):
    x = allocator.alloc(1 << 20)
    with session.pin(x) as p:
        p.write(4096, b"through gdr_copy_to_mapping")
        assert x.read(4096, 27) == b"through gdr_copy_to_mapping"
    # DLPack, when that is all the object offers.

    class OnlyDLPack:
        def __dlpack__(self, stream=None):
            return x.__dlpack__()

        def __dlpack_device__(self):
            return x.__dlpack_device__()
    with session.pin(OnlyDLPack()) as p:
        assert p.addr == x.dev_ptr and p.read(4096, 7) == b"through"
    gc.collect()
    x.free()


def test_view(allocator, leaks):
    x = allocator.alloc(128)
    v = x.view()
    v[0:5] = b"plain"
    x.fence()
    assert x.read(0, 5) == b"plain"
    x.write(5, b"!")
    assert bytes(v[0:6]) == b"plain!"
    if np is not None:
        a = np.frombuffer(v, dtype=np.uint64)
        a[15] = 99
        assert x.read_u64(120) == 99
        del a
    with pytest.raises(BufferError):
        x.free()
    with pytest.raises(BufferError):
        allocator.close()  # nothing is freed
    assert x.read(0, 5) == b"plain" and not allocator.closed
    del v
    x.free()


def test_lookup(allocator, leaks):
    x = allocator.alloc(256)
    assert allocator.lookup(x.dev_ptr + 10) == (x.dev_ptr, 10)
    assert allocator.lookup(x.cpu_ptr + 20) == (x.dev_ptr, 20)
    with pytest.raises(gdrapi_rs.GdrError) as e:
        allocator.lookup(0x1000)
    assert e.value.errno == errno.ENOENT and e.value.call == "gdrx_lookup"
    x.free()


def test_close_and_use_after(leaks):
    a = gdrapi_rs.Allocator(0)
    xs = [a.alloc(64) for _ in range(3)]
    xs[0].free()
    xs[0].free()  # a second free does nothing
    a.close()
    a.close()
    assert a.closed and all(x.closed for x in xs)
    for call in (lambda: a.alloc(8), lambda: a.info(), lambda: a.lookup(1),
                 lambda: xs[1].write_u64(0, 1), lambda: xs[1].read(0, 1),
                 lambda: xs[2].view(), lambda: xs[2].__dlpack__()):
        with pytest.raises(gdrapi_rs.GdrError) as e:
            call()
        assert e.value.errno == errno.EINVAL and "closed" in str(e.value)


def test_with_blocks_and_garbage_collection(leaks):
    with gdrapi_rs.Allocator(0) as a:
        with a.alloc(64) as x:
            x.write_u64(0, 1)
        assert x.closed and a.info().allocations == 0
        for _ in range(10):
            a.alloc(1 << 20)  # large: a pin each, freed at once by the GC
        gc.collect()
        assert a.info().allocations == 0 and a.info().pins == 0
        keep = a.alloc(64)
    assert a.closed and keep.closed
    gdrapi_rs.Allocator(0).alloc(64)  # both released by the GC


def test_allocator_errors(backend):
    with pytest.raises(gdrapi_rs.GdrError) as e:
        gdrapi_rs.Allocator(cudadev.device_count())  # one past the last device
    assert e.value.errno == errno.ENODEV and e.value.call == "gdrx_open"
    assert "GDRAPI_USE_VULKAN=1" in str(e.value)
    if backend == "vulkan":
        with pytest.raises(gdrapi_rs.GdrError) as e:
            gdrapi_rs.Allocator(0, cumemalloc=True)
        assert e.value.errno == errno.ENOTSUP and "cumemalloc" in str(e.value)
    else:
        with gdrapi_rs.Allocator(0, cumemalloc=True) as a:
            assert a.info().memory == gdrapi_rs.Memory.CUMEMALLOC
    with gdrapi_rs.Allocator(0) as a:
        for size, align in ((0, 0), (64, 3), (64, 1 << 17)):
            with pytest.raises(gdrapi_rs.GdrError) as e:
                a.alloc(size, align)
            assert e.value.errno == errno.EINVAL
    if cudadev.set_fail("cuMemCreate:*:2,cuMemAlloc:*:2"):
        try:
            with gdrapi_rs.Allocator(0) as a:
                with pytest.raises(gdrapi_rs.GdrError) as e:
                    a.alloc(1 << 20)
                assert e.value.errno == errno.ENOMEM and e.value.call == "gdrx_alloc"
        finally:
            cudadev.set_fail(None)
