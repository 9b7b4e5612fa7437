# gdrapi-rs: build, test, install, package and benchmark libgdrapi.so.2.
#
# Contracts: `make` -> build/lib/libgdrapi.so.2.6 and its links;
# `make sim` -> build/sim/libcuda.so.1; `make test`; `make install`; `make deb`; `make bench`.
# Each concern keeps its rules in mk/<concern>.mk; this file holds the shared variables.

SHELL := /bin/bash
.DEFAULT_GOAL := all

# Version, parsed from the header exactly as upstream's build scripts do.
GDR_API_MAJOR := $(shell awk '/\#define GDR_API_MAJOR_VERSION/ {print $$3}' include/gdrapi.h 2>/dev/null)
GDR_API_MINOR := $(shell awk '/\#define GDR_API_MINOR_VERSION/ {print $$3}' include/gdrapi.h 2>/dev/null)
GDR_API_MAJOR := $(if $(GDR_API_MAJOR),$(GDR_API_MAJOR),2)
GDR_API_MINOR := $(if $(GDR_API_MINOR),$(GDR_API_MINOR),6)
VERSION := $(GDR_API_MAJOR).$(GDR_API_MINOR)
# The packages' version (Cargo.toml's), used by make wheel and make rpm.
PKG_VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml 2>/dev/null | head -1)

# Install locations (upstream's names and defaults).
prefix ?= /usr/local
exec_prefix ?= $(prefix)
libdir ?= $(exec_prefix)/lib
bindir ?= $(exec_prefix)/bin
includedir ?= $(prefix)/include
datadir ?= $(prefix)/share
DESTDIR ?=
override DESTDIR := $(if $(DESTDIR),$(abspath $(DESTDIR)),)

# Where things are built. Both can be moved so that several builds can run side by side.
BUILD_DIR ?= build
override BUILD_DIR := $(abspath $(BUILD_DIR))
CARGO ?= cargo
CARGO_TARGET_DIR ?= $(CURDIR)/target
override CARGO_TARGET_DIR := $(abspath $(CARGO_TARGET_DIR))
export CARGO_TARGET_DIR
CARGO_FLAGS ?=
# How `make lib` and `make tools` (and so `make install`) build: the cargo command and, for a
# build for another target or glibc, its --target. make rpm sets CARGO_BUILD="cargo zigbuild"
# and RUST_TARGET=<arch>-unknown-linux-gnu.2.17, so that the RPMs need glibc 2.17 only.
CARGO_BUILD ?= $(CARGO) build
RUST_TARGET ?=
# Where that build puts its outputs (a glibc suffix such as .2.17 is not part of the directory).
CARGO_OUT = $(CARGO_TARGET_DIR)/$(if $(RUST_TARGET),$(firstword $(subst ., ,$(RUST_TARGET)))/)release
CARGO_TARGET_FLAG = $(if $(RUST_TARGET),--target $(RUST_TARGET))

LIB_DIR := $(BUILD_DIR)/lib
BIN_DIR := $(BUILD_DIR)/bin
SIM_DIR := $(BUILD_DIR)/sim
LIB_REAL := libgdrapi.so.$(VERSION)
LIB_SONAME := libgdrapi.so.$(GDR_API_MAJOR)

CC ?= cc
CXX ?= c++

# cuda.h comes from the nvidia-cuda-runtime wheel (only C tests that allocate device memory
# need it). CUDA_INCLUDE may be given; otherwise it is looked up once.
CUDA_INCLUDE ?= $(shell python3 -c 'import glob,os,nvidia; print(next(iter(sorted(os.path.dirname(f) for p in nvidia.__path__ for f in glob.glob(p+"/*/include/cuda.h"))),""))' 2>/dev/null)

# Run a program on the emulator.
SIM_ENV = LD_PRELOAD=$(SIM_DIR)/libcuda.so.1 LD_LIBRARY_PATH=$(SIM_DIR):$(LIB_DIR)
# ... in a cloud GPU's situation with the Vulkan import (no gdrdrv node, CUDA 13.0, the
# emulator's Vulkan stand-in first on the path, the backend asked for, test memory allocated
# as NCCL's cuMem allocator does).
# SIM_VULKAN_VARS are the settings alone, for scripts that compose their own paths.
SIM_VULKAN_VARS = GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13000 GDRAPI_USE_VULKAN=1 GDRAPI_TEST_ALLOC=vmm
SIM_VULKAN_ENV = $(SIM_STANDIN_ENV) $(SIM_VULKAN_VARS)

# Test targets add themselves here; `make test` runs them in order.
TEST_TARGETS :=

# A suite that cannot run for lack of a tool says so and passes on a developer's machine; with
# CI set it fails instead, since .ci/run installs every tool a suite needs. Only a suite that
# needs input the user must supply (the gdrdrv source) may skip in CI. In a recipe:
#   $(call skip_or_fail,test-x,what is missing and where it comes from)
# A comma inside a $(call) argument.
, := ,
skip_or_fail = { if [ -n "$$CI" ]; then echo "$(1): FAILED: $(2) (CI is set; .ci/run installs it)"; exit 1; \
	else echo "$(1): skipped: $(2)"; fi; }

.PHONY: all lib sim tools test bench install uninstall deb clean version
all: lib tools

version:
	@echo $(VERSION)

include $(sort $(wildcard mk/*.mk))

test: $(TEST_TARGETS)
	@echo "make test: all suites passed ($(words $(TEST_TARGETS)) suites: $(TEST_TARGETS))"

clean:
	rm -rf $(BUILD_DIR)
	$(CARGO) clean
