/*
 * Many endpoints, many peers (issue 16).
 *
 * - shared_cq_progresses_every_endpoint: one CQ bound to N auto endpoints
 *   (one domain); a peer endpoint (another domain) reaches half of them
 *   over shm and half over TCP (their addresses inserted with host id 0:
 *   "not known to be on this host", docs/auto.md). Reading that one CQ
 *   alone must bring every endpoint's receive and send completions, each
 *   exactly once, whichever transport carried it.
 * - first_contact_memory_is_bounded: N endpoints of this process each
 *   exchange a message with one peer endpoint over shm; what the process's
 *   resident shared memory (segment pages) grows by per new pair is bounded (a first contact used
 *   to write the whole 128 KiB ring of its slot and the owner to read all
 *   256 slot words, one page each: ~300 KiB per pair).
 */
#include "harness.h"
#include <time.h>
#include <unistd.h>

#define NEP 8
#define NAMELEN 128

struct side {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
};

static int side_open(struct side *s, const char *domain, size_t cq_size)
{
	struct fi_info *hints = fi_allocinfo();
	if (!hints)
		return -FI_ENOMEM;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->fabric_attr->prov_name = strdup("rustfab");
	hints->domain_attr->name = strdup(domain);
	int r = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &s->info);
	fi_freeinfo(hints);
	if (r)
		return r;
	if ((r = fi_fabric(s->info->fabric_attr, &s->fabric, NULL)))
		return r;
	if ((r = fi_domain(s->fabric, s->info, &s->domain, NULL)))
		return r;
	struct fi_av_attr aa = {.type = FI_AV_TABLE};
	if ((r = fi_av_open(s->domain, &aa, &s->av, NULL)))
		return r;
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_CONTEXT, .size = cq_size};
	return fi_cq_open(s->domain, &ca, &s->cq, NULL);
}

static void side_close(struct side *s)
{
	if (s->cq)
		fi_close(&s->cq->fid);
	if (s->av)
		fi_close(&s->av->fid);
	if (s->domain)
		fi_close(&s->domain->fid);
	if (s->fabric)
		fi_close(&s->fabric->fid);
	if (s->info)
		fi_freeinfo(s->info);
	memset(s, 0, sizeof *s);
}

static int ep_open(struct side *s, struct fid_ep **ep, char *name, size_t *len)
{
	int r = fi_endpoint(s->domain, s->info, ep, NULL);
	if (!r)
		r = fi_ep_bind(*ep, &s->av->fid, 0);
	if (!r)
		r = fi_ep_bind(*ep, &s->cq->fid, FI_SEND | FI_RECV);
	if (!r)
		r = fi_enable(*ep);
	if (!r && name) {
		*len = NAMELEN;
		r = fi_getname(&(*ep)->fid, name, len);
	}
	return r;
}

/* An auto name with its host id zeroed: a peer "not on this host" (TCP). */
static void remote_form(char *name)
{
	char *p = strstr(name, "://");
	if (p)
		memset(p + 3, '0', 16);
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* Completions read from one CQ, in order (a test reads both sides' CQs in
 * one loop: what it reads from the other side is kept for later). */
struct tally {
	void *ctx[256];
	int n, taken;
};

static int pump(struct fid_cq *cq, struct tally *t)
{
	struct fi_cq_entry e[8];
	ssize_t n = fi_cq_read(cq, e, 8);
	if (n == -FI_EAGAIN)
		return 0;
	if (n < 0)
		return -1;
	for (ssize_t i = 0; i < n; i++)
		if (t->n < 256)
			t->ctx[t->n++] = e[i].op_context;
	return 0;
}

/* Reads `cq` (and `other`'s, which only progresses the other side) until
 * `want` new entries came on `cq`: their contexts into `ctxs`; -1 on a
 * deadline or an error entry. */
static int reap(struct fid_cq *cq, struct tally *t, struct fid_cq *other, struct tally *o, void **ctxs, int want)
{
	double end = now_s() + 20;
	while (t->n - t->taken < want && now_s() < end)
		if (pump(cq, t) || pump(other, o))
			return -1;
	if (t->n - t->taken < want)
		return -1;
	for (int i = 0; i < want; i++)
		ctxs[i] = t->ctx[t->taken++];
	return 0;
}

static int times_seen(void **seen, int n, void *ctx)
{
	int k = 0;
	for (int j = 0; j < n; j++)
		k += seen[j] == ctx;
	return k;
}

TEST(shared_cq_progresses_every_endpoint)
{
	struct side hub = {0}, peer = {0};
	struct fid_ep *ep[NEP] = {0}, *pep = NULL;
	char names[NEP][NAMELEN], pname[NAMELEN];
	size_t len;
	fi_addr_t to_ep[NEP], to_peer[NEP];
	uint64_t rbuf[NEP], sbuf[NEP], pbuf[NEP];
	struct fi_context rctx[NEP], sctx[NEP], pctx[NEP * 2];
	void *seen[NEP * 2];
	static struct tally th, tp;
	memset(&th, 0, sizeof th);
	memset(&tp, 0, sizeof tp);

	CHECK_EQ(side_open(&hub, "auto", 64), 0);
	CHECK_EQ(side_open(&peer, "auto", 64), 0);
	for (int i = 0; i < NEP; i++)
		CHECK_EQ(ep_open(&hub, &ep[i], names[i], &len), 0);
	CHECK_EQ(ep_open(&peer, &pep, pname, &len), 0);
	for (int i = 0; i < NEP; i++) {
		/* odd endpoints: both directions over TCP */
		char n[NAMELEN], p[NAMELEN];
		memcpy(n, names[i], NAMELEN);
		memcpy(p, pname, NAMELEN);
		if (i % 2) {
			remote_form(n);
			remote_form(p);
		}
		CHECK_EQ(fi_av_insert(peer.av, n, 1, &to_ep[i], 0, NULL), 1);
		CHECK_EQ(fi_av_insert(hub.av, p, 1, &to_peer[i], 0, NULL), 1);
	}

	/* peer -> every hub endpoint; only the hub's CQ is read for them */
	for (int i = 0; i < NEP; i++) {
		rbuf[i] = 0;
		CHECK_EQ(fi_recv(ep[i], &rbuf[i], sizeof rbuf[i], NULL, FI_ADDR_UNSPEC, &rctx[i]), 0);
	}
	for (int i = 0; i < NEP; i++) {
		pbuf[i] = 0xab00 + (uint64_t)i;
		ssize_t r;
		while ((r = fi_send(pep, &pbuf[i], sizeof pbuf[i], NULL, to_ep[i], &pctx[i])) == -FI_EAGAIN)
			CHECK_EQ(pump(peer.cq, &tp), 0);
		CHECK_EQ(r, 0);
	}
	CHECK_EQ(reap(hub.cq, &th, peer.cq, &tp, seen, NEP), 0);
	for (int i = 0; i < NEP; i++) {
		int found = times_seen(seen, NEP, &rctx[i]);
		if (found != 1)
			FAIL_AT("endpoint %d (%s): %d receive completions on the shared CQ", i, i % 2 ? "tcp" : "shm",
				found);
		CHECK_EQ(rbuf[i], 0xab00 + (uint64_t)i);
	}
	/* the peer's own send completions (its CQ, its progress) */
	CHECK_EQ(reap(peer.cq, &tp, hub.cq, &th, seen, NEP), 0);

	/* every hub endpoint -> peer: the send completions on the shared CQ */
	for (int i = 0; i < NEP; i++)
		CHECK_EQ(fi_recv(pep, &pbuf[i], sizeof pbuf[i], NULL, FI_ADDR_UNSPEC, &pctx[NEP + i]), 0);
	for (int i = 0; i < NEP; i++) {
		sbuf[i] = 0xcd00 + (uint64_t)i;
		CHECK_EQ(fi_send(ep[i], &sbuf[i], sizeof sbuf[i], NULL, to_peer[i], &sctx[i]), 0);
	}
	CHECK_EQ(reap(hub.cq, &th, peer.cq, &tp, seen, NEP), 0);
	for (int i = 0; i < NEP; i++) {
		int found = times_seen(seen, NEP, &sctx[i]);
		if (found != 1)
			FAIL_AT("endpoint %d (%s): %d send completions on the shared CQ", i, i % 2 ? "tcp" : "shm",
				found);
	}
	CHECK_EQ(reap(peer.cq, &tp, hub.cq, &th, seen, NEP), 0);
	uint64_t sum = 0;
	for (int i = 0; i < NEP; i++)
		sum += pbuf[i];
	CHECK_EQ(sum, (uint64_t)NEP * 0xcd00 + (uint64_t)NEP * (NEP - 1) / 2);

	for (int i = 0; i < NEP; i++)
		fi_close(&ep[i]->fid);
	fi_close(&pep->fid);
	side_close(&hub);
	side_close(&peer);
}

/* Resident shared pages (statm's third field), in KiB: the shm segments'
 * pages this process has mapped and touched (and shared libraries', which
 * do not change here) — not the heap, so a run under valgrind counts the
 * same. */
static long shared_kb(void)
{
	long pages = 0, res = 0, shared = -1;
	FILE *f = fopen("/proc/self/statm", "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld %ld", &pages, &res, &shared) != 3)
		shared = -1;
	fclose(f);
	return shared < 0 ? -1 : shared * (sysconf(_SC_PAGESIZE) / 1024);
}

#define NPAIR 32
/* Per new shm pair, in KiB of resident shared memory (both directions, both
 * mappings: the sender's of the owner's segment and the owner's own). */
#define PAIR_RSS_MAX_KB 64

TEST(first_contact_memory_is_bounded)
{
	struct side hub = {0}, peer = {0};
	static struct fid_ep *ep[NPAIR];
	struct fid_ep *pep = NULL;
	static char names[NPAIR][NAMELEN];
	char pname[NAMELEN];
	size_t len;
	static fi_addr_t to_ep[NPAIR], to_peer[NPAIR];
	static uint64_t rbuf[NPAIR], sbuf[NPAIR], pbuf[NPAIR * 2];
	static struct fi_context rctx[NPAIR], sctx[NPAIR], pctx[NPAIR * 2];
	static void *seen[NPAIR];
	static struct tally th, tp;
	memset(&th, 0, sizeof th);
	memset(&tp, 0, sizeof tp);

	CHECK_EQ(side_open(&hub, "shm", 4 * NPAIR), 0);
	CHECK_EQ(side_open(&peer, "shm", 4 * NPAIR), 0);
	for (int i = 0; i < NPAIR; i++)
		CHECK_EQ(ep_open(&hub, &ep[i], names[i], &len), 0);
	CHECK_EQ(ep_open(&peer, &pep, pname, &len), 0);
	for (int i = 0; i < NPAIR; i++) {
		CHECK_EQ(fi_av_insert(peer.av, names[i], 1, &to_ep[i], 0, NULL), 1);
		CHECK_EQ(fi_av_insert(hub.av, pname, 1, &to_peer[i], 0, NULL), 1);
	}
	/* everything opened; from here on only first contacts */
	long before = shared_kb();
	CHECK(before > 0);
	for (int i = 0; i < NPAIR; i++) {
		CHECK_EQ(fi_recv(ep[i], &rbuf[i], sizeof rbuf[i], NULL, FI_ADDR_UNSPEC, &rctx[i]), 0);
		CHECK_EQ(fi_recv(pep, &pbuf[i], sizeof pbuf[i], NULL, FI_ADDR_UNSPEC, &pctx[NPAIR + i]), 0);
	}
	for (int i = 0; i < NPAIR; i++) {
		sbuf[i] = (uint64_t)i;
		CHECK_EQ(fi_send(pep, &sbuf[i], sizeof sbuf[i], NULL, to_ep[i], &pctx[i]), 0);
		CHECK_EQ(fi_send(ep[i], &sbuf[i], sizeof sbuf[i], NULL, to_peer[i], &sctx[i]), 0);
	}
	/* the hub's receives and sends, the peer's receives and sends */
	CHECK_EQ(reap(hub.cq, &th, peer.cq, &tp, seen, NPAIR), 0);
	CHECK_EQ(reap(hub.cq, &th, peer.cq, &tp, seen, NPAIR), 0);
	CHECK_EQ(reap(peer.cq, &tp, hub.cq, &th, seen, NPAIR), 0);
	CHECK_EQ(reap(peer.cq, &tp, hub.cq, &th, seen, NPAIR), 0);
	long per_pair = (shared_kb() - before) / NPAIR;
	printf("    resident shared memory per new shm pair: %ld KiB (bound %d)\n", per_pair, PAIR_RSS_MAX_KB);
	CHECK(per_pair <= PAIR_RSS_MAX_KB);

	for (int i = 0; i < NPAIR; i++)
		fi_close(&ep[i]->fid);
	fi_close(&pep->fid);
	side_close(&hub);
	side_close(&peer);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	RUN(shared_cq_progresses_every_endpoint);
	RUN(first_contact_memory_is_bounded);
	return harness_done();
}
