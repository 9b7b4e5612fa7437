"""PyTorch and CuPy on a real GPU (make test-gpu); skipped where they or a GPU are absent.

PyTorch's caching allocator gives cudaMalloc memory unless PYTORCH_CUDA_ALLOC_CONF has
expandable_segments:True (then cuMemCreate memory exportable as a file descriptor): the
Vulkan import maps only the latter, so there the default allocator's tensors must be refused
with EINVAL and the hint, and nothing else may change. CuPy's default pool is cudaMalloc
memory too; CuPy arrays over exportable memory (cudadev's, or host-written memory) pin
everywhere.
"""

import errno
import gc
import os
import re
import sys

import pytest

import cudadev
import gdrapi_rs

torch = None
try:
    import torch as _torch
    if _torch.cuda.is_available():
        torch = _torch
except ImportError:
    pass
cupy = None
try:
    import cupy as _cupy
    if _cupy.cuda.runtime.getDeviceCount() > 0:
        cupy = _cupy
except Exception:  # ImportError, or CuPy without a driver
    pass

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch with CUDA is not available")
needs_cupy = pytest.mark.skipif(cupy is None, reason="CuPy with a GPU is not available")
EXPANDABLE = "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")


def torch_pins(backend):
    """Whether PyTorch's allocator gives memory this backend maps."""
    return backend != "vulkan" or EXPANDABLE


def expect_refused(backend, obj):
    with pytest.raises(gdrapi_rs.GdrError) as e:
        gdrapi_rs.pin(obj)
    assert e.value.errno == errno.EINVAL and e.value.call == "gdr_pin_buffer"
    assert "expandable_segments:True" in str(e.value)


@needs_torch
@pytest.mark.parametrize("nbytes", [64 << 10, 1 << 20, 8 << 20])
def test_torch_tensor(backend, nbytes):
    t = torch.zeros(nbytes // 4, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    if not torch_pins(backend):
        expect_refused(backend, t)
        expect_refused(backend, t)  # clean: the same answer again, no crash, no leak
        return
    with gdrapi_rs.pin(t) as p:
        assert p.addr == t.data_ptr() and p.size == nbytes
        assert p.mapping.mapping_type in (gdrapi_rs.MappingType.WC,
                                          gdrapi_rs.MappingType.CACHING)
        # CPU writes, seen by torch.
        p.write(nbytes - 4096, b"".join(i.to_bytes(4, sys.byteorder) for i in range(1024)))
        assert t[-1024:].tolist() == list(range(1024))
        p.write_u64(0, 0x0000000700000005)
        assert t[:2].tolist() == [5, 7]
        # GPU rewrites, read back by the CPU.
        t.fill_(9)
        torch.cuda.synchronize()
        assert p.read(0, 8) == (9).to_bytes(4, sys.byteorder) * 2
        assert p.read_u64(nbytes - 8) == (9 << 32) | 9


@needs_torch
def test_torch_through_dlpack_only(backend):
    t = torch.ones(1 << 14, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()

    class OnlyDLPack:
        def __dlpack__(self, stream=None):
            return t.__dlpack__()

        def __dlpack_device__(self):
            return t.__dlpack_device__()
    if not torch_pins(backend):
        expect_refused(backend, OnlyDLPack())
        return
    with gdrapi_rs.pin(OnlyDLPack()) as p:
        assert p.addr == t.data_ptr()
        assert p.read(0, 4) == b"\x00\x00\x80\x3f"  # 1.0f


@needs_torch
def test_host_written_memory_as_tensors(allocator):
    flag = allocator.alloc(64, dtype="int64")
    f = torch.as_tensor(flag, device="cuda")
    assert f.data_ptr() == flag.dev_ptr and f.dtype == torch.int64 and f.shape == (8,)
    flag.write_u64(0, 42)
    assert f.add(0)[0].item() == 42  # a kernel reads what the CPU stored
    f.fill_(7)
    torch.cuda.synchronize()
    assert flag.read_u64(56) == 7
    g = torch.from_dlpack(flag)
    assert g.data_ptr() == flag.dev_ptr
    with pytest.raises(BufferError):
        flag.free()  # the DLPack tensor still uses it
    del g, f
    gc.collect()
    flag.free()


@needs_torch
def test_readme_example(backend):
    """The README's Python section, executed as it is printed there."""
    readme = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")
    if not os.path.exists(readme):
        pytest.skip("no README.md beside the tests")
    text = open(readme).read()
    section = text[text.index("\n## Python"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    if not torch_pins(backend):
        with pytest.raises(gdrapi_rs.GdrError) as e:
            exec(compile(code, "README.md", "exec"), {})
        assert e.value.errno == errno.EINVAL
        return
    exec(compile(code, "README.md", "exec"), {})


@needs_torch
def test_self_test_example(backend):
    if torch_pins(backend):
        from gdrapi_rs.__main__ import torch_example
        torch_example()


@needs_cupy
def test_cupy_arrays(backend, allocator):
    # Host-written memory as a CuPy array: the same bytes both ways.
    x = allocator.alloc(4096, dtype="u4")
    c = cupy.asarray(x)
    assert c.data.ptr == x.dev_ptr and c.dtype == cupy.uint32 and c.shape == (1024,)
    x.write(0, (123).to_bytes(4, sys.byteorder))
    assert int(c[0]) == 123
    c[1:] = 5
    cupy.cuda.Device().synchronize()
    assert x.read(4092, 4) == (5).to_bytes(4, sys.byteorder)
    del c
    # An array of CuPy's default pool (cudaMalloc memory).
    d = cupy.arange(1 << 16, dtype=cupy.int64)
    cupy.cuda.Device().synchronize()
    if backend == "vulkan":
        expect_refused(backend, d)
    else:
        with gdrapi_rs.pin(d) as p:
            assert p.read_u64(8 * 100) == 100
            p.write_u64(0, 77)
            assert int(d[0]) == 77
    # A CuPy array over exportable memory pins on every backend.
    mem = cudadev.DeviceArray(1 << 20, vmm=True)
    e = cupy.asarray(mem)
    e[:] = 3
    cupy.cuda.Device().synchronize()
    with gdrapi_rs.pin(e) as p:
        assert p.read(0, 4) == b"\x03" * 4
        p.write(100, b"\x09")
        assert int(e[100]) == 9
    del e
    gc.collect()
    mem.free()
