/*
 * libfabric 2.x's receive matching and addressing over a 2.x core
 * (docs/libfabric2.md, "Receive matching and addressing of 2.x"):
 * FI_TAGGED_DIRECTED_RECV, FI_EXACT_DIRECTED_RECV, FI_TAGGED_MULTI_RECV,
 * FI_AV_USER_ID with fi_av_set_user_id, and fi_cq_err_entry.src_addr, on
 * the transport RF_TRANSPORT names (shm, tcp or auto), with data checks.
 *
 * Built against the system's 1.17 headers, so the 2.x constants, the 2.x
 * fi_ops_av slot and the 1.20 error entry are defined here; run through a
 * 2.x libfabric (LD_LIBRARY_PATH: the core the MPI wheels bundle, or any
 * 2.x build). Through an older core it says so and skips.
 *
 * One process, one domain, one AV opened with FI_AV_USER_ID: A and C send,
 * B receives; E is an endpoint with FI_EXACT_DIRECTED_RECV.
 */
#include "../harness.h"
#include <time.h>

#ifndef FI_TAGGED_DIRECTED_RECV
#define FI_TAGGED_DIRECTED_RECV (1ULL << 45)
#endif
#ifndef FI_TAGGED_MULTI_RECV
#define FI_TAGGED_MULTI_RECV (1ULL << 46)
#endif
#ifndef FI_EXACT_DIRECTED_RECV
#define FI_EXACT_DIRECTED_RECV (1ULL << 48)
#endif

/* The 2.x fi_ops_av: the 1.17 table, then these three slots. */
struct ops_av2 {
	struct fi_ops_av v1;
	void *insert_auth_key;
	void *lookup_auth_key;
	int (*set_user_id)(struct fid_av *av, fi_addr_t fi_addr, fi_addr_t user_id, uint64_t flags);
};

/* The 1.20+ fi_cq_err_entry: the 1.17 one, then src_addr. */
struct cq_err2 {
	struct fi_cq_err_entry e;
	fi_addr_t src_addr;
};

#define API FI_VERSION(2, 0)
#define NEP 4
enum { A, B, C, E };
#define USER_ID(i) (0x5000 + (i))

static const char *transport;
static struct fi_info *info, *exact_info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_ep *ep[NEP];
static struct fid_cq *cq[NEP];
static fi_addr_t addr[NEP];

static struct fi_info *ask(uint32_t version, uint64_t caps)
{
	struct fi_info *h = rf_hints(transport, FI_EP_RDM), *i = NULL;
	h->caps = caps;
	int rc = fi_getinfo(version, NULL, NULL, 0, h, &i);
	fi_freeinfo(h);
	return rc ? NULL : i;
}

static int set_user_id(fi_addr_t a, fi_addr_t id)
{
	const struct ops_av2 *ops = (const struct ops_av2 *)av->ops;
	if (ops->v1.size < sizeof(struct ops_av2) || !ops->set_user_id)
		return -FI_ENOSYS;
	return ops->set_user_id(av, a, id, 0);
}

/* Polls every CQ (manual progress) until `n` receive completions of `who`
 * are in `out` (and `src`), or 5 s pass. Returns how many came. */
static int wait_rx(int who, struct fi_cq_tagged_entry *out, fi_addr_t *src, int n)
{
	int got = 0;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < n) {
		for (int i = 0; i < NEP; i++) {
			struct fi_cq_tagged_entry c;
			fi_addr_t s;
			ssize_t r = fi_cq_readfrom(cq[i], &c, 1, &s);
			if (r == 1 && i == who && (c.flags & (FI_RECV | FI_MULTI_RECV))) {
				out[got] = c;
				src[got] = s;
				got++;
			}
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 5)
			break;
	}
	return got;
}

static void fill(char *p, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (char)(i * 7 + seed);
}

static int same(const char *p, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (char)(i * 7 + seed))
			return 0;
	return 1;
}

/* Progress for a sender whose queue is full: reads (and drops) its
 * completions. */
static void drain(int who)
{
	struct fi_cq_tagged_entry c;
	(void)fi_cq_read(cq[who], &c, 1);
}

static ssize_t tsend_to(int from, int to, const void *buf, size_t len, uint64_t tag)
{
	ssize_t r;
	while ((r = fi_tsend(ep[from], buf, len, NULL, addr[to], tag, NULL)) == -FI_EAGAIN)
		drain(from);
	return r;
}

static ssize_t tsend(int from, const void *buf, size_t len, uint64_t tag)
{
	return tsend_to(from, B, buf, len, tag);
}

TEST(offered_at_2_0_only)
{
	uint64_t caps = FI_MSG | FI_TAGGED | FI_TAGGED_DIRECTED_RECV | FI_TAGGED_MULTI_RECV | FI_AV_USER_ID | FI_SOURCE;
	info = ask(API, caps);
	CHECK(info != NULL);
	CHECK_EQ(info->caps & caps, caps);
	CHECK_EQ(info->caps & FI_EXACT_DIRECTED_RECV, 0); /* only when asked for */
	CHECK(info->domain_attr->caps & FI_AV_USER_ID);
	CHECK_EQ(info->rx_attr->caps & (FI_TAGGED_DIRECTED_RECV | FI_TAGGED_MULTI_RECV),
		 FI_TAGGED_DIRECTED_RECV | FI_TAGGED_MULTI_RECV);
	exact_info = ask(API, FI_MSG | FI_TAGGED | FI_EXACT_DIRECTED_RECV);
	CHECK(exact_info != NULL);
	CHECK(exact_info->caps & FI_EXACT_DIRECTED_RECV);
	/* At 1.17 the bits mean other things: nothing matches. */
	struct fi_info *old = ask(FI_VERSION(1, 17), FI_TAGGED | FI_TAGGED_DIRECTED_RECV);
	CHECK(old == NULL);
}

TEST(open_with_user_ids)
{
	CHECK(info && exact_info);
	CHECK_OK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK_OK(fi_domain(fabric, info, &domain, NULL));
	struct fi_av_attr aa = {.type = FI_AV_TABLE, .flags = FI_AV_USER_ID};
	CHECK_OK(fi_av_open(domain, &aa, &av, NULL));
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .size = 256};
	for (int i = 0; i < NEP; i++) {
		CHECK_OK(fi_endpoint(domain, i == E ? exact_info : info, &ep[i], NULL));
		CHECK_OK(fi_cq_open(domain, &ca, &cq[i], NULL));
		CHECK_OK(fi_ep_bind(ep[i], &cq[i]->fid, FI_TRANSMIT | FI_RECV));
		CHECK_OK(fi_ep_bind(ep[i], &av->fid, 0));
		CHECK_OK(fi_enable(ep[i]));
		char name[256];
		size_t len = sizeof(name);
		CHECK_OK(fi_getname(&ep[i]->fid, name, &len));
		CHECK_EQ(fi_av_insert(av, name, 1, &addr[i], 0, NULL), 1);
		/* The per-insert flag is invalid on an AV opened with it. */
		fi_addr_t again = 77;
		CHECK_EQ(fi_av_insert(av, name, 1, &again, FI_AV_USER_ID, NULL), -FI_EINVAL);
	}
	for (int i = 0; i < NEP; i++)
		if (i != C) /* C's stays unset: FI_ADDR_NOTAVAIL */
			CHECK_OK(set_user_id(addr[i], USER_ID(i)));
	CHECK_EQ(set_user_id(12345, 1), -FI_EINVAL);
}

/* FI_TAGGED_DIRECTED_RECV alone: tagged receives honour src_addr,
 * untagged ones ignore it; user ids are the completions' sources. */
TEST(tagged_directed_receives)
{
	CHECK(ep[B]);
	char from_c[64], any[64], plain[64], ma[64], mc[64], mu[64];
	memset(from_c, 0, 64);
	memset(any, 0, 64);
	memset(plain, 0, 64);
	fill(ma, 64, 1);
	fill(mc, 64, 2);
	fill(mu, 64, 3);
	CHECK_OK(fi_trecv(ep[B], from_c, 64, NULL, addr[C], 5, 0, (void *)1));
	CHECK_OK(fi_trecv(ep[B], any, 64, NULL, FI_ADDR_UNSPEC, 5, 0, (void *)2));
	CHECK_OK(fi_recv(ep[B], plain, 64, NULL, addr[C], (void *)3));
	CHECK_OK(tsend(A, ma, 64, 5));
	CHECK_OK(fi_send(ep[A], mu, 64, NULL, addr[B], NULL));
	CHECK_OK(tsend(C, mc, 64, 5));
	struct fi_cq_tagged_entry c[3];
	fi_addr_t s[3];
	CHECK_EQ(wait_rx(B, c, s, 3), 3);
	for (int i = 0; i < 3; i++) {
		uintptr_t ctx = (uintptr_t)c[i].op_context;
		CHECK_EQ(c[i].len, 64);
		if (ctx == 1)
			CHECK_EQ(s[i], FI_ADDR_NOTAVAIL); /* C: no user id set */
		else
			CHECK_EQ(s[i], USER_ID(A));
		CHECK_EQ(c[i].flags & (FI_TAGGED | FI_MSG), ctx == 3 ? FI_MSG : FI_TAGGED);
	}
	CHECK(same(from_c, 64, 2));
	CHECK(same(any, 64, 1));
	CHECK(same(plain, 64, 3));
}

/* FI_TAGGED_MULTI_RECV: one tagged buffer takes the messages its tag
 * matches, packed; one that does not fit releases it (FI_MULTI_RECV only). */
TEST(tagged_multi_receive)
{
	CHECK(ep[B]);
	static char big[1000], last[200];
	memset(big, 0, sizeof(big));
	struct iovec iov = {big, sizeof(big)};
	struct fi_msg_tagged m = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC,
				  .tag = 0x100, .ignore = 0xff, .context = (void *)9};
	CHECK_OK(fi_trecvmsg(ep[B], &m, FI_MULTI_RECV | FI_COMPLETION));
	static char msg[4][300];
	uint64_t tags[4] = {0x101, 0x1ff, 0x102, 0x103};
	size_t lens[4] = {300, 300, 300, 200};
	for (int i = 0; i < 4; i++) {
		fill(msg[i], lens[i], 10 + i);
		CHECK_OK(tsend(A, msg[i], lens[i], tags[i]));
	}
	struct fi_cq_tagged_entry c[4];
	fi_addr_t s[4];
	CHECK_EQ(wait_rx(B, c, s, 4), 4);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ((uintptr_t)c[i].op_context, 9);
		CHECK_EQ(c[i].flags, FI_TAGGED | FI_RECV);
		CHECK_EQ(c[i].tag, tags[i]);
		CHECK_EQ(c[i].len, 300);
		CHECK(c[i].buf == big + 300 * i);
		CHECK(same(big + 300 * i, 300, 10 + i));
		CHECK_EQ(s[i], USER_ID(A));
	}
	CHECK_EQ(c[3].flags, FI_MULTI_RECV);
	CHECK_EQ((uintptr_t)c[3].op_context, 9);
	CHECK(c[3].buf == big + 900);
	/* The message that did not fit waits for the next receive. */
	CHECK_OK(fi_trecv(ep[B], last, sizeof(last), NULL, FI_ADDR_UNSPEC, 0x103, 0, (void *)10));
	CHECK_EQ(wait_rx(B, c, s, 1), 1);
	CHECK_EQ(c[0].len, 200);
	CHECK(same(last, 200, 13));
}

/* A truncated receive's 1.20 error entry names the sender (its user id). */
TEST(error_entry_src_addr)
{
	CHECK(ep[B]);
	char small[4], m[10];
	fill(m, 10, 4);
	CHECK_OK(fi_trecv(ep[B], small, sizeof(small), NULL, FI_ADDR_UNSPEC, 9, 0, (void *)11));
	CHECK_OK(tsend(A, m, 10, 9));
	struct cq_err2 err;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct fi_cq_tagged_entry c;
		for (int i = 0; i < NEP; i++)
			if (i != B)
				drain(i);
		if (fi_cq_read(cq[B], &c, 1) == -FI_EAVAIL)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 5)
			FAIL_AT("no error completion");
	}
	memset(&err, 0xab, sizeof(err));
	err.e.err_data_size = 0;
	CHECK_EQ(fi_cq_readerr(cq[B], &err.e, 0), 1);
	CHECK_EQ(err.e.err, FI_ETRUNC);
	CHECK_EQ((uintptr_t)err.e.op_context, 11);
	CHECK_EQ(err.e.olen, 6);
	CHECK_EQ(err.src_addr, USER_ID(A));
	CHECK(same(small, 4, 4));
}

/* FI_EXACT_DIRECTED_RECV: FI_ADDR_UNSPEC is refused; named sources match. */
TEST(exact_directed_receives)
{
	CHECK(ep[E]);
	char buf[32], m[32];
	CHECK_EQ(fi_trecv(ep[E], buf, 32, NULL, FI_ADDR_UNSPEC, 1, 0, NULL), -FI_EINVAL);
	CHECK_EQ(fi_recv(ep[E], buf, 32, NULL, FI_ADDR_UNSPEC, NULL), -FI_EINVAL);
	memset(buf, 0, 32);
	fill(m, 32, 6);
	CHECK_OK(fi_trecv(ep[E], buf, 32, NULL, addr[C], 1, 0, (void *)12));
	CHECK_OK(tsend_to(C, E, m, 32, 1));
	struct fi_cq_tagged_entry c;
	fi_addr_t s;
	CHECK_EQ(wait_rx(E, &c, &s, 1), 1);
	CHECK_EQ((uintptr_t)c.op_context, 12);
	CHECK(same(buf, 32, 6));
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	transport = getenv("RF_TRANSPORT") ? getenv("RF_TRANSPORT") : "shm";
	if (FI_MAJOR(fi_version()) < 2) {
		printf("SKIP: libfabric core %u.%u is not 2.x\n", FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
		return 0;
	}
	printf("-- %s, core %u.%u\n", transport, FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
	RUN(offered_at_2_0_only);
	RUN(open_with_user_ids);
	RUN(tagged_directed_receives);
	RUN(tagged_multi_receive);
	RUN(error_entry_src_addr);
	RUN(exact_directed_receives);
	for (int i = 0; i < NEP; i++) {
		if (ep[i])
			fi_close(&ep[i]->fid);
		if (cq[i])
			fi_close(&cq[i]->fid);
	}
	if (av)
		fi_close(&av->fid);
	if (domain)
		fi_close(&domain->fid);
	if (fabric)
		fi_close(&fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(exact_info);
	return harness_done();
}
