/*
 * The check and report state shared by the MPI test programs
 * (mpi_test.c, onesided.c): a failed check prints "FAIL rank R: name
 * (file:line)" at once and counts; each program prints its own closing
 * "N passed, N failed" line on rank 0.
 */
#ifndef RUSTFAB_MPI_CHECK_H
#define RUSTFAB_MPI_CHECK_H

#include <stdio.h>

static int rank, size, passed, failed;

#define CHECK(name, cond)                                                       \
	do {                                                                    \
		if (cond) {                                                     \
			passed++;                                               \
		} else {                                                        \
			failed++;                                               \
			printf("FAIL rank %d: %s (%s:%d)\n", rank, name, __FILE__, __LINE__); \
			fflush(stdout);                                         \
		}                                                               \
	} while (0)

#endif
