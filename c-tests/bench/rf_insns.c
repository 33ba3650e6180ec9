/*
 * rf_insns: the code path of one small-message round trip, without spinning,
 * so that an instruction count (valgrind --tool=callgrind) compares
 * providers independently of machine load.
 *
 *   rf_insns -p <prov> [-s bytes] [-i iters] [-t|-m] [-e N] [-T domain|safe]
 *
 * One process, one thread, two RDM endpoints A and B (each its own domain,
 * CQs and AV, as if in two processes, FI_CQ_FORMAT_CONTEXT, one receive posted ahead as fabtests'
 * fi_rdm_pingpong does). Each iteration: A sends, B reads its receive
 * completion (polling until it arrives: the first fi_cq_read usually finds
 * it, so the count is of work, not of waiting), B reposts its receive and
 * replies, A reads the reply, and each side reads its send completion.
 * -t uses fi_tsend/fi_trecv (tag 0x1234) instead of fi_send/fi_recv.
 * -m is the shape of Open MPI's mtl ofi (pml cm) for a small blocking
 * send and receive: FI_TAGGED (CQ data 7 with each send), one FI_CQ_FORMAT_TAGGED
 * CQ per side for both directions, sends by fi_tinjectdata (no send
 * completion), receives by fi_trecv, and the receiver's progress call reads
 * the CQ with a count of 100 until it returns -FI_EAGAIN (so every
 * completion costs a read that finds it and one that finds nothing).
 * -T is the threading model asked in the hints: FI_THREAD_DOMAIN by default,
 * as fabtests' fi_rdm_pingpong asks (one thread: the application serialises
 * every call, and providers may drop their locks), or FI_THREAD_SAFE.
 * -e N adds N fi_cq_read calls on A's empty receive CQ per round trip: the
 * difference from a run without them is the cost of one empty poll, the
 * loop a waiting side spins in (its length bounds how soon an arrival is
 * seen).
 *
 * c-tests/bench/insns.sh runs it under callgrind twice (iters and 3 x iters)
 * and reports (Ir(3N) - Ir(N)) / 2N: instructions per round trip with set-up
 * cancelled. It also prints "polls A B" — the number of fi_cq_read calls
 * that found nothing, per round trip — so a count inflated by waiting shows.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define BENCH_PROG "rf_insns"
#include "bench_common.h"

struct side {
	struct fid_ep *ep;
	struct fid_cq *txcq, *rxcq;
	struct fid_av *av;
	fi_addr_t peer;
	char *tx, *rx;
	struct fi_context txctx, rxctx;
};

static int tagged, mtl;
static unsigned long extra_empty;
static size_t len = 1;
static unsigned long empty_polls;
static enum fi_threading threading = FI_THREAD_DOMAIN;

static void open_side(struct fid_domain *dom, struct fi_info *info, struct side *s)
{
	struct fi_cq_attr cq_attr = {.format = mtl ? FI_CQ_FORMAT_TAGGED : FI_CQ_FORMAT_CONTEXT, .size = 128};
	struct fi_av_attr av_attr = {.type = FI_AV_MAP};
	CK(fi_endpoint(dom, info, &s->ep, NULL));
	CK(fi_cq_open(dom, &cq_attr, &s->rxcq, NULL));
	if (mtl) {
		s->txcq = s->rxcq;
		CK(fi_ep_bind(s->ep, &s->rxcq->fid, FI_TRANSMIT | FI_RECV));
	} else {
		CK(fi_cq_open(dom, &cq_attr, &s->txcq, NULL));
		CK(fi_ep_bind(s->ep, &s->txcq->fid, FI_TRANSMIT));
		CK(fi_ep_bind(s->ep, &s->rxcq->fid, FI_RECV));
	}
	CK(fi_av_open(dom, &av_attr, &s->av, NULL));
	CK(fi_ep_bind(s->ep, &s->av->fid, 0));
	CK(fi_enable(s->ep));
	s->tx = calloc(1, len + 1);
	s->rx = calloc(1, len + 1);
	if (!s->tx || !s->rx)
		DIE("out of memory");
}

static void post_recv(struct side *s)
{
	ssize_t r;
	do {
		r = tagged ? fi_trecv(s->ep, s->rx, len, NULL, FI_ADDR_UNSPEC, 0x1234, 0, &s->rxctx)
			   : fi_recv(s->ep, s->rx, len, NULL, FI_ADDR_UNSPEC, &s->rxctx);
	} while (r == -FI_EAGAIN);
	CK(r);
}

static unsigned long eagain_sends;

/* Some providers (libfabric 1.17's shm) finish connecting a new peer only
 * when the peer's endpoint makes progress: a send that returns -FI_EAGAIN
 * drives the other side's receive CQ with a zero-entry read (which progresses
 * without consuming a completion) and tries again. */
static void send_one(struct side *s, struct side *other)
{
	ssize_t r;
	for (;;) {
		r = tagged ? fi_tsend(s->ep, s->tx, len, NULL, s->peer, 0x1234, &s->txctx)
			   : fi_send(s->ep, s->tx, len, NULL, s->peer, &s->txctx);
		if (r != -FI_EAGAIN)
			break;
		eagain_sends++;
		(void)fi_cq_read(other->rxcq, NULL, 0);
		(void)fi_cq_read(s->txcq, NULL, 0);
	}
	CK(r);
}

static void wait_one(struct fid_cq *cq, void *ctx)
{
	struct fi_cq_entry e;
	ssize_t r;
	while ((r = fi_cq_read(cq, &e, 1)) == -FI_EAGAIN)
		empty_polls++;
	if (r != 1)
		DIE("fi_cq_read = %zd (%s)", r, fi_strerror((int)-r));
	if (e.op_context != ctx)
		DIE("completion for the wrong context");
}

/* -m: mtl ofi's progress call (ompi_mtl_ofi_progress): reads of up to 100
 * tagged entries until -FI_EAGAIN, polling until `ctx`'s completion came. */
static void mtl_wait(struct side *s, void *ctx)
{
	static struct fi_cq_tagged_entry wc[100];
	int found = 0;
	while (!found) {
		ssize_t r;
		while ((r = fi_cq_read(s->rxcq, wc, 100)) > 0)
			for (ssize_t k = 0; k < r; k++) {
				if (wc[k].op_context != ctx || wc[k].tag != 0x1234 || wc[k].data != 7)
					DIE("unexpected completion");
				found = 1;
			}
		if (r != -FI_EAGAIN)
			DIE("fi_cq_read = %zd (%s)", r, fi_strerror((int)-r));
		if (!found)
			empty_polls++;
	}
}

static void mtl_send(struct side *s, struct side *other)
{
	ssize_t r;
	while ((r = fi_tinjectdata(s->ep, s->tx, len, 7, s->peer, 0x1234)) == -FI_EAGAIN) {
		eagain_sends++; /* as send_one */
		(void)fi_cq_read(other->rxcq, NULL, 0);
		(void)fi_cq_read(s->rxcq, NULL, 0);
	}
	CK(r);
}

/* The measured loop: insns.sh counts only what runs inside this function
 * (callgrind --toggle-collect), so set-up and tear-down, whose cost varies
 * from run to run with the machine (fi_getinfo reads /proc and the
 * interfaces, rustfab scans /dev/shm for dead segments), stay out. */
__attribute__((noinline)) void round_trips(struct side *a, struct side *b, unsigned long iters)
{
	for (unsigned long i = 0; mtl && i < iters; i++) {
		a->tx[0] = (char)i;
		mtl_send(a, b);
		mtl_wait(b, &b->rxctx);
		if (b->rx[0] != (char)i)
			DIE("iteration %lu: B received %d", i, b->rx[0]);
		post_recv(b);
		b->tx[0] = (char)~i;
		mtl_send(b, a);
		mtl_wait(a, &a->rxctx);
		if (a->rx[0] != (char)~i)
			DIE("iteration %lu: A received %d", i, a->rx[0]);
		post_recv(a);
	}
	for (unsigned long i = 0; !mtl && i < iters; i++) {
		a->tx[0] = (char)i;
		send_one(a, b);
		wait_one(b->rxcq, &b->rxctx);
		if (b->rx[0] != (char)i)
			DIE("iteration %lu: B received %d", i, b->rx[0]);
		post_recv(b);
		wait_one(a->txcq, &a->txctx);
		b->tx[0] = (char)~i;
		send_one(b, a);
		wait_one(a->rxcq, &a->rxctx);
		if (a->rx[0] != (char)~i)
			DIE("iteration %lu: A received %d", i, a->rx[0]);
		post_recv(a);
		wait_one(b->txcq, &b->txctx);
		for (unsigned long k = 0; k < extra_empty; k++) {
			struct fi_cq_entry e;
			if (fi_cq_read(a->rxcq, &e, 1) != -FI_EAGAIN)
				DIE("an extra poll found a completion");
		}
	}
}

int main(int argc, char **argv)
{
	const char *prov = NULL;
	unsigned long iters = 10000;
	int c;
	while ((c = getopt(argc, argv, "p:s:i:tme:T:")) != -1) {
		switch (c) {
		case 'p': prov = optarg; break;
		case 's': len = strtoul(optarg, NULL, 0); break;
		case 'i': iters = strtoul(optarg, NULL, 0); break;
		case 't': tagged = 1; break;
		case 'm': mtl = tagged = 1; break;
		case 'e': extra_empty = strtoul(optarg, NULL, 0); break;
		case 'T':
			if (!strcmp(optarg, "domain"))
				threading = FI_THREAD_DOMAIN;
			else if (!strcmp(optarg, "safe"))
				threading = FI_THREAD_SAFE;
			else
				DIE("-T domain|safe");
			break;
		default: DIE("usage: rf_insns -p <prov> [-s bytes] [-i iters] [-t|-m] [-e empty polls] [-T domain|safe]");
		}
	}
	if (!prov)
		DIE("usage: rf_insns -p <prov> [-s bytes] [-i iters] [-t|-m] [-e empty polls] [-T domain|safe]");

	struct fid_fabric *fab;
	struct fid_domain *doma, *domb;
	struct fi_info *info = bench_two_domains(prov, FI_MSG | (tagged ? FI_TAGGED : 0), threading, &fab, &doma, &domb);
	struct side a = {0}, b = {0};
	open_side(doma, info, &a);
	open_side(domb, info, &b);

	char na[256], nb[256];
	size_t la = sizeof(na), lb = sizeof(nb);
	CK(fi_getname(&a.ep->fid, na, &la));
	CK(fi_getname(&b.ep->fid, nb, &lb));
	if (fi_av_insert(a.av, nb, 1, &a.peer, 0, NULL) != 1 || fi_av_insert(b.av, na, 1, &b.peer, 0, NULL) != 1)
		DIE("fi_av_insert failed");

	post_recv(&a);
	post_recv(&b);
	round_trips(&a, &b, iters);
	if (info->domain_attr->threading != threading)
		fprintf(stderr, "rf_insns: %s answered threading %d for %d\n", prov, (int)info->domain_attr->threading,
			(int)threading);
	printf("rf_insns %s %zu bytes %lu round trips, %.2f empty polls and %.2f -FI_EAGAIN sends per round trip\n",
	       prov, len, iters, (double)empty_polls / (double)iters, (double)eagain_sends / (double)iters);

	struct side *sides[2] = {&a, &b};
	for (int k = 0; k < 2; k++) {
		fi_close(&sides[k]->ep->fid);
		fi_close(&sides[k]->av->fid);
		if (sides[k]->txcq != sides[k]->rxcq)
			fi_close(&sides[k]->txcq->fid);
		fi_close(&sides[k]->rxcq->fid);
	}
	fi_close(&doma->fid);
	fi_close(&domb->fid);
	fi_close(&fab->fid);
	fi_freeinfo(info);
	return 0;
}
