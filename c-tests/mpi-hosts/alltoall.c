/*
 * MPI_Alltoall time, for the scale tables of docs/performance-history.md: every
 * rank sends SIZE bytes to every rank, ITERS times after 5 warm-up rounds;
 * the result (checked: each block carries its source and destination) is
 * the slowest rank's mean time per MPI_Alltoall. Rank 0 prints, per size,
 *   alltoall RANKS ranks SIZE B: USEC us
 *
 *   alltoall iterations size...   (bytes per pair, at least 8)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int one(int rank, int size, int len, int iters)
{
	int bad = 0;
	char *out = malloc((size_t)len * size), *in = malloc((size_t)len * size);
	for (int d = 0; d < size; d++) {
		memset(out + (size_t)d * len, rank & 0xff, (size_t)len);
		int tag[2] = {rank, d};
		memcpy(out + (size_t)d * len, tag, sizeof tag);
	}
	double t0 = 0;
	for (int i = -5; i < iters; i++) {
		if (i == 0) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
		}
		MPI_Alltoall(out, len, MPI_BYTE, in, len, MPI_BYTE, MPI_COMM_WORLD);
	}
	double dt = (MPI_Wtime() - t0) / iters * 1e6, worst = 0;
	for (int s = 0; s < size; s++) {
		int tag[2];
		memcpy(tag, in + (size_t)s * len, sizeof tag);
		if (tag[0] != s || tag[1] != rank ||
		    (len > 8 && (unsigned char)in[(size_t)s * len + len - 1] != (unsigned char)(s & 0xff)))
			bad = 1;
	}
	MPI_Reduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	int anybad = 0;
	MPI_Reduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("alltoall %d ranks %d B: %.1f us%s\n", size, len, worst, anybad ? " data FAIL" : "");
		fflush(stdout);
	}
	free(out);
	free(in);
	return anybad;
}

int main(int argc, char **argv)
{
	int rank, size, bad = 0;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int iters = argc > 1 ? atoi(argv[1]) : 100;
	for (int a = 2; a < argc; a++) {
		int len = atoi(argv[a]);
		bad |= one(rank, size, len < 8 ? 8 : len, iters);
	}
	MPI_Finalize();
	return bad;
}
