# The Python API of the gdrapi_rs package (python/gdrapi_rs, python/README.md).
#
# make test-python: its pytest suite (python/tests) on the emulator, once per backend: gdrdrv,
#   DMA-BUF (GDRSIM_NO_DEVICE=1) and the Vulkan import ($(SIM_VULKAN_VARS)' situation with the
#   Vulkan stand-in), each run told which backend gdr_open must pick; then the benchmark's API
#   arms as a smoke run and `python -m gdrapi_rs --self-test`. Needs pytest and numpy
#   (.ci/requirements.txt): without pytest it says so and passes, except with CI set. The same
#   suite runs from the installed wheel in test-wheel, and with real PyTorch and CuPy in
#   test-gpu (abi-tests/gpu/run.sh).
# make bench-python [PREBUILT=1]: on a GPU machine, the API against PyTorch's own copies
#   (python/bench/bench_torch.py: medians, ratios, the issue's verdicts), with the Vulkan import
#   asked for and PyTorch's expandable segments; BENCH_PYTHON_ARGS adds flags (--rounds,
#   --json FILE). Skips with a reason without PyTorch or a GPU.
# make bench-python-bindings: the per-call cost of an 8-byte write and read through ctypes,
#   cffi (where installed), a compiled CPython extension and the API, against the C call, on
#   the emulator (python/bench/bindings.py; the figures in python/README.md).
# make python-gpu: build/python/site, pytest installed there (pure Python) for a GPU machine
#   that has PyTorch and CuPy but no pip; gpu-programs builds it, run.sh puts it on the path.

PYTHON ?= python3
PY_SITE := $(BUILD_DIR)/python/site
PY_PYTEST = $(PYTHON) -m pytest -p no:cacheprovider -q python/tests

.PHONY: test-python bench-python bench-python-bindings python-gpu
test-python: lib sim ext
	@if ! $(PYTHON) -c 'import pytest' 2>/dev/null; then \
	    $(call skip_or_fail,test-python,pytest is not installed (.ci/requirements.txt)); exit 0; fi; \
	fail=0; for b in gdrdrv dmabuf vulkan; do \
	    case $$b in gdrdrv) e=;; dmabuf) e="GDRSIM_NO_DEVICE=1";; vulkan) e="$(SIM_VULKAN_VARS)";; esac; \
	    echo "== test-python: the $$b backend"; \
	    env $$e GDRAPI_PY_TEST_BACKEND=$$b LD_PRELOAD=$(SIM_DIR)/libcuda.so.1 \
	        LD_LIBRARY_PATH=$(SIM_DIR)/vulkan:$(SIM_DIR):$(LIB_DIR) $(PY_PYTEST); rc=$$?; \
	    if [ $$rc -eq 5 ]; then echo "test-python: FAILED: pytest collected no test"; fi; \
	    [ $$rc -eq 0 ] || fail=1; \
	done; \
	echo "== test-python: the benchmark's API arms and the self-test, on the emulator"; \
	$(SIM_ENV) $(PYTHON) python/bench/bench_torch.py --api-only --rounds 3 --calls 100 || fail=1; \
	(cd python && $(SIM_ENV) $(PYTHON) -m gdrapi_rs --self-test) || fail=1; \
	if [ $$fail -eq 0 ]; then echo "test-python: passed on gdrdrv, dma-buf and vulkan"; fi; exit $$fail
TEST_TARGETS += test-python

bench-python: $(if $(PREBUILT),,lib ext)
	env -u LD_PRELOAD LD_LIBRARY_PATH=$(LIB_DIR) GDRAPI_USE_VULKAN=$${GDRAPI_USE_VULKAN-1} \
	    PYTORCH_CUDA_ALLOC_CONF=$${PYTORCH_CUDA_ALLOC_CONF-expandable_segments:True} \
	    $(PYTHON) python/bench/bench_torch.py $(BENCH_PYTHON_ARGS)

bench-python-bindings: lib sim ext
	$(SIM_ENV) $(PYTHON) python/bench/bindings.py $(BENCH_PYTHON_ARGS)

# pytest for a machine without pip: installed from PyPI here into build/python/site (make
# test-gpu carries build/ there). Offline, it says so: run.sh then uses a pytest of the
# machine's own, or skips the Python step with the reason.
python-gpu:
	@if [ -d $(PY_SITE)/pytest ]; then exit 0; fi; \
	mkdir -p $(PY_SITE) && $(PYTHON) -m pip install -q --disable-pip-version-check \
	    --target $(PY_SITE) pytest || echo "python-gpu: pytest not installed into $(PY_SITE) (no PyPI?)"
gpu-programs: python-gpu
