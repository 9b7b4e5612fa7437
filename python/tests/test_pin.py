"""pin(): Session, Pin, Mapping on device memory the program already has."""

import errno
import gc
import os
import subprocess
import sys
import textwrap

import pytest

import cudadev
import gdrapi_rs
from conftest import child_env

try:
    import numpy as np
except ImportError:  # numpy is optional for the package; the tests that need it skip
    np = None

needs_numpy = pytest.mark.skipif(np is None, reason="numpy is not installed")


def pattern(n, seed=1):
    return bytes((i * 7 + seed) & 0xFF for i in range(n))


def test_versions_and_library():
    assert gdrapi_rs.runtime_version() == (2, 6)
    assert gdrapi_rs.ext_runtime_version() == (0, 1)
    assert gdrapi_rs.library_is_thread_safe() is True
    from gdrapi_rs import _lib
    if os.environ.get("GDRAPI_PY_TEST_INSTALLED") == "1":
        # The wheel's own copy, not build/lib or a system install.
        assert _lib.gdr().path.startswith(os.path.dirname(gdrapi_rs.__file__))


def test_session_reports_its_backend(session, backend):
    assert session.backend.name.lower() == backend
    assert session.driver_version() == (2, 6)
    assert session.uses_dma_buf() == (backend == "dmabuf")
    assert "Session" in repr(session) and not session.closed


@pytest.mark.parametrize("size", [8, 4096, 65536, 1 << 20])
def test_pin_round_trip_both_ways(device_array, leaks, size):
    a = device_array(size)
    with gdrapi_rs.pin(a) as p:
        assert p.addr == a.ptr and p.size == size == len(p)
        assert p.obj is a
        data = pattern(size)
        p.write(0, data)
        assert a.read() == data  # what the GPU holds, read with cuMemcpyDtoH
        other = pattern(size, seed=3)
        a.write(0, other)  # written with cuMemcpyHtoD
        assert p.read(0, size) == other
        back = bytearray(size)
        assert p.readinto(0, back) == size and bytes(back) == other
    assert p.closed and p.obj is None


def test_offsets_and_u64(device_array, leaks):
    a = device_array(4096)
    p = gdrapi_rs.pin(a)
    p.write(100, b"abc")
    assert a.read(100, 3) == b"abc" and p.read(101, 2) == b"bc"
    p.write_u64(4088, 0x0123456789ABCDEF)
    assert a.read(4088, 8) == (0x0123456789ABCDEF).to_bytes(8, sys.byteorder)
    a.write(8, (2**64 - 1).to_bytes(8, sys.byteorder))
    assert p.read_u64(8) == 2**64 - 1
    p.write(4096, b"")  # an empty write at the end is in range
    assert p.read(4096, 0) == b""
    p.close()


@needs_numpy
def test_address_as_a_numpy_integer(device_array, leaks):
    a = device_array(4096)
    with gdrapi_rs.pin(np.uint64(a.ptr), np.int64(4096)) as p:
        p.write(0, b"np")
        assert a.read(0, 2) == b"np" and p.obj is None


def test_unaligned_addresses_map(device_array, leaks):
    """Any address maps: the pin covers its 64 KiB GPU pages."""
    a = device_array(3 * 65536)
    for off in (8, 4096 + 64, 65536 - 8):
        with gdrapi_rs.pin(a.ptr + off, 100) as p:
            assert p.info().va == (a.ptr + off) & ~0xFFFF
            p.write(0, b"x" * 100)
            assert a.read(off, 100) == b"x" * 100
            assert len(p.mapping) == 100


def test_pin_of_a_prefix(device_array, leaks):
    a = device_array(65536)
    with gdrapi_rs.pin(a, 64) as p:
        assert len(p) == 64
        with pytest.raises(gdrapi_rs.GdrError) as e:
            p.write(60, b"12345")
        assert e.value.errno == errno.EINVAL and "outside the 64 mapped bytes" in str(e.value)


def test_info_and_mapping_type(device_array, session, leaks):
    a = device_array(65536)
    p = session.pin(a, map=False)
    i = p.info()
    assert i.va == a.ptr & ~0xFFFF and i.page_size in (4096, 65536) and i.mapped_size >= 65536
    assert not i.mapped and p.mapping is None
    with pytest.raises(gdrapi_rs.GdrError) as e:
        p.write(0, b"x")
    assert e.value.errno == errno.EINVAL and "not mapped" in str(e.value)
    m = p.map()
    assert p.mapping is m and m.mapping_type == gdrapi_rs.MappingType.WC
    assert p.info().mapped and p.info().wc_mapping
    assert p.invalidated is False
    with pytest.raises(gdrapi_rs.GdrError) as e:
        p.map()
    assert e.value.errno == errno.EAGAIN
    m.close()
    assert p.mapping is None and m.closed
    m2 = p.map()  # a new mapping once the first is gone
    m2.write(0, b"again")
    assert a.read(0, 5) == b"again"
    p.close()


@needs_numpy
def test_views_and_numpy(device_array, leaks):
    a = device_array(4096)
    p = gdrapi_rs.pin(a)
    v = p.view()
    assert v.format == "B" and v.nbytes == 4096 and not v.readonly
    x = np.frombuffer(v, dtype=np.int64)
    x[:] = np.arange(512)
    p.fence()
    assert np.frombuffer(a.read(), dtype=np.int64).tolist() == list(range(512))
    a.write(0, (77).to_bytes(8, sys.byteorder))
    assert x[0] == 77
    # Writes from numpy arrays and memoryviews, readinto numpy arrays.
    p.write(8, np.array([5, 6], dtype=np.int64))
    p.write(24, memoryview(np.array([7], dtype=np.int64)))
    out = np.zeros(3, dtype=np.int64)
    p.readinto(8, out)
    assert out.tolist() == [5, 6, 7]
    if sys.version_info >= (3, 12):
        assert bytes(memoryview(p.mapping)[:8]) == bytes(v[:8])
    # Views keep the mapping: closing now is refused and changes nothing.
    with pytest.raises(BufferError):
        p.close()
    assert not p.closed and p.read_u64(0) == 77
    del x, v
    gc.collect()
    p.close()


def test_views_outlive_the_pin_object(device_array, leaks):
    a = device_array(4096)
    p = gdrapi_rs.pin(a)
    v = p.view()
    del p
    gc.collect()
    v[0:4] = b"live"  # the mapping is still there: the view holds it
    assert a.read(0, 4) == b"live"
    c = cudadev.counters()
    del v
    gc.collect()
    if c is not None:
        assert cudadev.counters()["live_mappings"] <= c["live_mappings"]


def test_release_at_garbage_collection(device_array, leaks):
    a = device_array(65536)
    s = gdrapi_rs.Session()
    for _ in range(20):
        p = s.pin(a)
        p.write(0, b"gc")
        del p
    del s  # the session closes once its last pin is gone


def test_session_close_closes_its_pins(device_array, leaks):
    a = device_array(65536)
    s = gdrapi_rs.Session()
    p1, p2 = s.pin(a), s.pin(a.ptr, 4096, map=False)
    v = p1.view()
    with pytest.raises(BufferError):
        s.close()
    assert not s.closed and not p1.closed and not p2.closed
    del v
    s.close()
    assert s.closed and p1.closed and p2.closed
    s.close()  # a second close does nothing
    for call in (lambda: p1.write(0, b"x"), lambda: p1.read_u64(0), lambda: p2.info(),
                 lambda: p2.map(), lambda: s.pin(a), lambda: s.driver_version(),
                 lambda: p1.view()):
        with pytest.raises(gdrapi_rs.GdrError) as e:
            call()
        assert e.value.errno == errno.EINVAL and "closed" in str(e.value)


def test_use_after_close(device_array, leaks):
    a = device_array(4096)
    p = gdrapi_rs.pin(a)
    m = p.mapping
    p.close()
    p.close()
    for call in (lambda: m.write(0, b"x"), lambda: m.read(0, 1), lambda: m.write_u64(0, 1),
                 lambda: m.read_u64(0), lambda: m.readinto(0, bytearray(1)), lambda: m.view(),
                 lambda: p.info(), lambda: p.invalidated, lambda: p.map()):
        with pytest.raises(gdrapi_rs.GdrError) as e:
            call()
        assert isinstance(e.value, OSError) and e.value.errno == errno.EINVAL
        assert "closed" in e.value.strerror


def test_dlpack_objects(device_array, leaks):
    a = device_array(65536)
    a.write(0, pattern(65536))
    d = cudadev.DLPackOnly(a, "<i4", rows=4, byte_offset=256)
    with gdrapi_rs.pin(d) as p:
        assert p.addr == a.ptr + 256 and p.size == 65536 - 256
        assert p.read(0, 64) == pattern(65536)[256:320]
        assert d.released == 0  # the pin holds the capsule, so the producer's memory
    gc.collect()
    assert d.released == 1  # released with the pin


def test_what_cannot_be_pinned(device_array, session, leaks):
    # Host memory described as DLPack (numpy arrays are kDLCPU).
    host = cudadev.DLPackOnly(device_array(4096), device_type=1)
    with pytest.raises(gdrapi_rs.GdrError) as e:
        session.pin(host)
    assert e.value.errno == errno.EINVAL and "kDLCPU" in str(e.value)
    if np is not None and hasattr(np.zeros(1), "__dlpack__"):
        with pytest.raises(gdrapi_rs.GdrError) as e:
            session.pin(np.zeros(16))
        assert "not CUDA device memory" in str(e.value)

    class Strided:
        __cuda_array_interface__ = {"shape": (4, 4), "typestr": "<f4", "strides": (32, 4),
                                    "data": (0x10000, False), "version": 3}
    with pytest.raises(gdrapi_rs.GdrError) as e:
        session.pin(Strided())
    assert e.value.errno == errno.EINVAL and "not C-contiguous" in str(e.value)
    with pytest.raises(TypeError):
        session.pin(object())
    with pytest.raises(TypeError):
        session.pin(0x10000)  # an address needs a size
    with pytest.raises(gdrapi_rs.GdrError):
        session.pin(0x10000, 0)


def test_bad_pointers_are_refused_by_the_library(session, backend, leaks):
    import ctypes
    host = ctypes.create_string_buffer(1 << 17)
    for addr, size in ((0x1000, 4096), (ctypes.addressof(host), 65536), (2**47 + 2**40, 65536)):
        with pytest.raises(gdrapi_rs.GdrError) as e:
            session.pin(addr, size)
        assert e.value.errno == errno.EINVAL and e.value.call == "gdr_pin_buffer"
        assert "GDRCOPY_ENABLE_LOGGING=1" in str(e.value)
    # The session still works.
    assert session.driver_version() == (2, 6)


def test_memory_the_backend_cannot_map(device_array, session, backend, leaks):
    """cudaMalloc-style memory on the Vulkan import: EINVAL, and the hint says how to
    allocate instead. Elsewhere such memory pins."""
    a = device_array(65536, vmm=False)
    if backend != "vulkan":
        session.pin(a).close()
        return
    with pytest.raises(gdrapi_rs.GdrError) as e:
        session.pin(a)
    assert e.value.errno == errno.EINVAL and e.value.call == "gdr_pin_buffer"
    assert "expandable_segments:True" in str(e.value) and "cuMemCreate" in str(e.value)


def test_injected_driver_failures_become_errors(device_array, session, backend, leaks):
    a = device_array(65536)
    rule = {"gdrdrv": "PIN_BUFFER:1:ENOMEM,PIN_BUFFER_V2:1:ENOMEM",
            "dmabuf": "cuMemGetHandleForAddressRange:1:2",
            "vulkan": "vkAllocateMemory:1:VK_ERROR_OUT_OF_DEVICE_MEMORY"}[backend]
    if not cudadev.set_fail(rule):
        pytest.skip("not on the emulator")
    try:
        with pytest.raises(gdrapi_rs.GdrError) as e:
            session.pin(a)
    finally:
        cudadev.set_fail(None)
    assert e.value.errno == errno.ENOMEM and e.value.call == "gdr_pin_buffer"
    session.pin(a).close()  # and the next pin works
    if not cudadev.set_fail({"gdrdrv": "mmap:1:ENOMEM", "dmabuf": "mmap:1:ENOMEM",
                             "vulkan": "vkMapMemory:1:VK_ERROR_MEMORY_MAP_FAILED"}[backend]):
        return
    try:
        with pytest.raises(gdrapi_rs.GdrError) as e:
            session.pin(a)  # pinned, the map fails: the pin is released again
    finally:
        cudadev.set_fail(None)
    assert e.value.call == "gdr_map" and e.value.errno != 0


def test_memory_freed_while_pinned(device_array, backend, leaks):
    """A bare address whose memory is freed while pinned: gdrdrv (persistent, the default)
    and the Vulkan import keep the pages until the unpin, and so does the emulator's DMA-BUF
    export while the pin holds it; copies still work."""
    a = device_array(65536)
    p = gdrapi_rs.pin(a.ptr, 65536)
    p.write(0, b"before")
    a.free()
    if backend == "dmabuf" and cudadev.counters() is None:
        p.close()  # a real driver's DMA-BUF export: not known to keep the pages; no access
        return
    assert p.read(0, 6) == b"before"
    p.write(0, b"after!")
    assert p.read(0, 6) == b"after!"
    assert p.invalidated is False
    p.close()


def test_non_persistent_gdrdrv_invalidates(backend):
    if backend != "gdrdrv" or cudadev.counters() is None:
        pytest.skip("gdrdrv's non-persistent mode, on the emulator")
    code = textwrap.dedent("""
        import cudadev, gdrapi_rs
        a = cudadev.DeviceArray(65536)
        p = gdrapi_rs.pin(a.ptr, 65536)
        p.write(0, b"x")
        a.free()
        print("invalidated", p.invalidated)
        p.close()  # no access through the mapping: it would raise SIGBUS
        print("closed", p.closed)
    """)
    r = subprocess.run([sys.executable, "-c", code], env=child_env(GDRSIM_PERSISTENT="0"),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "invalidated True" in r.stdout and "closed True" in r.stdout


def test_fork_child_is_refused(device_array):
    a = device_array(4096)
    p = gdrapi_rs.pin(a)
    p.write(0, b"parent")
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            for call in (lambda: p.write(0, b"child!"), lambda: p.read(0, 6), lambda: p.view(),
                         lambda: p.info(), lambda: p.write_u64(0, 1)):
                try:
                    call()
                    status = 2
                    break
                except gdrapi_rs.GdrError as e:
                    if e.errno not in (errno.EACCES, errno.EINVAL):
                        status = 3
                        break
            else:
                status = 0
        finally:
            os._exit(status)
    _, st = os.waitpid(pid, 0)
    assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0
    assert p.read(0, 6) == b"parent"  # the parent's pin is untouched
    p.close()


def test_large_copies_release_the_gil(device_array, leaks):
    size = 4 << 20
    a = device_array(size)
    with gdrapi_rs.pin(a) as p:
        data = pattern(size)
        p.write(0, data)
        assert p.read(0, size) == data
        buf = bytearray(size)
        p.readinto(0, buf)
        assert bytes(buf) == data


def test_sizes_out_of_range_are_refused_before_anything_is_allocated(device_array, allocator):
    a = device_array(4096)
    x = allocator.alloc(64)
    with gdrapi_rs.pin(a) as p:
        for obj in (p, x):
            for offset, size in ((0, 10**15), (-1, 8), (0, -1), (10**15, 1)):
                with pytest.raises(gdrapi_rs.GdrError) as e:
                    obj.read(offset, size)
                assert e.value.errno == errno.EINVAL
            with pytest.raises(gdrapi_rs.GdrError):
                obj.readinto(10**15, bytearray(1))
            with pytest.raises(gdrapi_rs.GdrError):
                obj.write(-8, b"12345678")
            with pytest.raises(OverflowError):
                obj.write_u64(0, -1)  # not a 64-bit unsigned value
            with pytest.raises(OverflowError):
                obj.write_u64(0, 2**64)


def test_released_and_unreachable_views_do_not_hold_the_mapping(device_array, leaks):
    a = device_array(4096)
    p = gdrapi_rs.pin(a)
    v = p.view()
    w = v[8:16]  # a slice: one more view of the same buffer
    v.release()
    with pytest.raises(BufferError):
        p.close()  # the slice still holds it
    w.release()

    class Holder:
        pass
    h = Holder()
    h.self, h.view = h, p.view()  # a view in a reference cycle, unreachable after del
    del h
    p.close()  # one collection finds it
    assert p.closed
