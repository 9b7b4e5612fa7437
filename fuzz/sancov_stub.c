/*
 * sancov_stub.c - no-op definitions of the SanitizerCoverage callbacks.
 *
 * The library built for fuzzing (make fuzz) is compiled with SanitizerCoverage, so it refers to
 * these functions, and it links with -z defs, so they must resolve when it is linked. This stub
 * (libsancov_stub.so, a DT_NEEDED of that build only) satisfies the link. At run time the fuzzer
 * executable exports libFuzzer's own definitions (-rdynamic); the executable comes first in the
 * dynamic linker's search order, so libFuzzer receives the library's coverage and these bodies
 * never run.
 */
#include <stddef.h>
#include <stdint.h>

#define STUB __attribute__((visibility("default")))

STUB void __sanitizer_cov_trace_cmp1(uint8_t a, uint8_t b) { (void)a; (void)b; }
STUB void __sanitizer_cov_trace_cmp2(uint16_t a, uint16_t b) { (void)a; (void)b; }
STUB void __sanitizer_cov_trace_cmp4(uint32_t a, uint32_t b) { (void)a; (void)b; }
STUB void __sanitizer_cov_trace_cmp8(uint64_t a, uint64_t b) { (void)a; (void)b; }
STUB void __sanitizer_cov_trace_const_cmp1(uint8_t a, uint8_t b) { (void)a; (void)b; }
STUB void __sanitizer_cov_trace_const_cmp2(uint16_t a, uint16_t b) { (void)a; (void)b; }
STUB void __sanitizer_cov_trace_const_cmp4(uint32_t a, uint32_t b) { (void)a; (void)b; }
STUB void __sanitizer_cov_trace_const_cmp8(uint64_t a, uint64_t b) { (void)a; (void)b; }
STUB void __sanitizer_cov_trace_switch(uint64_t v, uint64_t *cases) { (void)v; (void)cases; }
STUB void __sanitizer_cov_trace_div4(uint32_t v) { (void)v; }
STUB void __sanitizer_cov_trace_div8(uint64_t v) { (void)v; }
STUB void __sanitizer_cov_trace_gep(uintptr_t v) { (void)v; }
STUB void __sanitizer_cov_trace_pc_indir(uintptr_t callee) { (void)callee; }
STUB void __sanitizer_cov_8bit_counters_init(uint8_t *start, uint8_t *end) { (void)start; (void)end; }
STUB void __sanitizer_cov_pcs_init(const uintptr_t *start, const uintptr_t *end) { (void)start; (void)end; }
