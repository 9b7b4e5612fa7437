/*
 * gdrconfig.h - target architecture of libgdrapi (gdrapi-rs).
 *
 * Defines exactly one of GDRAPI_X86, GDRAPI_ARM64 or GDRAPI_POWER for the
 * architecture being compiled for, and stops the build on anything else.
 * Compatible with the gdrcopy 2.6 file of the same name; gdrapi.h does not
 * include it.
 */

#pragma once

#if !defined(__GNUC__)
#  error "compiler not supported"
#elif defined(__powerpc__)
#  define GDRAPI_POWER
#elif defined(__aarch64__)
#  define GDRAPI_ARM64
#elif defined(__i386__) || defined(__x86_64__) || defined(__X86__)
#  define GDRAPI_X86
#else
#  error "architecture is not supported"
#endif
