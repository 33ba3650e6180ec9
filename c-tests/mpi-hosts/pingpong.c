/*
 * Ping-pong between ranks 0 and 1 while every other rank waits in
 * MPI_Barrier (which ranks 0 and 1 join when they are done). Used by
 * c-tests/mpi-hosts/run.sh for
 *   - latency and bandwidth between two hosts (1 rank per host), and
 *   - the oversubscription case: 2 hosts x 2 ranks on a 2-core machine, the
 *     ping-pong between the two ranks of host 1 (shared memory) while host
 *     2's ranks wait in the barrier over TCP.
 * and by make bench (c-tests/bench/mpi.sh: 2 ranks on one host, rustfab
 * next to Open MPI's ob1+vader and pml ucx, a list of sizes).
 * and by make bench-hosts (c-tests/bench/hosts.sh: 2 hosts, ping-pong and
 * streaming). Every message is checked (first and last byte); rank 0 prints
 *   pingpong SIZE B: LAT us (half round trip), BW MB/s, ITERS iterations
 * and, with -w, after each size's ping-pong
 *   stream SIZE B: BW MB/s, WINDOW in flight, MESSAGES messages
 * (rank 0 keeps WINDOW MPI_Isend in flight to rank 1's MPI_Irecv; one
 * 1-byte answer per window), and "pingpong: data FAIL" if a check failed
 * (exit status 1).
 *
 *   pingpong [iterations at 8 B] [iterations at 1 MiB]
 *   pingpong -s SIZE,SIZE,... [-n ITERS] [-N ITERS] [-w WINDOW]
 *     sizes in bytes (1 ... 4 MiB), in the order given; -n iterations for
 *     sizes below 64 KiB (default 10000), -N from 64 KiB up (default 500);
 *     -w: also streaming bandwidth, WINDOW messages in flight (default 0:
 *     none)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZE (4 << 20)
#define MAX_WINDOW 256
#define MAX_SIZES 32

static int rank, bad;

static void pp(size_t len, int iters, unsigned char *buf)
{
	int peer = 1 - rank;
	/* warm up (connections, registration caches) */
	for (int i = -10; i < iters; i++) {
		static double t0;
		if (i == 0)
			t0 = MPI_Wtime();
		unsigned char tag = (unsigned char)(i & 0xff);
		if (rank == 0) {
			buf[0] = buf[len - 1] = tag;
			MPI_Send(buf, (int)len, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
			MPI_Recv(buf, (int)len, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			if (buf[0] != (unsigned char)(tag + 1) || buf[len - 1] != (unsigned char)(tag + 1))
				bad = 1;
		} else {
			MPI_Recv(buf, (int)len, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			if (buf[0] != tag || buf[len - 1] != tag)
				bad = 1;
			buf[0] = buf[len - 1] = (unsigned char)(tag + 1);
			MPI_Send(buf, (int)len, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
		}
		if (i == iters - 1 && rank == 0) {
			double dt = MPI_Wtime() - t0;
			double lat = dt / iters / 2 * 1e6;
			printf("pingpong %zu B: %.3f us (half round trip), %.1f MB/s, %d iterations\n", len, lat,
			       (double)len / (lat * 1e-6) / 1e6, iters);
			fflush(stdout);
		}
	}
}

/* Streaming: WINDOW messages in flight from rank 0 to rank 1, then one
 * 1-byte answer, for at least `iters` messages. Rank 1 receives the whole
 * window into one buffer each (only the last message's bytes are checked). */
static void stream(size_t len, int iters, int window, unsigned char *buf)
{
	int peer = 1 - rank, rounds = iters / window > 0 ? iters / window : 1;
	MPI_Request req[MAX_WINDOW];
	unsigned char ack = 0;
	double t0 = 0;
	for (int r = -1; r < rounds; r++) { /* round -1: warm up */
		if (r == 0)
			t0 = MPI_Wtime();
		unsigned char tag = (unsigned char)(r & 0xff);
		if (rank == 0) {
			buf[0] = buf[len - 1] = tag;
			for (int w = 0; w < window; w++)
				MPI_Isend(buf, (int)len, MPI_BYTE, peer, 3, MPI_COMM_WORLD, &req[w]);
			MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
			MPI_Recv(&ack, 1, MPI_BYTE, peer, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			for (int w = 0; w < window; w++)
				MPI_Irecv(buf, (int)len, MPI_BYTE, peer, 3, MPI_COMM_WORLD, &req[w]);
			MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
			if (buf[0] != tag || buf[len - 1] != tag)
				bad = 1;
			MPI_Send(&ack, 1, MPI_BYTE, peer, 4, MPI_COMM_WORLD);
		}
	}
	if (rank == 0) {
		double dt = MPI_Wtime() - t0;
		double n = (double)rounds * window;
		printf("stream %zu B: %.3f MB/s, %d in flight, %.0f messages\n", len, n * (double)len / dt / 1e6,
		       window, n);
		fflush(stdout);
	}
}

static void usage(void)
{
	if (rank == 0)
		printf("usage: pingpong [iters at 8 B] [iters at 1 MiB]\n"
		       "       pingpong -s SIZE,SIZE,... [-n iters below 64 KiB] [-N iters from 64 KiB] [-w window]\n"
		       "       (sizes 1 ... %d bytes)\n",
		       MAX_SIZE);
}

int main(int argc, char **argv)
{
	int size;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	/* the two-number form: 8 B and 1 MiB (c-tests/mpi-hosts/run.sh) */
	size_t sizes[MAX_SIZES] = {8, 1 << 20};
	int nsizes = 2, small = 1000, large = 100, window = 0;
	if (argc > 1 && argv[1][0] == '-') {
		nsizes = 0;
		small = 10000;
		large = 500;
		for (int a = 1; a < argc; a++) {
			const char *v = a + 1 < argc ? argv[a + 1] : NULL;
			char *end;
			if (!v || argv[a][0] != '-' || argv[a][1] == 0 || argv[a][2] != 0) {
				usage();
				MPI_Finalize();
				return 2;
			}
			a++;
			if (argv[a - 1][1] == 's') {
				const char *p = v;
				while (*p) {
					unsigned long n = strtoul(p, &end, 10);
					if (end == p || n < 1 || n > MAX_SIZE || nsizes == MAX_SIZES ||
					    (*end != ',' && *end != 0)) {
						usage();
						MPI_Finalize();
						return 2;
					}
					sizes[nsizes++] = n;
					p = *end ? end + 1 : end;
				}
			} else if (argv[a - 1][1] == 'n' || argv[a - 1][1] == 'N') {
				long n = strtol(v, &end, 10);
				if (end == v || *end || n < 1 || n > 100000000) {
					usage();
					MPI_Finalize();
					return 2;
				}
				*(argv[a - 1][1] == 'n' ? &small : &large) = (int)n;
			} else if (argv[a - 1][1] == 'w') {
				long n = strtol(v, &end, 10);
				if (end == v || *end || n < 0 || n > MAX_WINDOW) {
					usage();
					MPI_Finalize();
					return 2;
				}
				window = (int)n;
			} else {
				usage();
				MPI_Finalize();
				return 2;
			}
		}
		if (nsizes == 0) {
			usage();
			MPI_Finalize();
			return 2;
		}
	} else {
		small = argc > 1 ? atoi(argv[1]) : 1000;
		large = argc > 2 ? atoi(argv[2]) : 100;
	}
	if (size < 2) {
		if (rank == 0)
			printf("pingpong: needs 2 ranks or more\n");
		MPI_Finalize();
		return 1;
	}
	/* everyone is up (and connected to rank 0) before the clock starts */
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank < 2) {
		unsigned char *buf = malloc(MAX_SIZE);
		memset(buf, 0, MAX_SIZE);
		for (int i = 0; i < nsizes; i++) {
			int iters = sizes[i] < 65536 ? small : large;
			if (iters > 0)
				pp(sizes[i], iters, buf);
			if (iters > 0 && window > 0)
				stream(sizes[i], iters, window, buf);
		}
		free(buf);
	}
	/* ranks >= 2 wait here (over TCP when they are on another host) */
	MPI_Barrier(MPI_COMM_WORLD);
	int any = 0;
	MPI_Reduce(&bad, &any, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
	if (rank == 0 && any)
		printf("pingpong: data FAIL\n");
	MPI_Finalize();
	return any;
}
