/*
 * MPI_Alltoall time and a job's cost per rank, for `make scale-mpi` and the
 * 64-rank check of c-tests/mpi-hosts/run.sh. First contact: right after
 * MPI_Init every rank sends 8 bytes to every rank (itself included) at once
 * (MPI_Isend/MPI_Irecv to all, MPI_Waitall; no rank has sent anything
 * before, and unlike MPI_Alltoall, whose small-message algorithms reach
 * only log2(ranks) partners, this touches every pair). Then, per size,
 * every rank sends SIZE bytes to every rank with MPI_Alltoall, WARMUP
 * rounds, then ITERS timed ones. Every block is checked (it carries its
 * source and destination, and its last byte the source's rank); the
 * result is the slowest rank's mean time per MPI_Alltoall. Rank 0 prints
 *   alltoall-job RANKS ranks: init MS ms (max; median MS), first contact MS ms
 * then per size
 *   alltoall RANKS ranks SIZE B: USEC us
 * and, after the last size,
 *   alltoall-rank RANKS ranks: rss MIB MiB (max; mean MIB), hwm MIB MiB, fds N (max; mean N)
 * MPI_Init time is each rank's own time in MPI_Init (CLOCK_MONOTONIC);
 * RSS, its high-water mark and the open descriptors are each rank's
 * /proc/self/status (VmRSS, VmHWM) and /proc/self/fd after every pair
 * has met. Times are printed, never judged: the exit status says only
 * whether every block arrived intact.
 *
 *   alltoall [-w WARMUP] iterations size...   (bytes per pair, at least 8)
 */
#include <mpi.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* VmRSS or VmHWM of this process, in KiB (-1 if absent). */
static double status_kib(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	double v = -1;
	size_t n = strlen(key);
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, key, n) == 0 && line[n] == ':') {
			v = atof(line + n + 1);
			break;
		}
	fclose(f);
	return v;
}

/* Open descriptors of this process (the one opendir holds left out). */
static double open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 3; /* ".", "..", and the directory's own descriptor */
}

/* Max and mean of v over the ranks, at rank 0. */
static void spread(double v, double *max, double *mean, int size)
{
	double sum = 0;
	MPI_Reduce(&v, max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
	*mean = sum / size;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Every pair's first contact at once; rank 0 prints MPI_Init's and its
 * times. Returns whether any message arrived wrong (at rank 0: anywhere). */
static int contact(int rank, int size, double init_ms)
{
	int bad = 0, anybad = 0;
	long long *out = malloc(sizeof(long long) * size), *in = malloc(sizeof(long long) * size);
	MPI_Request *rq = malloc(sizeof(MPI_Request) * 2 * size);
	if (!out || !in || !rq) {
		fprintf(stderr, "alltoall: out of memory (%d ranks)\n", size);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	double t0 = now_ms();
	for (int p = 0; p < size; p++) {
		in[p] = -1;
		out[p] = (long long)rank << 32 | p;
		MPI_Irecv(&in[p], 1, MPI_LONG_LONG, p, 7, MPI_COMM_WORLD, &rq[p]);
	}
	for (int i = 1; i <= size; i++) {
		int p = (rank + i) % size; /* everyone starts with a different peer */
		MPI_Isend(&out[p], 1, MPI_LONG_LONG, p, 7, MPI_COMM_WORLD, &rq[size + p]);
	}
	MPI_Waitall(2 * size, rq, MPI_STATUSES_IGNORE);
	double ms = now_ms() - t0, worst = 0, mean, init_max;
	for (int p = 0; p < size; p++)
		if (in[p] != ((long long)p << 32 | rank))
			bad = 1;
	MPI_Reduce(&ms, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
	double *inits = rank == 0 ? malloc(sizeof(double) * size) : NULL;
	spread(init_ms, &init_max, &mean, size);
	MPI_Gather(&init_ms, 1, MPI_DOUBLE, inits, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		qsort(inits, size, sizeof(double), cmp_double);
		printf("alltoall-job %d ranks: init %.0f ms (max; median %.0f), first contact %.1f ms%s\n", size,
		       init_max, inits[size / 2], worst, anybad ? " data FAIL" : "");
		fflush(stdout);
		free(inits);
	}
	free(out);
	free(in);
	free(rq);
	return anybad;
}

/* RSS, its high-water mark and the open descriptors per rank. */
static void footprint(int rank, int size)
{
	double rss_max, rss_mean, hwm_max, hwm_mean, fd_max, fd_mean;
	spread(status_kib("VmRSS") / 1024, &rss_max, &rss_mean, size);
	spread(status_kib("VmHWM") / 1024, &hwm_max, &hwm_mean, size);
	spread(open_fds(), &fd_max, &fd_mean, size);
	if (rank == 0) {
		printf("alltoall-rank %d ranks: rss %.1f MiB (max; mean %.1f), hwm %.1f MiB (max; mean %.1f),"
		       " fds %.0f (max; mean %.1f)\n",
		       size, rss_max, rss_mean, hwm_max, hwm_mean, fd_max, fd_mean);
		fflush(stdout);
	}
}

static int one(int rank, int size, int len, int iters, int warmup)
{
	int bad = 0;
	char *out = malloc((size_t)len * size), *in = malloc((size_t)len * size);
	if (!out || !in) {
		fprintf(stderr, "alltoall: out of memory (%d x %d B)\n", size, len);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (int d = 0; d < size; d++) {
		memset(out + (size_t)d * len, rank & 0xff, (size_t)len);
		int tag[2] = {rank, d};
		memcpy(out + (size_t)d * len, tag, sizeof tag);
	}
	double t0 = 0;
	for (int i = -warmup; i < iters; i++) {
		if (i == 0) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
		}
		memset(in, 0, (size_t)len * size);
		MPI_Alltoall(out, len, MPI_BYTE, in, len, MPI_BYTE, MPI_COMM_WORLD);
		for (int s = 0; s < size; s++) {
			int tag[2];
			memcpy(tag, in + (size_t)s * len, sizeof tag);
			if (tag[0] != s || tag[1] != rank ||
			    (len > 8 && (unsigned char)in[(size_t)s * len + len - 1] != (unsigned char)(s & 0xff)))
				bad = 1;
		}
	}
	double dt = iters > 0 ? (MPI_Wtime() - t0) / iters * 1e6 : 0, worst = 0;
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
	int rank, size, bad = 0, warmup = 5, a = 1;
	double t0 = now_ms();
	MPI_Init(&argc, &argv);
	double init_ms = now_ms() - t0;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (a + 1 < argc && strcmp(argv[a], "-w") == 0) {
		warmup = atoi(argv[a + 1]);
		a += 2;
	}
	int iters = a < argc ? atoi(argv[a++]) : 100;
	bad |= contact(rank, size, init_ms);
	for (; a < argc; a++) {
		int len = atoi(argv[a]);
		bad |= one(rank, size, len < 8 ? 8 : len, iters, warmup);
	}
	footprint(rank, size);
	MPI_Finalize();
	return bad;
}
