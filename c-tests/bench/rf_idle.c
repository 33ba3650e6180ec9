/*
 * rf_idle: what one empty fi_cq_read costs an endpoint as its number of
 * connected peers grows, so that an instruction count (valgrind
 * --tool=callgrind) shows whether an idle peer costs anything per
 * progress pass.
 *
 *   rf_idle -p <prov> -n <peers> [-e empty reads]
 *
 * One process, one thread. Endpoint A (its own domain, CQs and AV) and
 * <peers> peer endpoints (another domain, one AV and one CQ, as one process
 * with many endpoints would have). A exchanges one 8-byte message with every
 * peer, both ways (so A has every peer as a sender and as a destination:
 * shm rings in both segments, TCP connections), posts one receive, then
 * reads its empty receive CQ -e times (each read must return -FI_EAGAIN;
 * nothing is sent during them). c-tests/bench/idle.sh runs it under
 * callgrind with E and 3E reads, counting only inside idle_reads(), and
 * reports (Ir(3E) - Ir(E)) / 2E: the instructions of one empty read.
 *
 * Exit status 0 when every message arrived with the right contents and
 * every extra read found nothing, else 2.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#define BENCH_PROG "rf_idle"
#include "bench_common.h"

struct peer {
	struct fid_ep *ep;
	fi_addr_t a_addr; /* A in the peers' AV */
	fi_addr_t addr;   /* this peer in A's AV */
	uint64_t rx, tx;
	struct fi_context rx_ctx, tx_ctx;
};

static struct fid_cq *open_cq(struct fid_domain *d, size_t size)
{
	struct fid_cq *cq;
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_CONTEXT, .size = size};
	CK(fi_cq_open(d, &ca, &cq, NULL));
	return cq;
}

static struct fid_ep *open_ep(struct fid_domain *d, struct fi_info *info, struct fid_av *av,
			      struct fid_cq *tx, struct fid_cq *rx)
{
	struct fid_ep *ep;
	CK(fi_endpoint(d, info, &ep, NULL));
	CK(fi_ep_bind(ep, &av->fid, 0));
	CK(fi_ep_bind(ep, &tx->fid, FI_TRANSMIT));
	CK(fi_ep_bind(ep, &rx->fid, FI_RECV));
	CK(fi_enable(ep));
	return ep;
}

/* Reads one completion from cq, progressing the other side's CQ meanwhile
 * (one thread drives both: a TCP connection needs both ends to progress). */
static void *one(struct fid_cq *cq, struct fid_cq *other)
{
	struct fi_cq_entry e;
	for (;;) {
		ssize_t r = fi_cq_read(cq, &e, 1);
		if (r == 1)
			return e.op_context;
		if (r != -FI_EAGAIN) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(cq, &err, 0);
			DIE("completion error %d (%s)", err.err, fi_strerror(err.err));
		}
		(void)fi_cq_read(other, NULL, 0);
	}
}

#define RETRY(call, progress)                            \
	do {                                             \
		ssize_t _r;                              \
		while ((_r = (call)) == -FI_EAGAIN)      \
			(void)(progress);                \
		CK(_r);                                  \
	} while (0)

/* The measured loop: idle.sh counts only what runs inside this function
 * (callgrind --toggle-collect), so set-up and tear-down, whose cost varies
 * from run to run with timing (TCP connections, /proc reads), stay out. */
__attribute__((noinline)) void idle_reads(struct fid_cq *cq, unsigned long n)
{
	for (unsigned long k = 0; k < n; k++) {
		struct fi_cq_entry e;
		ssize_t r = fi_cq_read(cq, &e, 1);
		if (r != -FI_EAGAIN)
			DIE("empty read %lu returned %zd", k, r);
	}
}

int main(int argc, char **argv)
{
	const char *prov = NULL;
	unsigned long empty = 1000;
	int n = 1, c;
	while ((c = getopt(argc, argv, "p:n:e:")) != -1) {
		switch (c) {
		case 'p': prov = optarg; break;
		case 'n': n = atoi(optarg); break;
		case 'e': empty = strtoul(optarg, NULL, 0); break;
		default: DIE("usage: rf_idle -p <prov> -n <peers> [-e empty reads]");
		}
	}
	if (!prov || n < 1 || n > 4000)
		DIE("usage: rf_idle -p <prov> -n <peers 1..4000> [-e empty reads]");
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}

	struct fid_fabric *fab;
	struct fid_domain *da, *dp;
	struct fi_info *info = bench_two_domains(prov, FI_MSG, FI_THREAD_UNSPEC, &fab, &da, &dp);
	struct fi_av_attr aa = {.type = FI_AV_TABLE};
	struct fid_av *ava, *avp;
	CK(fi_av_open(da, &aa, &ava, NULL));
	CK(fi_av_open(dp, &aa, &avp, NULL));
	struct fid_cq *atx = open_cq(da, 64), *arx = open_cq(da, 64);
	struct fid_cq *pcq = open_cq(dp, (size_t)n * 2 + 64);
	struct fid_ep *a = open_ep(da, info, ava, atx, arx);
	char name[256];
	size_t len = sizeof name;
	CK(fi_getname(&a->fid, name, &len));

	struct peer *p = calloc((size_t)n, sizeof *p);
	if (!p)
		DIE("out of memory");
	for (int i = 0; i < n; i++) {
		p[i].ep = open_ep(dp, info, avp, pcq, pcq);
		char pn[256];
		size_t pl = sizeof pn;
		CK(fi_getname(&p[i].ep->fid, pn, &pl));
		if (fi_av_insert(ava, pn, 1, &p[i].addr, 0, NULL) != 1 ||
		    fi_av_insert(avp, name, 1, &p[i].a_addr, 0, NULL) != 1)
			DIE("fi_av_insert failed");
	}

	/* One message each way with every peer. */
	uint64_t arx_buf, atx_buf;
	struct fi_context arx_ctx, atx_ctx;
	for (int i = 0; i < n; i++) {
		struct peer *q = &p[i];
		RETRY(fi_recv(q->ep, &q->rx, sizeof q->rx, NULL, FI_ADDR_UNSPEC, &q->rx_ctx), fi_cq_read(pcq, NULL, 0));
		RETRY(fi_recv(a, &arx_buf, sizeof arx_buf, NULL, FI_ADDR_UNSPEC, &arx_ctx), fi_cq_read(arx, NULL, 0));
		atx_buf = 0xa000u + (uint64_t)i;
		RETRY(fi_send(a, &atx_buf, sizeof atx_buf, NULL, q->addr, &atx_ctx), fi_cq_read(pcq, NULL, 0));
		/* the peer's receive, then its reply */
		int got_rx = 0, got_tx = 0;
		while (!got_rx) {
			void *ctx = one(pcq, atx);
			if (ctx == &q->rx_ctx)
				got_rx = 1;
			else if (ctx != &q->tx_ctx)
				DIE("peer %d: unexpected completion", i);
		}
		if (q->rx != 0xa000u + (uint64_t)i)
			DIE("peer %d received %" PRIx64, i, q->rx);
		q->tx = q->rx ^ 0xff;
		RETRY(fi_send(q->ep, &q->tx, sizeof q->tx, NULL, q->a_addr, &q->tx_ctx), fi_cq_read(arx, NULL, 0));
		if (one(arx, pcq) != &arx_ctx || arx_buf != ((0xa000u + (uint64_t)i) ^ 0xff))
			DIE("peer %d: wrong reply", i);
		if (one(atx, pcq) != &atx_ctx)
			DIE("peer %d: wrong send completion", i);
		while (!got_tx) {
			void *ctx = one(pcq, arx);
			if (ctx == &q->tx_ctx)
				got_tx = 1;
			else
				DIE("peer %d: unexpected completion", i);
		}
	}
	/* A waits for a message nobody sends. */
	RETRY(fi_recv(a, &arx_buf, sizeof arx_buf, NULL, FI_ADDR_UNSPEC, &arx_ctx), fi_cq_read(arx, NULL, 0));
	idle_reads(arx, empty);
	printf("rf_idle %s %d peers, %lu empty reads\n", prov, n, empty);
	fi_cancel(&a->fid, &arx_ctx);
	fi_close(&a->fid);
	for (int i = 0; i < n; i++)
		fi_close(&p[i].ep->fid);
	fi_close(&atx->fid);
	fi_close(&arx->fid);
	fi_close(&pcq->fid);
	fi_close(&ava->fid);
	fi_close(&avp->fid);
	fi_close(&da->fid);
	fi_close(&dp->fid);
	fi_close(&fab->fid);
	fi_freeinfo(info);
	return 0;
}
