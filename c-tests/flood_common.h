/* The two sides of a flood test that stay in the test process: A, the
 * endpoint under attack (its flood receives posted again as they complete,
 * pings answered with pongs), and B, an honest peer whose round trips
 * B -> A -> B are timed (c-tests/test_budget.c over tcp,
 * c-tests/test_shm_flood.c over shm: the attacker differs, these do not).
 * Include after rdm_common.h. */
#ifndef RF_FLOOD_COMMON_H
#define RF_FLOOD_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The heap growth allowed: the documented bound (64 MiB); twice that under
 * valgrind (make memcheck, RF_TIMEOUT_SCALE > 1), whose shadow memory
 * counts in the process's RSS. */
#define RSS_BOUND_KB ((64 << 10) * (rf_time_scale() > 1 ? 2 : 1))
#define TAG_PING 1
#define TAG_PONG 2
#define TAG_FLOOD 0xF100DULL
#define FLOOD_RECVS 64

static struct end A, B;
static const struct end_opts DEF = {0};

enum { CTX_FLOOD = 1, CTX_PING_RX, CTX_A_TX, CTX_B_RX, CTX_B_TX };
static char flood_rx[FLOOD_RECVS][8];
static char ping_rx[16], pong_rx[16], ping_tx[16] = "ping", pong_tx[16] = "pong";

/* How long each flood lasts: RF_FLOOD_SECS, 6 s by default (make test); the
 * acceptance figures take 60. */
static double flood_secs(void)
{
	const char *s = getenv("RF_FLOOD_SECS");
	double v = s && *s ? atof(s) : 6;
	return v > 0 ? v : 6;
}

/* A field of this process's /proc status ("VmRSS:", "RssAnon:", ...), kB. */
static long status_kb(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;
	size_t n = strlen(field);
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, field, n) && sscanf(line + n, " %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* Progresses A: flood receives are posted again as they complete, the
 * ping is answered with a pong. */
static int a_pings;
static void drive_a(void)
{
	struct fi_cq_tagged_entry c[64];
	ssize_t n = fi_cq_read(A.cq, c, 64);
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry e = {0};
		fi_cq_readerr(A.cq, &e, 0);
		if ((uintptr_t)e.op_context == CTX_FLOOD)
			fi_trecv(A.ep, flood_rx[0], sizeof flood_rx[0], NULL, FI_ADDR_UNSPEC, TAG_FLOOD, 0,
				 (void *)CTX_FLOOD);
		return;
	}
	for (ssize_t i = 0; i < n; i++) {
		switch ((uintptr_t)c[i].op_context) {
		case CTX_FLOOD:
			fi_trecv(A.ep, flood_rx[i % FLOOD_RECVS], sizeof flood_rx[0], NULL, FI_ADDR_UNSPEC, TAG_FLOOD,
				 0, (void *)CTX_FLOOD);
			break;
		case CTX_PING_RX:
			a_pings++;
			break;
		default:
			break;
		}
	}
}

static int b_drive(void)
{
	struct fi_cq_tagged_entry c[8];
	int got = 0;
	ssize_t n = fi_cq_read(B.cq, c, 8);
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry e = {0};
		fi_cq_readerr(B.cq, &e, 0);
		printf("    B: error completion %d (%s)\n", e.err, fi_strerror(e.err));
		return -1;
	}
	for (ssize_t i = 0; i < n; i++)
		if ((uintptr_t)c[i].op_context == CTX_B_RX)
			got = 1;
	return got;
}

/* One round trip B -> A -> B; returns its time in seconds, or -1. */
static double round_trip(void)
{
	double t0 = now_sec(), deadline = t0 + 5 * rf_time_scale();
	int pings = a_pings, answered = 0;
	if (fi_trecv(A.ep, ping_rx, sizeof ping_rx, NULL, FI_ADDR_UNSPEC, TAG_PING, 0, (void *)CTX_PING_RX) ||
	    fi_trecv(B.ep, pong_rx, sizeof pong_rx, NULL, FI_ADDR_UNSPEC, TAG_PONG, 0, (void *)CTX_B_RX))
		return -1;
	ssize_t r;
	while ((r = fi_tsend(B.ep, ping_tx, sizeof ping_tx, NULL, B.peer, TAG_PING, (void *)CTX_B_TX)) == -FI_EAGAIN)
		drive_a();
	if (r)
		return -1;
	while (now_sec() < deadline) {
		drive_a();
		if (!answered && a_pings > pings) {
			r = fi_tsend(A.ep, pong_tx, sizeof pong_tx, NULL, A.peer, TAG_PONG, (void *)CTX_A_TX);
			if (r == 0)
				answered = 1;
			else if (r != -FI_EAGAIN)
				return -1;
		}
		int g = b_drive();
		if (g < 0)
			return -1;
		if (g)
			return now_sec() - t0;
	}
	return -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n ? v[n / 2] : 0;
}

#endif
