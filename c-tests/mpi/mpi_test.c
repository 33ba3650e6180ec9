/*
 * Open MPI over rustfab (pml cm + mtl ofi): point-to-point with tags,
 * MPI_ANY_SOURCE/MPI_ANY_TAG, Probe/Iprobe/Mprobe, Cancel, Ssend,
 * truncation, a 16 MiB message checked byte for byte, and collectives.
 * Every rank prints "ok <name>" per check and "FAIL ..." on failure; rank 0
 * prints the closing "N passed, N failed" line. Run by c-tests/mpi/run.sh.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_check.h"

static unsigned char pattern(size_t i, int seed)
{
	return (unsigned char)(i * 131 + seed * 7 + (i >> 12));
}

static void ring_with_tags(void)
{
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	int out[3] = {rank, rank * 10, rank * 100}, in[3] = {-1, -1, -1};
	MPI_Request rq[3];
	/* receive tags in reverse order of sending: matching is by tag */
	for (int t = 2; t >= 0; t--)
		MPI_Irecv(&in[t], 1, MPI_INT, prev, 100 + t, MPI_COMM_WORLD, &rq[t]);
	for (int t = 0; t < 3; t++)
		MPI_Send(&out[t], 1, MPI_INT, next, 100 + t, MPI_COMM_WORLD);
	MPI_Waitall(3, rq, MPI_STATUSES_IGNORE);
	CHECK("ring tags", in[0] == prev && in[1] == prev * 10 && in[2] == prev * 100);
}

static void any_source_any_tag(void)
{
	if (rank == 0) {
		int seen = 0;
		for (int i = 1; i < size; i++) {
			int v;
			MPI_Status st;
			MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
			CHECK("any source: tag/source", st.MPI_TAG == 7 + st.MPI_SOURCE && v == st.MPI_SOURCE);
			seen |= 1 << st.MPI_SOURCE;
		}
		CHECK("any source: all seen", seen == ((1 << size) - 2));
	} else {
		MPI_Send(&rank, 1, MPI_INT, 0, 7 + rank, MPI_COMM_WORLD);
	}
}

static void probes(void)
{
	if (rank == 0) {
		char buf[100];
		MPI_Status st;
		int flag = 0, count;
		MPI_Probe(1, 55, MPI_COMM_WORLD, &st);
		MPI_Get_count(&st, MPI_CHAR, &count);
		CHECK("probe count", count == 37 && st.MPI_SOURCE == 1);
		MPI_Recv(buf, sizeof buf, MPI_CHAR, 1, 55, MPI_COMM_WORLD, &st);
		CHECK("probe then recv", buf[36] == 36);
		/* Iprobe spins until the message is there */
		while (!flag)
			MPI_Iprobe(1, 56, MPI_COMM_WORLD, &flag, &st);
		MPI_Get_count(&st, MPI_CHAR, &count);
		CHECK("iprobe", count == 12);
		MPI_Recv(buf, sizeof buf, MPI_CHAR, 1, 56, MPI_COMM_WORLD, &st);
		/* Mprobe/Mrecv: the matched message is bound to the handle */
		MPI_Message msg;
		MPI_Mprobe(1, 57, MPI_COMM_WORLD, &msg, &st);
		MPI_Get_count(&st, MPI_CHAR, &count);
		CHECK("mprobe count", count == 20);
		MPI_Mrecv(buf, count, MPI_CHAR, &msg, &st);
		CHECK("mrecv data", buf[0] == 'm' && buf[19] == 'm');
	} else if (rank == 1) {
		char a[37], b[12], c[20];
		for (int i = 0; i < 37; i++)
			a[i] = (char)i;
		memset(b, 'i', sizeof b);
		memset(c, 'm', sizeof c);
		MPI_Send(a, 37, MPI_CHAR, 0, 55, MPI_COMM_WORLD);
		MPI_Send(b, 12, MPI_CHAR, 0, 56, MPI_COMM_WORLD);
		MPI_Send(c, 20, MPI_CHAR, 0, 57, MPI_COMM_WORLD);
	}
}

static void cancel_recv(void)
{
	int v = 0, cancelled = 0;
	MPI_Request rq;
	MPI_Status st;
	MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &rq);
	MPI_Cancel(&rq);
	MPI_Wait(&rq, &st);
	MPI_Test_cancelled(&st, &cancelled);
	CHECK("cancel", cancelled);
}

static void ssend(void)
{
	int next = (rank + 1) % size, prev = (rank + size - 1) % size, v = -1;
	MPI_Request rq;
	MPI_Irecv(&v, 1, MPI_INT, prev, 31, MPI_COMM_WORLD, &rq);
	MPI_Ssend(&rank, 1, MPI_INT, next, 31, MPI_COMM_WORLD);
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	CHECK("ssend ring", v == prev);
}

static void truncation(void)
{
	if (rank == 0) {
		int big[64], small[8];
		for (int i = 0; i < 64; i++)
			big[i] = i;
		MPI_Send(big, 64, MPI_INT, 1, 77, MPI_COMM_WORLD);
		MPI_Send(big, 64, MPI_INT, 1, 78, MPI_COMM_WORLD);
		(void)small;
	} else if (rank == 1) {
		int small[8], big[64];
		MPI_Status st;
		int rc = MPI_Recv(small, 8, MPI_INT, 0, 77, MPI_COMM_WORLD, &st);
		/* An error code is not its class (MPICH adds detail to the code):
		 * compare classes, as the standard says. */
		int cls = MPI_SUCCESS, st_cls = MPI_SUCCESS;
		MPI_Error_class(rc, &cls);
		if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS)
			MPI_Error_class(st.MPI_ERROR, &st_cls);
		CHECK("truncation error", cls == MPI_ERR_TRUNCATE || st_cls == MPI_ERR_TRUNCATE);
		/* the endpoint stays usable: the next message arrives intact */
		MPI_Recv(big, 64, MPI_INT, 0, 78, MPI_COMM_WORLD, &st);
		CHECK("after truncation", big[0] == 0 && big[63] == 63);
	}
}

static void big_message(void)
{
	size_t n = 16u << 20;
	unsigned char *buf = malloc(n);
	if (rank == 0) {
		for (size_t i = 0; i < n; i++)
			buf[i] = pattern(i, 5);
		MPI_Send(buf, (int)n, MPI_BYTE, 1, 88, MPI_COMM_WORLD);
		MPI_Recv(buf, (int)n, MPI_BYTE, 1, 89, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		size_t bad = 0;
		for (size_t i = 0; i < n; i++)
			bad += buf[i] != pattern(i, 6);
		CHECK("16 MiB back", bad == 0);
	} else if (rank == 1) {
		memset(buf, 0, n);
		MPI_Recv(buf, (int)n, MPI_BYTE, 0, 88, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		size_t bad = 0;
		for (size_t i = 0; i < n; i++)
			bad += buf[i] != pattern(i, 5);
		CHECK("16 MiB byte for byte", bad == 0);
		for (size_t i = 0; i < n; i++)
			buf[i] = pattern(i, 6);
		MPI_Send(buf, (int)n, MPI_BYTE, 0, 89, MPI_COMM_WORLD);
	}
	free(buf);
}

static void collectives(void)
{
	int sum = 0, x = rank + 1;
	MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	CHECK("allreduce", sum == size * (size + 1) / 2);
	int root_val = rank == 0 ? 4242 : 0;
	MPI_Bcast(&root_val, 1, MPI_INT, 0, MPI_COMM_WORLD);
	CHECK("bcast", root_val == 4242);
	int *all = calloc((size_t)size, sizeof(int));
	MPI_Allgather(&rank, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
	int ok = 1;
	for (int i = 0; i < size; i++)
		ok &= all[i] == i;
	CHECK("allgather", ok);
	int *s = malloc((size_t)size * sizeof(int)), *r = malloc((size_t)size * sizeof(int));
	for (int i = 0; i < size; i++)
		s[i] = rank * 1000 + i;
	MPI_Alltoall(s, 1, MPI_INT, r, 1, MPI_INT, MPI_COMM_WORLD);
	ok = 1;
	for (int i = 0; i < size; i++)
		ok &= r[i] == i * 1000 + rank;
	CHECK("alltoall", ok);
	/* a larger allreduce goes through bigger messages */
	size_t n = 1 << 18;
	double *v = malloc(n * sizeof(double)), *w = malloc(n * sizeof(double));
	for (size_t i = 0; i < n; i++)
		v[i] = (double)(rank + 1) * (double)i;
	MPI_Allreduce(v, w, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	ok = 1;
	for (size_t i = 0; i < n; i += 997)
		ok &= w[i] == (double)(size * (size + 1) / 2) * (double)i;
	CHECK("allreduce 2 MiB", ok);
	MPI_Barrier(MPI_COMM_WORLD);
	free(all);
	free(s);
	free(r);
	free(v);
	free(w);
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
	/* A barrier after each phase: a rank that ran ahead would otherwise
	 * send the next phase's messages, which MPI_ANY_TAG may match. */
	ring_with_tags();
	MPI_Barrier(MPI_COMM_WORLD);
	any_source_any_tag();
	MPI_Barrier(MPI_COMM_WORLD);
	probes();
	MPI_Barrier(MPI_COMM_WORLD);
	cancel_recv();
	ssend();
	MPI_Barrier(MPI_COMM_WORLD);
	truncation();
	MPI_Barrier(MPI_COMM_WORLD);
	big_message();
	MPI_Barrier(MPI_COMM_WORLD);
	collectives();
	int tot[2] = {passed, failed}, all[2];
	MPI_Reduce(tot, all, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi (%d ranks): %d passed, %d failed\n", size, all[0], all[1]);
	MPI_Finalize();
	return failed ? 1 : 0;
}
