"""The Python API's suite: on the emulator (make test-python, once per backend), from the
installed wheel (python/test-wheel.sh) and on a GPU with real PyTorch and CuPy (make test-gpu).

Environment:
  GDRAPI_PY_TEST_BACKEND  gdrdrv | dmabuf | vulkan: the backend gdr_open must pick here (the
                          suite fails if another one is picked); unset: whatever it picks.
  GDRAPI_PY_TEST_INSTALLED=1  test the installed gdrapi_rs, not python/ of this tree.
"""

import gc
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
if os.environ.get("GDRAPI_PY_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.dirname(HERE))

import gdrapi_rs  # noqa: E402
import cudadev  # noqa: E402


def child_env(**settings):
    """The environment for a Python child that imports the same gdrapi_rs and cudadev."""
    path = [HERE, os.path.dirname(os.path.dirname(gdrapi_rs.__file__))]
    old = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=os.pathsep.join(path + ([old] if old else [])), **settings)


def pytest_report_header(config):
    try:
        s = gdrapi_rs.Session()
        backend = s.backend.name.lower()
        s.close()
    except gdrapi_rs.GdrError as e:
        backend = "none (%s)" % e
    from gdrapi_rs import _lib
    return ["gdrapi_rs from %s; libgdrapi.so.2: %s; backend: %s; emulator: %s" % (
        os.path.dirname(gdrapi_rs.__file__), _lib.gdr().path, backend,
        "yes" if cudadev.counters() is not None else "no")]


@pytest.fixture(scope="session")
def backend():
    """The backend gdr_open picks here, as GDRAPI_PY_TEST_BACKEND names it."""
    with gdrapi_rs.Session() as s:
        got = {0: "gdrdrv", 1: "dmabuf", 2: "vulkan"}.get(int(s.backend))
    want = os.environ.get("GDRAPI_PY_TEST_BACKEND")
    assert want in (None, "", got), "gdr_open picked %s, the suite was run for %s" % (got, want)
    return got


@pytest.fixture
def vmm(backend):
    """Whether plain test memory must be cuMemCreate memory (the Vulkan import maps no other)."""
    return backend == "vulkan"


@pytest.fixture
def device_array(vmm):
    """Makes DeviceArrays of the memory the backend maps; frees them after the test."""
    made = []

    def make(nbytes, vmm=vmm):
        a = cudadev.DeviceArray(nbytes, vmm=vmm)
        made.append(a)
        return a

    yield make
    gc.collect()
    for a in made:
        a.free()


@pytest.fixture
def session():
    s = gdrapi_rs.Session()
    yield s
    s.close()


@pytest.fixture
def allocator():
    a = gdrapi_rs.Allocator(0)
    yield a
    gc.collect()
    a.close()


@pytest.fixture
def leaks():
    """Checks that the emulator's live pins and mappings are back where they were."""
    gc.collect()
    before = cudadev.counters()
    yield
    gc.collect()
    after = cudadev.counters()
    if before is not None:
        for k in ("live_pins", "live_mappings", "live_dmabufs", "live_vk_imports",
                  "live_vk_mappings"):
            assert after[k] == before[k], "%s: %d before, %d after" % (k, before[k], after[k])
