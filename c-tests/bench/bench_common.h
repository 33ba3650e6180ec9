/*
 * What the benchmark programs share (rf_bench.c, rf_insns.c and
 * c-tests/scale/rf_scale.c): DIE prints "<program>: <message>" and exits
 * with status 2; CK(call) dies with the file, line, call and libfabric
 * error when a call returns non-zero. Define BENCH_PROG (the program's
 * name, a string literal) before including this file.
 */
#ifndef RUSTFAB_BENCH_COMMON_H
#define RUSTFAB_BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <rdma/fi_errno.h>

#ifndef BENCH_PROG
#error "define BENCH_PROG before including bench_common.h"
#endif

#define DIE(...)                                            \
	do {                                                \
		fprintf(stderr, BENCH_PROG ": " __VA_ARGS__); \
		fprintf(stderr, "\n");                      \
		exit(2);                                    \
	} while (0)
#define CK(call)                                                                                  \
	do {                                                                                      \
		long _r = (long)(call);                                                           \
		if (_r)                                                                           \
			DIE("%s:%d %s = %ld (%s)", __FILE__, __LINE__, #call, _r, fi_strerror((int)-_r)); \
	} while (0)

#endif
