/*
 * MPI one-sided communication, every result checked: MPI_Put and MPI_Get
 * (8 B ... 1 MiB, with the bytes around the target range checked untouched)
 * under MPI_Win_fence, MPI_Win_lock (exclusive and shared),
 * MPI_Win_lock_all + MPI_Win_flush/flush_all, and post/start/complete/wait,
 * on windows from MPI_Win_allocate and from MPI_Win_create over malloc'd
 * memory; then MPI_Accumulate, MPI_Get_accumulate, MPI_Fetch_and_op and
 * MPI_Compare_and_swap (every rank at once on one word, so a lost update or
 * a torn compare-and-swap shows).
 *
 * Run by c-tests/mpi/onesided.sh with Open MPI's osc rdma over btl ofi on
 * the provider under test (btl ofi needs FI_RMA|FI_ATOMIC of it; every
 * section runs).
 * Every rank prints "FAIL ..." on a failed check; rank 0 prints the closing
 * "onesided (N ranks): N passed, N failed" line.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_check.h"

/* An MPI call that fails is a failed check (the communicator and the
 * windows return errors instead of aborting). */
#define MPI_OK(call) CHECK(#call, (call) == MPI_SUCCESS)

#define WIN_BYTES (2u << 20) /* 2 MiB: room for 1 MiB plus guards */
#define GUARD 0xA5

static unsigned char pattern(size_t i, int seed)
{
	return (unsigned char)(i * 131 + seed * 7 + (i >> 12) + 1);
}

static int next_rank(void) { return (rank + 1) % size; }
static int prev_rank(void) { return (rank + size - 1) % size; }

/* Bytes [off, off+len) of buf hold pattern(seed) (relative to off), and the
 * 64 bytes on each side of the range hold GUARD. */
static int range_ok(const unsigned char *buf, size_t buflen, size_t off, size_t len, int seed)
{
	for (size_t i = 0; i < len; i++)
		if (buf[off + i] != pattern(i, seed))
			return 0;
	for (size_t i = off >= 64 ? off - 64 : 0; i < off; i++)
		if (buf[i] != GUARD)
			return 0;
	for (size_t i = off + len; i < off + len + 64 && i < buflen; i++)
		if (buf[i] != GUARD)
			return 0;
	return 1;
}

static void fill(unsigned char *b, size_t len, int seed)
{
	for (size_t i = 0; i < len; i++)
		b[i] = pattern(i, seed);
}

static const size_t sizes[] = {8, 4096, 65536, 1u << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* Active target: put to the next rank, fence, check; get from the next rank
 * (what this rank just put there), fence, check. */
static void fence_put_get(MPI_Win win, unsigned char *base, const char *flavor)
{
	char name[96];
	unsigned char *src = malloc(1u << 20), *dst = malloc((1u << 20) + 128);
	for (size_t s = 0; s < NSIZES; s++) {
		size_t len = sizes[s], off = 128 + s * 8; /* unaligned offsets too */
		memset(base, GUARD, WIN_BYTES);
		fill(src, len, rank + 10 * (int)s);
		MPI_OK(MPI_Win_fence(0, win));
		MPI_OK(MPI_Put(src, (int)len, MPI_BYTE, next_rank(), (MPI_Aint)off, (int)len, MPI_BYTE, win));
		MPI_OK(MPI_Win_fence(0, win));
		snprintf(name, sizeof name, "%s fence put %zu B", flavor, len);
		CHECK(name, range_ok(base, WIN_BYTES, off, len, prev_rank() + 10 * (int)s));
		memset(dst, GUARD, len + 128);
		MPI_OK(MPI_Get(dst + 64, (int)len, MPI_BYTE, next_rank(), (MPI_Aint)off, (int)len, MPI_BYTE, win));
		MPI_OK(MPI_Win_fence(0, win));
		snprintf(name, sizeof name, "%s fence get %zu B", flavor, len);
		CHECK(name, range_ok(dst, len + 128, 64, len, rank + 10 * (int)s));
	}
	free(src);
	free(dst);
}

/* Passive target, exclusive lock to write, shared lock to read. */
static void lock_put_get(MPI_Win win, unsigned char *base)
{
	char name[96];
	unsigned char *src = malloc(1u << 20), *dst = malloc((1u << 20) + 128);
	for (size_t s = 0; s < NSIZES; s++) {
		size_t len = sizes[s], off = 256;
		/* window memory is changed locally only inside a lock of one's
		 * own window (MPI's separate memory model) */
		MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
		memset(base, GUARD, WIN_BYTES);
		MPI_OK(MPI_Win_unlock(rank, win));
		MPI_Barrier(MPI_COMM_WORLD);
		fill(src, len, 3 * rank + (int)s);
		MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, next_rank(), 0, win));
		MPI_OK(MPI_Put(src, (int)len, MPI_BYTE, next_rank(), (MPI_Aint)off, (int)len, MPI_BYTE, win));
		MPI_OK(MPI_Win_unlock(next_rank(), win));
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
		snprintf(name, sizeof name, "lock exclusive put %zu B", len);
		CHECK(name, range_ok(base, WIN_BYTES, off, len, 3 * prev_rank() + (int)s));
		MPI_OK(MPI_Win_unlock(rank, win));
		memset(dst, GUARD, len + 128);
		MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, prev_rank(), 0, win));
		MPI_OK(MPI_Get(dst + 64, (int)len, MPI_BYTE, prev_rank(), (MPI_Aint)off, (int)len, MPI_BYTE, win));
		MPI_OK(MPI_Win_unlock(prev_rank(), win));
		snprintf(name, sizeof name, "lock shared get %zu B", len);
		CHECK(name, range_ok(dst, len + 128, 64, len, 3 * ((prev_rank() + size - 1) % size) + (int)s));
		MPI_Barrier(MPI_COMM_WORLD);
	}
	free(src);
	free(dst);
}

/* lock_all: each rank puts 1000 8-byte words (many operations in flight),
 * flushes, reads them back from the same target, and checks. */
static void lock_all_flush(MPI_Win win, unsigned char *base)
{
	enum { N = 1000 };
	uint64_t *words = malloc(N * sizeof *words), *back = malloc(N * sizeof *back);
	MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
	memset(base, 0, WIN_BYTES);
	MPI_OK(MPI_Win_unlock(rank, win));
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_OK(MPI_Win_lock_all(0, win));
	for (int i = 0; i < N; i++) {
		words[i] = ((uint64_t)rank << 32) | (uint64_t)(i * 7 + 1);
		MPI_OK(MPI_Put(&words[i], 8, MPI_BYTE, next_rank(), (MPI_Aint)(i * 16), 8, MPI_BYTE, win));
	}
	MPI_OK(MPI_Win_flush(next_rank(), win));
	memset(back, 0, N * sizeof *back);
	for (int i = 0; i < N; i++)
		MPI_OK(MPI_Get(&back[i], 8, MPI_BYTE, next_rank(), (MPI_Aint)(i * 16), 8, MPI_BYTE, win));
	MPI_OK(MPI_Win_flush_all(win));
	int ok = 1;
	for (int i = 0; i < N; i++)
		ok &= back[i] == words[i];
	CHECK("lock_all: 1000 puts, flush, 1000 gets", ok);
	/* flush_local: the origin buffer is reusable, the data arrives */
	uint64_t one = 0x1122334455667788ull;
	MPI_OK(MPI_Put(&one, 8, MPI_BYTE, next_rank(), 8, 8, MPI_BYTE, win));
	MPI_OK(MPI_Win_flush_local(next_rank(), win));
	one = 0;
	MPI_OK(MPI_Win_unlock_all(win));
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
	const uint64_t *mine = (const uint64_t *)base;
	ok = mine[1] == 0x1122334455667788ull;
	for (int i = 0; i < N; i++)
		ok &= mine[2 * i] == (((uint64_t)prev_rank() << 32) | (uint64_t)(i * 7 + 1));
	MPI_OK(MPI_Win_unlock(rank, win));
	CHECK("lock_all: target sees every word", ok);
	MPI_Barrier(MPI_COMM_WORLD);
	free(words);
	free(back);
}

/* Generalized active target: post/start/complete/wait with the neighbours. */
static void pscw(MPI_Win win, unsigned char *base)
{
	MPI_Group world, to, from;
	int nx = next_rank(), pv = prev_rank();
	MPI_Comm_group(MPI_COMM_WORLD, &world);
	MPI_Group_incl(world, 1, &nx, &to);
	MPI_Group_incl(world, 1, &pv, &from);
	MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
	memset(base, GUARD, WIN_BYTES);
	MPI_OK(MPI_Win_unlock(rank, win));
	MPI_Barrier(MPI_COMM_WORLD);
	unsigned char src[300];
	fill(src, sizeof src, 50 + rank);
	MPI_OK(MPI_Win_post(from, 0, win));
	MPI_OK(MPI_Win_start(to, 0, win));
	MPI_OK(MPI_Put(src, sizeof src, MPI_BYTE, nx, 1000, sizeof src, MPI_BYTE, win));
	MPI_OK(MPI_Win_complete(win));
	MPI_OK(MPI_Win_wait(win));
	CHECK("post/start/complete/wait put", range_ok(base, WIN_BYTES, 1000, sizeof src, 50 + pv));
	MPI_Group_free(&to);
	MPI_Group_free(&from);
	MPI_Group_free(&world);
	MPI_Barrier(MPI_COMM_WORLD);
}

/* Open MPI before 4.1.5: MPI_Compare_and_swap on window memory osc rdma
 * reaches with loads and stores (this rank's own part; every part of an
 * MPI_Win_allocate window when all ranks share one host) still goes to the
 * btl's compare-and-swap, with a NULL registration handle, which
 * mca_btl_ofi_acswap dereferences (SIGSEGV) before calling the provider:
 * the same with every provider. Fixed in 4.1.5 (osc/rdma "perform CAS in
 * shared memory if possible", commit 0512c135a7). */
#define CAS_CRASH_REASON                                                                     \
	"Open MPI < 4.1.5 crashes in mca_btl_ofi_acswap for a target it reaches through shared " \
	"memory (NULL registration handle, any provider; fixed in 4.1.5 by 0512c135a7)"
static int single_host;

static int cas_crashes(const char *flavor, int target)
{
	if (getenv("ONESIDED_CAS_ANYWAY")) /* to watch it crash */
		return 0;
#if defined(OPEN_MPI) && (OMPI_MAJOR_VERSION * 10000 + OMPI_MINOR_VERSION * 100 + OMPI_RELEASE_VERSION) < 40105
	return target == rank || (strcmp(flavor, "allocate") == 0 && single_host);
#else
	(void)flavor;
	(void)target;
	return 0;
#endif
}

/* Accumulate, Get_accumulate, Fetch_and_op, Compare_and_swap: every rank on
 * rank 0's words at once. */
static void atomics(MPI_Win win, unsigned char *base, const char *flavor)
{
	int64_t *w = (int64_t *)base; /* w[0] counter, w[1] cas word, w[2..5] sums, w[8] swap */
	int32_t *w32 = (int32_t *)(base + 256);
	enum { ITER = 100 };
	MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
	memset(base, 0, 4096);
	w[1] = -1;
	MPI_OK(MPI_Win_unlock(rank, win));
	MPI_Barrier(MPI_COMM_WORLD);

	/* Accumulate MPI_SUM, 64-bit and 32-bit, fence epoch */
	int64_t add[4];
	int32_t add32[4];
	for (int i = 0; i < 4; i++) {
		add[i] = (int64_t)(rank + 1) << (8 * i);
		add32[i] = (rank + 1) * (i + 1);
	}
	MPI_OK(MPI_Win_fence(0, win));
	MPI_OK(MPI_Accumulate(add, 4, MPI_INT64_T, 0, 2 * 8, 4, MPI_INT64_T, MPI_SUM, win));
	MPI_OK(MPI_Accumulate(add32, 4, MPI_INT32_T, 0, 256, 4, MPI_INT32_T, MPI_SUM, win));
	MPI_OK(MPI_Win_fence(0, win));
	if (rank == 0) {
		int64_t tot = (int64_t)size * (size + 1) / 2;
		int ok = 1;
		for (int i = 0; i < 4; i++)
			ok &= w[2 + i] == tot << (8 * i) && w32[i] == (int32_t)(tot * (i + 1));
		CHECK("accumulate MPI_SUM int64/int32 from every rank", ok);
	}

	/* Fetch_and_op: every rank adds 1 ITER times; the fetched values of
	 * all ranks together are 0 .. ITER*size-1, each exactly once. */
	int64_t *got = malloc(ITER * sizeof *got), one = 1;
	MPI_OK(MPI_Win_lock_all(0, win));
	for (int i = 0; i < ITER; i++) {
		MPI_OK(MPI_Fetch_and_op(&one, &got[i], MPI_INT64_T, 0, 0, MPI_SUM, win));
		MPI_OK(MPI_Win_flush(0, win));
	}
	MPI_OK(MPI_Win_unlock_all(win));
	int64_t *all = rank == 0 ? malloc((size_t)ITER * size * sizeof *all) : NULL;
	MPI_Gather(got, ITER, MPI_INT64_T, all, ITER, MPI_INT64_T, 0, MPI_COMM_WORLD);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		int n = ITER * size, ok = 1;
		char *seen = calloc((size_t)n, 1);
		for (int i = 0; i < n; i++) {
			if (all[i] < 0 || all[i] >= n || seen[all[i]])
				ok = 0;
			else
				seen[all[i]] = 1;
		}
		MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
		CHECK("fetch_and_op: final counter", w[0] == n);
		MPI_OK(MPI_Win_unlock(0, win));
		CHECK("fetch_and_op: every fetched value once", ok);
		free(seen);
		free(all);
	}

	/* Compare_and_swap: the ranks race to replace -1 by their rank; exactly
	 * one wins. Then a CAS increment loop from each of them. */
	int cas = !cas_crashes(flavor, 0), casers = 0;
	MPI_Allreduce(&cas, &casers, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0 && casers < size)
		printf("SKIP %s: compare_and_swap from %d of %d ranks: %s\n", flavor, size - casers, size,
		       CAS_CRASH_REASON);
	int64_t mine = rank, cmp = -1, old = -2, final = -3;
	int won = 0, winners = 0;
	MPI_OK(MPI_Win_lock_all(0, win));
	if (cas) {
		MPI_OK(MPI_Compare_and_swap(&mine, &cmp, &old, MPI_INT64_T, 0, 8, win));
		MPI_OK(MPI_Win_flush(0, win));
		won = old == -1;
	}
	MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (cas) {
		CHECK("compare_and_swap: exactly one winner", winners == 1);
		CHECK("compare_and_swap: losers see a rank", won || (old >= 0 && old < size));
		MPI_OK(MPI_Fetch_and_op(NULL, &final, MPI_INT64_T, 0, 8, MPI_NO_OP, win));
		MPI_OK(MPI_Win_flush(0, win));
		CHECK("compare_and_swap: winner's value in place", final >= 0 && final < size &&
		      (!won || final == rank));
	}
	MPI_Barrier(MPI_COMM_WORLD);
	int64_t zero = 0;
	if (rank == 0) {
		MPI_OK(MPI_Put(&zero, 1, MPI_INT64_T, 0, 8, 1, MPI_INT64_T, win));
		MPI_OK(MPI_Win_flush(0, win));
	}
	MPI_Barrier(MPI_COMM_WORLD);
	for (int i = 0; cas && i < ITER / 2; i++) {
		int64_t cur = 0, want, prevv = -1;
		MPI_OK(MPI_Fetch_and_op(NULL, &cur, MPI_INT64_T, 0, 8, MPI_NO_OP, win));
		MPI_OK(MPI_Win_flush(0, win));
		for (;;) {
			want = cur + 1;
			MPI_OK(MPI_Compare_and_swap(&want, &cur, &prevv, MPI_INT64_T, 0, 8, win));
			MPI_OK(MPI_Win_flush(0, win));
			if (prevv == cur)
				break;
			cur = prevv;
		}
	}
	MPI_OK(MPI_Win_unlock_all(win));
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0 && casers > 0) {
		MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
		CHECK("compare_and_swap increment loop: no lost update", w[1] == (int64_t)(ITER / 2) * casers);
		MPI_OK(MPI_Win_unlock(0, win));
	}

	/* Get_accumulate MPI_REPLACE (swap) on the next rank, then MPI_SUM */
	int64_t give = 1000 + rank, prior = -1;
	MPI_OK(MPI_Win_fence(0, win));
	MPI_OK(MPI_Get_accumulate(&give, 1, MPI_INT64_T, &prior, 1, MPI_INT64_T, next_rank(), 8 * 8, 1,
				  MPI_INT64_T, MPI_REPLACE, win));
	MPI_OK(MPI_Win_fence(0, win));
	CHECK("get_accumulate MPI_REPLACE: old value", prior == 0);
	CHECK("get_accumulate MPI_REPLACE: new value", w[8] == 1000 + prev_rank());
	MPI_Barrier(MPI_COMM_WORLD); /* every rank read w[8] before it changes again */
	MPI_OK(MPI_Get_accumulate(&give, 1, MPI_INT64_T, &prior, 1, MPI_INT64_T, next_rank(), 8 * 8, 1,
				  MPI_INT64_T, MPI_SUM, win));
	MPI_OK(MPI_Win_fence(0, win));
	CHECK("get_accumulate MPI_SUM", prior == 1000 + rank && w[8] == 2000 + 2 * prev_rank());
	/* a double accumulate: not a btl atomic, done under osc rdma's lock */
	double dv[3] = {0.5 * (rank + 1), 1.0, -2.0 * rank};
	MPI_OK(MPI_Accumulate(dv, 3, MPI_DOUBLE, 0, 512, 3, MPI_DOUBLE, MPI_SUM, win));
	MPI_OK(MPI_Win_fence(0, win));
	if (rank == 0) {
		const double *d = (const double *)(base + 512);
		double t = 0.5 * size * (size + 1) / 2;
		CHECK("accumulate MPI_SUM double", d[0] == t && d[1] == (double)size &&
		      d[2] == -1.0 * size * (size - 1));
	}
	MPI_OK(MPI_Win_fence(0, win));
	free(got);
}

/* Every section on one window. */
static void on_window(MPI_Win win, unsigned char *base, const char *flavor)
{
	MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
	fence_put_get(win, base, flavor);
	MPI_Barrier(MPI_COMM_WORLD);
	lock_put_get(win, base);
	lock_all_flush(win, base);
	pscw(win, base);
	atomics(win, base, flavor);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if (size < 2) {
		if (rank == 0)
			printf("needs at least 2 ranks\n");
		MPI_Finalize();
		return 1;
	}
	int ok, host_size;
	MPI_Comm host;
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
	MPI_Comm_size(host, &host_size);
	MPI_Comm_free(&host);
	single_host = host_size == size;

	/* A window over the application's own memory: osc rdma reaches every
	 * other rank's part through the btl (fi_write/fi_read/fi_*atomic on
	 * the provider). */
	unsigned char *mem = malloc(WIN_BYTES);
	MPI_Win win;
	ok = MPI_Win_create(mem, WIN_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win) == MPI_SUCCESS;
	CHECK("MPI_Win_create", ok);
	if (ok) {
		on_window(win, mem, "create");
		MPI_OK(MPI_Win_free(&win));
	}
	free(mem);

	/* A window MPI allocates: on one host osc rdma puts it in shared
	 * memory and reaches it with loads and stores (and the btl only for
	 * what it cannot do so). */
	unsigned char *base = NULL;
	ok = MPI_Win_allocate(WIN_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win) == MPI_SUCCESS;
	CHECK("MPI_Win_allocate", ok);
	if (ok) {
		on_window(win, base, "allocate");
		MPI_OK(MPI_Win_free(&win));
	}

	int tot[2] = {passed, failed}, sum[2];
	MPI_Reduce(tot, sum, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("onesided (%d ranks): %d passed, %d failed\n", size, sum[0], sum[1]);
	MPI_Finalize();
	return failed ? 1 : 0;
}
