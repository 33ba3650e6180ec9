/*
 * Buffered receives (fi_msg(3) "Buffered Receives", FI_BUFFERED_RECV mode;
 * fi_cq(3) FI_MORE / FI_CLAIM; fi_endpoint(3) FI_OPT_BUFFERED_LIMIT/MIN)
 * through the public API, over the transport named by RF_TRANSPORT (the
 * Makefile runs it over shm and tcp).
 *
 * A is an ordinary sender, B the endpoint in buffered mode: messages arrive
 * as completions whose op_context is a struct fi_recv_context and whose buf
 * is the provider's copy; B then claims (FI_CLAIM) or discards (FI_DISCARD).
 */
#include "rdm_common.h"
#include <signal.h>
#include <sys/uio.h>

static struct end A, B;

struct bopts {
	int buffered;      /* FI_BUFFERED_RECV in hints->mode */
	size_t limit, min; /* FI_OPT_BUFFERED_LIMIT / MIN before enable (0: default) */
	int set_min;       /* set MIN even when it is 0 */
	size_t rx_size, tx_size, cq_size;
	uint64_t caps;       /* 0: FI_MSG | FI_TAGGED */
	size_t max_msg_size; /* set in the info before fi_endpoint (0: as returned) */
};

/* FI_OPT_BUFFERED_LIMIT / MIN, set before fi_enable (end_opts.before_enable). */
static int set_buffered_opts(struct end *e, const void *arg)
{
	const struct bopts *o = arg;
	int ret;
	if (o->limit && (ret = fi_setopt(&e->ep->fid, FI_OPT_ENDPOINT, FI_OPT_BUFFERED_LIMIT, &o->limit, sizeof(size_t))))
		return ret;
	if ((o->min || o->set_min) &&
	    (ret = fi_setopt(&e->ep->fid, FI_OPT_ENDPOINT, FI_OPT_BUFFERED_MIN, &o->min, sizeof(size_t))))
		return ret;
	return 0;
}

/* end_open (rdm_common.h) with the mode bit and the buffered options. */
static int bopen(struct end *e, const struct bopts *o)
{
	struct end_opts eo = {
		.caps = o->caps,
		.mode = o->buffered ? FI_BUFFERED_RECV : 0,
		.rx_size = o->rx_size,
		.tx_size = o->tx_size,
		.cq_size = o->cq_size,
		.max_msg_size = o->max_msg_size,
		.before_enable = set_buffered_opts,
		.arg = o,
	};
	return end_open(e, &eo);
}

static const struct bopts PLAIN = {0};
static const struct bopts BUF = {.buffered = 1};

static int pair(const struct bopts *oa, const struct bopts *ob)
{
	int r;
	if ((r = bopen(&A, oa)) || (r = bopen(&B, ob)))
		return r;
	return ends_connect(&A, &B);
}

static void unpair(void)
{
	end_close(&A);
	end_close(&B);
}

#define SETUP(oa, ob)                                           \
	do {                                                    \
		int _r = pair((oa), (ob));                      \
		if (_r) {                                       \
			unpair();                               \
			FAIL_AT("setup: %s", fi_strerror(-_r)); \
		}                                               \
	} while (0)

#define EXPECT_COMP(e, other, ent)                                                              \
	do {                                                                                    \
		struct fi_cq_err_entry _err;                                                    \
		memset(&_err, 0, sizeof(_err));                                                 \
		int _w = wait_comp((e), (other), (ent), &_err, NULL, 10);                       \
		if (_w != 1) {                                                                  \
			unpair();                                                               \
			FAIL_AT("no completion (%d, err %d %s)", _w, _err.err, fi_strerror(_err.err)); \
		}                                                                               \
	} while (0)

/* FI_CLAIM / FI_DISCARD receives, untagged (fi_recvmsg) or tagged (fi_trecvmsg). */
static ssize_t post_flagged(struct end *e, void *ctx, struct iovec *iov, size_t n, int tagged, uint64_t flags)
{
	if (tagged) {
		struct fi_msg_tagged m = {.msg_iov = iov, .iov_count = n, .addr = FI_ADDR_UNSPEC, .context = ctx};
		return fi_trecvmsg(e->ep, &m, flags);
	}
	struct fi_msg m = {.msg_iov = iov, .iov_count = n, .addr = FI_ADDR_UNSPEC, .context = ctx};
	return fi_recvmsg(e->ep, &m, flags);
}

static ssize_t claim(struct end *e, void *ctx, struct iovec *iov, size_t n, int tagged)
{
	return post_flagged(e, ctx, iov, n, tagged, FI_CLAIM);
}

static ssize_t discard(struct end *e, void *ctx, int tagged)
{
	return post_flagged(e, ctx, NULL, 0, tagged, FI_DISCARD);
}

/* Progress without consuming completions. */
static void spin(struct end *e, int n)
{
	for (int i = 0; i < n; i++)
		fi_cq_read(e->cq, NULL, 0);
}

TEST(getinfo_keeps_mode_only_when_asked)
{
	struct fi_info *h = rf_hints(rf_transport(), FI_EP_RDM), *info = NULL;
	CHECK(h);
	h->mode = FI_BUFFERED_RECV | FI_CONTEXT;
	CHECK_OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info));
	CHECK(info->mode & FI_BUFFERED_RECV);
	CHECK(info->rx_attr->mode & FI_BUFFERED_RECV);
	fi_freeinfo(info);
	h->mode = FI_CONTEXT;
	CHECK_OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info));
	CHECK(!(info->mode & FI_BUFFERED_RECV));
	CHECK(!(info->rx_attr->mode & FI_BUFFERED_RECV));
	fi_freeinfo(info);
	fi_freeinfo(h);
}

TEST(small_processed_in_place_then_discarded)
{
	struct fi_cq_tagged_entry c;
	char tx[3][200];
	SETUP(&PLAIN, &BUF);
	for (int i = 0; i < 3; i++)
		fill(tx[i], sizeof tx[i], 10 + i);
	CHECK_OK(POST(fi_send(A.ep, tx[0], 200, NULL, A.peer, NULL), &A, &B));
	CHECK_OK(POST(fi_tsenddata(A.ep, tx[1], 150, NULL, 0xd00d, A.peer, 0x42, NULL), &A, &B));
	CHECK_OK(POST(fi_send(A.ep, tx[2], 0, NULL, A.peer, NULL), &A, &B));
	void *held[3];
	for (int i = 0; i < 3; i++) {
		EXPECT_COMP(&B, &A, &c);
		struct fi_recv_context *rc = c.op_context;
		CHECK(rc != NULL);
		CHECK(rc->ep == B.ep);
		CHECK(rc->context == NULL);
		CHECK(c.flags & FI_RECV);
		CHECK(!(c.flags & FI_MORE));
		CHECK(!(c.flags & FI_CLAIM));
		CHECK(((uintptr_t)c.buf & 63) == 0);
		held[i] = rc;
		if (i == 0) {
			CHECK(c.flags & FI_MSG);
			CHECK_EQ(c.len, 200);
			CHECK(check_fill(c.buf, 200, 10));
		} else if (i == 1) {
			CHECK(c.flags & FI_TAGGED);
			CHECK(c.flags & FI_REMOTE_CQ_DATA);
			CHECK_EQ(c.tag, 0x42);
			CHECK_EQ(c.data, 0xd00d);
			CHECK_EQ(c.len, 150);
			CHECK(check_fill(c.buf, 150, 11));
		} else {
			CHECK_EQ(c.len, 0);
		}
	}
	/* Processed in place (above); now released, in any order. */
	CHECK_OK(discard(&B, held[1], 1));
	CHECK_OK(discard(&B, held[0], 0));
	CHECK_OK(discard(&B, held[2], 0));
	/* Once released, the context is no longer a message. */
	CHECK_EQ(discard(&B, held[0], 0), -FI_EINVAL);
	/* A discard produces no completion; the sends all completed. */
	for (int i = 0; i < 3; i++)
		EXPECT_COMP(&A, &B, &c);
	spin(&B, 50);
	CHECK_EQ(fi_cq_read(B.cq, &c, 1), -FI_EAGAIN);
	unpair();
}

/* A large message: FI_MORE, at least BUFFERED_MIN bytes in buf, claimed into
 * an iov with a rewritten context, verified byte for byte. */
static void large_claim(size_t len, size_t min)
{
	struct fi_cq_tagged_entry c;
	struct bopts ob = {.buffered = 1, .min = min};
	SETUP(&PLAIN, &ob);
	char *tx = malloc(len), *rx = calloc(1, len + 16);
	CHECK(tx && rx);
	fill(tx, len, 3);
	CHECK_OK(POST(fi_tsend(A.ep, tx, len, NULL, A.peer, 0x77, (void *)0xa1), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	struct fi_recv_context *rc = c.op_context;
	CHECK(c.flags & FI_MORE);
	CHECK(c.flags & FI_RECV);
	CHECK(c.flags & FI_TAGGED);
	CHECK_EQ(c.len, len);
	CHECK_EQ(c.tag, 0x77);
	CHECK(rc->ep == B.ep);
	CHECK(rc->context == NULL);
	CHECK(check_fill(c.buf, min, 3));
	/* The rest is still at the sender: its send has not completed. */
	for (int i = 0; i < 20; i++)
		poke(&A, NULL);
	CHECK_EQ(A.nstash, 0);
	rc->context = (void *)0xc1;
	struct iovec iov[3] = {
		{rx, 100},
		{rx + 100, len / 2},
		{rx + 100 + len / 2, len - 100 - len / 2 + 16},
	};
	CHECK_OK(claim(&B, rc, iov, 3, 1));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.op_context == (void *)0xc1);
	CHECK(c.flags & FI_CLAIM);
	CHECK(c.flags & FI_RECV);
	CHECK(c.flags & FI_TAGGED);
	CHECK(!(c.flags & FI_MORE));
	CHECK_EQ(c.len, len);
	CHECK_EQ(c.tag, 0x77);
	CHECK(c.buf == rx);
	CHECK(check_fill(rx, len, 3));
	EXPECT_COMP(&A, &B, &c);
	CHECK(c.op_context == (void *)0xa1);
	/* Claimed once: the context is gone. */
	CHECK_EQ(claim(&B, rc, iov, 3, 1), -FI_EINVAL);
	free(tx);
	free(rx);
	unpair();
}

TEST(large_more_claimed_into_iov)
{
	large_claim((1u << 20) + 13, 1000);
}

TEST(large_more_claimed_into_iov_without_cma)
{
	/* shm: the prefix comes through a ranged CTS and DATA records, the rest
	 * is streamed on claim (tcp works this way anyway). */
	setenv("FI_RUSTFAB_SHM_CMA", "0", 1);
	large_claim((3u << 20) + 1, 5000);
	unsetenv("FI_RUSTFAB_SHM_CMA");
}

TEST(claim_truncates_like_a_receive)
{
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	char tx[1000], rx[300];
	SETUP(&PLAIN, &BUF);
	fill(tx, sizeof tx, 7);
	CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, A.peer, NULL), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	struct fi_recv_context *rc = c.op_context;
	rc->context = (void *)0xc2;
	struct iovec iov = {rx, sizeof rx};
	CHECK_OK(claim(&B, rc, &iov, 1, 0));
	memset(&err, 0, sizeof err);
	CHECK_EQ(wait_comp(&B, &A, &c, &err, NULL, 10), -FI_EAVAIL);
	CHECK_EQ(err.err, FI_ETRUNC);
	CHECK(err.op_context == (void *)0xc2);
	CHECK(err.flags & FI_CLAIM);
	CHECK_EQ(err.len, sizeof rx);
	CHECK_EQ(err.olen, sizeof tx - sizeof rx);
	CHECK(check_fill(rx, sizeof rx, 7));
	unpair();
}

TEST(large_claim_truncated)
{
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	size_t len = 600000, room = 200000;
	SETUP(&PLAIN, &BUF);
	char *tx = malloc(len), *rx = calloc(1, room);
	fill(tx, len, 8);
	CHECK_OK(POST(fi_send(A.ep, tx, len, NULL, A.peer, (void *)0xa8), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.flags & FI_MORE);
	struct fi_recv_context *rc = c.op_context;
	struct iovec iov = {rx, room};
	CHECK_OK(claim(&B, rc, &iov, 1, 0));
	memset(&err, 0, sizeof err);
	CHECK_EQ(wait_comp(&B, &A, &c, &err, NULL, 10), -FI_EAVAIL);
	CHECK_EQ(err.err, FI_ETRUNC);
	CHECK(err.flags & FI_CLAIM);
	CHECK_EQ(err.len, room);
	CHECK_EQ(err.olen, len - room);
	CHECK(check_fill(rx, room, 8));
	EXPECT_COMP(&A, &B, &c); /* the sender completes normally */
	CHECK(c.op_context == (void *)0xa8);
	free(tx);
	free(rx);
	unpair();
}

TEST(discarded_large_message_completes_the_sender)
{
	struct fi_cq_tagged_entry c;
	size_t len = 2u << 20;
	SETUP(&PLAIN, &BUF);
	char *tx = malloc(len);
	char small[64];
	fill(tx, len, 5);
	fill(small, sizeof small, 6);
	CHECK_OK(POST(fi_send(A.ep, tx, len, NULL, A.peer, (void *)0xa5), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.flags & FI_MORE);
	CHECK_OK(discard(&B, c.op_context, 0));
	EXPECT_COMP(&A, &B, &c);
	CHECK(c.op_context == (void *)0xa5);
	/* The stream stays in step: the next message arrives intact. */
	CHECK_OK(POST(fi_send(A.ep, small, sizeof small, NULL, A.peer, NULL), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	CHECK(!(c.flags & FI_MORE));
	CHECK_EQ(c.len, sizeof small);
	CHECK(check_fill(c.buf, sizeof small, 6));
	CHECK_OK(discard(&B, c.op_context, 0));
	free(tx);
	unpair();
}

TEST(reports_keep_the_senders_order)
{
	/* small, large (prefix fetched first), small, small: reported in the
	 * order sent, also when the prefix needs a round trip. */
	struct fi_cq_tagged_entry c;
	size_t sizes[] = {10, 300000, 20, 30, 250000, 40};
	char *tx[6];
	SETUP(&PLAIN, &BUF);
	for (int i = 0; i < 6; i++) {
		tx[i] = malloc(sizes[i]);
		fill(tx[i], sizes[i], 20 + i);
		CHECK_OK(POST(fi_tsend(A.ep, tx[i], sizes[i], NULL, A.peer, (uint64_t)i, NULL), &A, &B));
	}
	for (int i = 0; i < 6; i++) {
		EXPECT_COMP(&B, &A, &c);
		CHECK_EQ(c.tag, i);
		CHECK_EQ(c.len, sizes[i]);
		CHECK(check_fill(c.buf, sizes[i] < 4096 ? sizes[i] : 4096, 20 + i));
		CHECK_OK(discard(&B, c.op_context, 1));
	}
	for (int i = 0; i < 6; i++) {
		EXPECT_COMP(&A, &B, &c);
		free(tx[i]);
	}
	unpair();
}

TEST(options_before_enable_only)
{
	size_t v, len = sizeof v;
	CHECK_OK(bopen(&B, &BUF));
	CHECK_OK(fi_getopt(&B.ep->fid, FI_OPT_ENDPOINT, FI_OPT_BUFFERED_LIMIT, &v, &len));
	CHECK_EQ(len, sizeof v);
	CHECK(v >= 16384);
	CHECK_OK(fi_getopt(&B.ep->fid, FI_OPT_ENDPOINT, FI_OPT_BUFFERED_MIN, &v, &len));
	CHECK_EQ(v, 4096);
	v = 100;
	CHECK_EQ(fi_setopt(&B.ep->fid, FI_OPT_ENDPOINT, FI_OPT_BUFFERED_LIMIT, &v, sizeof v), -FI_EOPBADSTATE);
	end_close(&B);

	/* Before enable: SIZE_MAX means "the maximum", beyond it EMSGSIZE. */
	struct fi_info *h = rf_hints(rf_transport(), FI_EP_RDM);
	h->mode = FI_BUFFERED_RECV;
	struct fi_info *info = NULL;
	CHECK_OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info));
	fi_freeinfo(h);
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_ep *ep;
	CHECK_OK(fi_fabric(info->fabric_attr, &fab, NULL));
	CHECK_OK(fi_domain(fab, info, &dom, NULL));
	CHECK_OK(fi_endpoint(dom, info, &ep, NULL));
	v = SIZE_MAX;
	CHECK_OK(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_BUFFERED_LIMIT, &v, sizeof v));
	size_t max;
	len = sizeof max;
	CHECK_OK(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_BUFFERED_LIMIT, &max, &len));
	CHECK(max >= 16384 && max < SIZE_MAX);
	v = max + 1;
	CHECK_EQ(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_BUFFERED_LIMIT, &v, sizeof v), -FI_EMSGSIZE);
	CHECK_EQ(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_BUFFERED_MIN, &v, sizeof v), -FI_EMSGSIZE);
	CHECK_EQ(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_BUFFERED_MIN, &v, 4), -FI_EINVAL);
	v = 0;
	CHECK_OK(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_BUFFERED_MIN, &v, sizeof v));
	/* Without a receive CQ a buffered endpoint cannot announce anything. */
	struct fid_av *av;
	struct fi_av_attr aa = {.type = FI_AV_MAP};
	CHECK_OK(fi_av_open(dom, &aa, &av, NULL));
	CHECK_OK(fi_ep_bind(ep, &av->fid, 0));
	CHECK_EQ(fi_enable(ep), -FI_ENOCQ);
	CHECK_OK(fi_close(&ep->fid));
	CHECK_OK(fi_close(&av->fid));
	CHECK_OK(fi_close(&dom->fid));
	CHECK_OK(fi_close(&fab->fid));
	fi_freeinfo(info);
}

TEST(small_limit_reports_more)
{
	/* BUFFERED_LIMIT below an eager message: FI_MORE, buf still holds at
	 * least BUFFERED_MIN bytes, the claim gets everything. */
	struct fi_cq_tagged_entry c;
	struct bopts ob = {.buffered = 1, .limit = 100, .min = 50};
	char tx[3000], rx[3000];
	SETUP(&PLAIN, &ob);
	fill(tx, sizeof tx, 4);
	CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, A.peer, NULL), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.flags & FI_MORE);
	CHECK_EQ(c.len, sizeof tx);
	CHECK(check_fill(c.buf, 50, 4));
	struct iovec iov = {rx, sizeof rx};
	CHECK_OK(claim(&B, c.op_context, &iov, 1, 0));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.flags & FI_CLAIM);
	CHECK(c.op_context == NULL); /* the fi_recv_context's context, unchanged */
	CHECK(check_fill(rx, sizeof rx, 4));
	unpair();
}

TEST(invalid_claims_rejected)
{
	struct fi_cq_tagged_entry c;
	char tx[10], rx[10];
	struct iovec iov = {rx, sizeof rx};
	SETUP(&PLAIN, &BUF);
	struct fi_recv_context fake = {B.ep, NULL};
	CHECK_EQ(claim(&B, &fake, &iov, 1, 0), -FI_EINVAL);
	CHECK_EQ(claim(&B, &fake, &iov, 1, 1), -FI_EINVAL);
	CHECK_EQ(discard(&B, &fake, 0), -FI_EINVAL);
	CHECK_EQ(claim(&B, NULL, &iov, 1, 0), -FI_EINVAL);
	CHECK_EQ(discard(&B, (void *)0x10, 1), -FI_EINVAL);
	fill(tx, sizeof tx, 1);
	CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, A.peer, NULL), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	/* A pointer into the message's buffer is not its context either. */
	CHECK_EQ(discard(&B, c.buf, 0), -FI_EINVAL);
	CHECK_EQ(discard(&B, (char *)c.op_context + 8, 0), -FI_EINVAL);
	CHECK_OK(discard(&B, c.op_context, 0));
	CHECK_EQ(discard(&B, c.op_context, 0), -FI_EINVAL);
	CHECK_EQ(claim(&B, c.op_context, &iov, 1, 0), -FI_EINVAL);
	spin(&B, 20);
	CHECK_EQ(fi_cq_read(B.cq, &c, 1), -FI_EAGAIN);
	unpair();
}

TEST(posted_receive_still_matches_first)
{
	/* A receive the application did post takes the message as usual. */
	struct fi_cq_tagged_entry c;
	char tx[64], rx[64];
	SETUP(&PLAIN, &BUF);
	fill(tx, sizeof tx, 2);
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, (void *)0xb1));
	CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, A.peer, NULL), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.op_context == (void *)0xb1);
	CHECK(c.buf == rx);
	CHECK(check_fill(rx, sizeof rx, 2));
	unpair();
}

TEST(without_the_mode_nothing_changes)
{
	struct fi_cq_tagged_entry c;
	char tx[100], rx[100];
	SETUP(&PLAIN, &PLAIN);
	fill(tx, sizeof tx, 9);
	CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, A.peer, NULL), &A, &B));
	for (int i = 0; i < 50; i++)
		poke(&A, &B);
	CHECK_EQ(B.nstash, 0); /* unexpected: held, not reported */
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, (void *)0xb2));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.op_context == (void *)0xb2);
	CHECK(check_fill(rx, sizeof rx, 9));
	size_t v, len = sizeof v;
	CHECK_EQ(fi_getopt(&B.ep->fid, FI_OPT_ENDPOINT, FI_OPT_BUFFERED_LIMIT, &v, &len), -FI_ENOPROTOOPT);
	struct iovec iov = {rx, sizeof rx};
	CHECK_EQ(claim(&B, &c, &iov, 1, 0), -FI_EBADFLAGS);
	unpair();
}

/* Reads B's completions directly (no stash); returns entries read. */
static int read_b(struct fi_cq_tagged_entry *out, int max)
{
	ssize_t r = fi_cq_read(B.cq, out, (size_t)max);
	if (r == -FI_EAVAIL) {
		struct fi_cq_err_entry err = {0};
		fi_cq_readerr(B.cq, &err, 0);
		printf("    unexpected error completion %d (%s)\n", err.err, fi_strerror(err.err));
		return -1;
	}
	return r > 0 ? (int)r : 0;
}

static int drain_a(void)
{
	struct fi_cq_tagged_entry c[64];
	ssize_t r = fi_cq_read(A.cq, c, 64);
	if (r == -FI_EAVAIL) {
		struct fi_cq_err_entry err = {0};
		fi_cq_readerr(A.cq, &err, 0);
		printf("    sender error completion %d (%s) ctx %p\n", err.err, fi_strerror(err.err), err.op_context);
		return -1;
	}
	return r > 0 ? (int)r : 0;
}

TEST(pool_exhaustion_stalls_then_resumes)
{
	/* B holds every message it is shown without releasing any: the pool
	 * (256 KiB) fills, B stops being shown more and A is held back; nothing
	 * is dropped. Then B releases, and every message arrives, in order. */
	enum { N = 3000, SZ = 1000, BIG = 100000, EVERY = 250 };
	setenv("FI_RUSTFAB_BUFFERED_POOL", "256k", 1);
	int r = pair(&PLAIN, &BUF);
	unsetenv("FI_RUSTFAB_BUFFERED_POOL");
	if (r) {
		unpair();
		FAIL_AT("setup: %s", fi_strerror(-r));
	}
	static char small[SZ];
	static char *big[N / EVERY + 1];
	static struct fi_cq_tagged_entry held[N];
	static char *rx_big[N / EVERY + 1];
	int sent = 0, nheld = 0, acked = 0, claimed = 0;
	for (int i = 0; i < N / EVERY + 1; i++) {
		big[i] = malloc(BIG);
		fill(big[i], BIG, 100 + i);
	}
	double idle_since = now_sec(), deadline = now_sec() + 30;
	/* Phase 1: send as fast as A may, never release. */
	while (now_sec() - idle_since < 1.0 && now_sec() < deadline) {
		int moved = 0;
		if (sent < N) {
			ssize_t s;
			if (sent % EVERY == EVERY - 1)
				s = fi_tsend(A.ep, big[sent / EVERY], BIG, NULL, A.peer, (uint64_t)sent, (void *)(uintptr_t)(sent / EVERY + 1));
			else {
				memcpy(small, &sent, sizeof sent);
				s = fi_tinject(A.ep, small, SZ, A.peer, (uint64_t)sent);
			}
			if (s == 0) {
				sent++;
				moved = 1;
			} else
				CHECK_EQ(s, -FI_EAGAIN);
		}
		int a = drain_a();
		CHECK(a >= 0);
		acked += a;
		int k = read_b(&held[nheld], N - nheld);
		CHECK(k >= 0);
		nheld += k;
		if (moved || k || a)
			idle_since = now_sec();
	}
	/* Stalled with part of the stream shown and nothing lost. */
	CHECK(nheld > 50);
	CHECK(nheld < N);
	CHECK((size_t)nheld * SZ <= 2 * 256 * 1024);
	/* Phase 2: release everything, then keep going until all arrived. */
	int next = 0;
	for (int i = 0; i < nheld; i++) {
		CHECK_EQ(held[i].tag, next);
		if (next % EVERY == EVERY - 1)
			CHECK(held[i].flags & FI_MORE);
		else
			CHECK_EQ(memcmp(held[i].buf, &next, sizeof next), 0);
		CHECK_OK(discard(&B, held[i].op_context, 1));
		next++;
	}
	while (next < N && now_sec() < deadline) {
		if (sent < N) {
			ssize_t s;
			if (sent % EVERY == EVERY - 1)
				s = fi_tsend(A.ep, big[sent / EVERY], BIG, NULL, A.peer, (uint64_t)sent, (void *)(uintptr_t)(sent / EVERY + 1));
			else {
				memcpy(small, &sent, sizeof sent);
				s = fi_tinject(A.ep, small, SZ, A.peer, (uint64_t)sent);
			}
			if (s == 0)
				sent++;
			else
				CHECK_EQ(s, -FI_EAGAIN);
		}
		int a = drain_a();
		CHECK(a >= 0);
		acked += a;
		struct fi_cq_tagged_entry c;
		int k = read_b(&c, 1);
		CHECK(k >= 0);
		if (k == 1 && (c.flags & FI_CLAIM)) {
			/* A claim of a large one (below) completed: byte for byte. */
			int idx = (int)(uintptr_t)c.op_context - 1;
			CHECK(idx >= 0 && idx < N / EVERY);
			CHECK_EQ(c.len, BIG);
			CHECK(check_fill(rx_big[idx], BIG, 100 + idx));
			claimed++;
		} else if (k == 1) {
			CHECK_EQ(c.tag, next);
			if (next % EVERY == EVERY - 1) {
				int idx = next / EVERY;
				struct fi_recv_context *rc = c.op_context;
				rc->context = (void *)(uintptr_t)(idx + 1);
				rx_big[idx] = malloc(BIG);
				struct iovec iov = {rx_big[idx], BIG};
				CHECK_OK(claim(&B, rc, &iov, 1, 1));
			} else {
				CHECK_EQ(c.len, SZ);
				CHECK_EQ(memcmp(c.buf, &next, sizeof next), 0);
				CHECK_OK(discard(&B, c.op_context, 1));
			}
			next++;
		}
	}
	while (claimed < N / EVERY && now_sec() < deadline) {
		struct fi_cq_tagged_entry c;
		acked += drain_a();
		if (read_b(&c, 1) == 1) {
			int idx = (int)(uintptr_t)c.op_context - 1;
			CHECK(c.flags & FI_CLAIM);
			CHECK(idx >= 0 && idx < N / EVERY);
			CHECK(check_fill(rx_big[idx], BIG, 100 + idx));
			claimed++;
		}
	}
	CHECK_EQ(next, N);
	CHECK_EQ(claimed, N / EVERY);
	while (acked < N / EVERY && now_sec() < deadline) {
		spin(&B, 1);
		acked += drain_a();
	}
	CHECK_EQ(acked, N / EVERY); /* the large sends all completed */
	for (int i = 0; i < N / EVERY + 1; i++) {
		free(big[i]);
		free(rx_big[i]);
	}
	unpair();
}

TEST(cq_admission_no_overrun)
{
	/* A small CQ: reports wait for room instead of overrunning it. */
	enum { N = 60 };
	struct bopts ob = {.buffered = 1, .rx_size = 4, .tx_size = 4, .cq_size = 8};
	struct fi_cq_tagged_entry c;
	char tx[N][32];
	SETUP(&PLAIN, &ob);
	int sent = 0, got = 0;
	double deadline = now_sec() + 20;
	while (sent < N && now_sec() < deadline) {
		fill(tx[sent], 32, sent);
		ssize_t s = fi_tsend(A.ep, tx[sent], 32, NULL, A.peer, (uint64_t)sent, NULL);
		if (s == 0)
			sent++;
		drain_a();
		spin(&B, 5); /* progress B without reading it */
	}
	while (got < N && now_sec() < deadline) {
		drain_a();
		int k = read_b(&c, 1);
		CHECK(k >= 0);
		if (k == 1) {
			CHECK_EQ(c.tag, got);
			CHECK(check_fill(c.buf, 32, got));
			CHECK_OK(discard(&B, c.op_context, 1));
			got++;
		}
	}
	CHECK_EQ(got, N);
	unpair();
}

/* Child: an ordinary sender of one large tagged message; progresses until
 * killed. */
static int child_sender(int rfd, int wfd, size_t len)
{
	struct end e;
	if (bopen(&e, &PLAIN))
		return 10;
	if (write(wfd, &e.addrlen, sizeof e.addrlen) != sizeof e.addrlen || write(wfd, e.addr, e.addrlen) != (ssize_t)e.addrlen)
		return 11;
	char peer[128];
	size_t plen;
	if (read(rfd, &plen, sizeof plen) != sizeof plen || plen > sizeof peer || read(rfd, peer, plen) != (ssize_t)plen)
		return 12;
	if (fi_av_insert(e.av, peer, 1, &e.peer, 0, NULL) != 1)
		return 13;
	char *buf = malloc(len);
	fill(buf, len, 77);
	if (POST(fi_tsend(e.ep, buf, len, NULL, e.peer, 0x99, NULL), &e, NULL))
		return 14;
	for (;;) {
		struct fi_cq_tagged_entry c;
		fi_cq_read(e.cq, &c, 1);
		usleep(100);
	}
}

TEST(peer_killed_before_claim)
{
	/* The sender dies while B holds its large message (FI_MORE): the claim
	 * completes exactly once, in error, instead of hanging. */
	int p2c[2], c2p[2];
	size_t len = 4u << 20;
	CHECK(pipe(p2c) == 0 && pipe(c2p) == 0);
	pid_t pid = rf_fork();
	if (pid == 0)
		_exit(child_sender(p2c[0], c2p[1], len));
	CHECK_OK(bopen(&B, &BUF));
	char peer[128];
	size_t plen;
	CHECK_EQ(read(c2p[0], &plen, sizeof plen), (ssize_t)sizeof plen);
	CHECK_EQ(read(c2p[0], peer, plen), (ssize_t)plen);
	CHECK_EQ(fi_av_insert(B.av, peer, 1, &B.peer, 0, NULL), 1);
	CHECK_EQ(write(p2c[1], &B.addrlen, sizeof B.addrlen), (ssize_t)sizeof B.addrlen);
	CHECK_EQ(write(p2c[1], B.addr, B.addrlen), (ssize_t)B.addrlen);
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	CHECK_EQ(wait_comp(&B, NULL, &c, NULL, NULL, 20), 1);
	CHECK(c.flags & FI_MORE);
	CHECK_EQ(c.len, len);
	CHECK_EQ(c.tag, 0x99);
	CHECK(check_fill(c.buf, 4096, 77));
	kill(pid, SIGKILL);
	int st;
	waitpid(pid, &st, 0);
	struct fi_recv_context *rc = c.op_context;
	rc->context = (void *)0xdead;
	char *rx = calloc(1, len);
	struct iovec iov = {rx, len};
	CHECK_OK(claim(&B, rc, &iov, 1, 1));
	memset(&err, 0, sizeof err);
	double t0 = now_sec();
	CHECK_EQ(wait_comp(&B, NULL, &c, &err, NULL, 10), -FI_EAVAIL);
	CHECK(now_sec() - t0 < 5);
	CHECK_EQ(err.err, FI_ECONNRESET);
	CHECK(err.op_context == (void *)0xdead);
	CHECK(err.flags & FI_CLAIM);
	/* Exactly once. */
	spin(&B, 50);
	CHECK_EQ(fi_cq_read(B.cq, &c, 1), -FI_EAGAIN);
	free(rx);
	end_close(&B);
	close(p2c[0]);
	close(p2c[1]);
	close(c2p[0]);
	close(c2p[1]);
}

TEST(sender_closed_before_claim)
{
	/* The sender closes its endpoint while B holds its large message: the
	 * claim completes in error, a small message it sent is still claimable. */
	struct fi_cq_tagged_entry c, big, small;
	struct fi_cq_err_entry err;
	size_t len = 1u << 20;
	SETUP(&PLAIN, &BUF);
	char *tx = malloc(len), *rx = malloc(len);
	char stx[100], srx[100];
	fill(tx, len, 12);
	fill(stx, sizeof stx, 13);
	CHECK_OK(POST(fi_send(A.ep, tx, len, NULL, A.peer, NULL), &A, &B));
	CHECK_OK(POST(fi_send(A.ep, stx, sizeof stx, NULL, A.peer, NULL), &A, &B));
	EXPECT_COMP(&B, &A, &big);
	EXPECT_COMP(&B, &A, &small);
	CHECK(big.flags & FI_MORE);
	CHECK_EQ(small.len, sizeof stx);
	end_close(&A);
	spin(&B, 200);
	struct iovec iov = {rx, len};
	CHECK_OK(claim(&B, big.op_context, &iov, 1, 0));
	memset(&err, 0, sizeof err);
	CHECK_EQ(wait_comp(&B, NULL, &c, &err, NULL, 10), -FI_EAVAIL);
	CHECK_EQ(err.err, FI_ECONNRESET);
	CHECK(err.flags & FI_CLAIM);
	struct iovec siov = {srx, sizeof srx};
	CHECK_OK(claim(&B, small.op_context, &siov, 1, 0));
	CHECK_EQ(wait_comp(&B, NULL, &c, NULL, NULL, 10), 1);
	CHECK(c.flags & FI_CLAIM);
	CHECK(check_fill(srx, sizeof srx, 13));
	free(tx);
	free(rx);
	unpair();
}

TEST(receiver_closed_while_holding)
{
	/* B closes while holding a large message: its sender does not wait
	 * forever, the send completes in error. */
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	size_t len = 1u << 20;
	SETUP(&PLAIN, &BUF);
	char *tx = malloc(len);
	fill(tx, len, 14);
	CHECK_OK(POST(fi_send(A.ep, tx, len, NULL, A.peer, (void *)0xa9), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.flags & FI_MORE);
	end_close(&B);
	memset(&err, 0, sizeof err);
	CHECK_EQ(wait_comp(&A, NULL, &c, &err, NULL, 10), -FI_EAVAIL);
	CHECK(err.op_context == (void *)0xa9);
	/* FI_ECANCELED from our goodbye; over shm a receiver that never sent to
	 * A before may close its new ring slot before A adopts it, and A then
	 * learns of the closed endpoint instead (FI_ECONNRESET). */
	CHECK(err.err == FI_ECANCELED || err.err == FI_ECONNRESET);
	free(tx);
	unpair();
}

TEST(unclaimed_large_message_blocks_nobody)
{
	/* A's large message stays unclaimed (only its prefix is held): A's
	 * later messages and another peer's keep arriving meanwhile. */
	static struct end C;
	struct fi_cq_tagged_entry c, big;
	size_t len = 2u << 20;
	SETUP(&PLAIN, &BUF);
	CHECK_OK(bopen(&C, &PLAIN));
	CHECK_OK(ends_connect(&C, &B)); /* C.peer = B; B.peer now names C */
	char *tx = malloc(len), *rx = malloc(len), small[8][64];
	fill(tx, len, 30);
	CHECK_OK(POST(fi_tsend(A.ep, tx, len, NULL, A.peer, 1000, (void *)0xab), &A, &B));
	EXPECT_COMP(&B, &A, &big);
	CHECK(big.flags & FI_MORE);
	for (int i = 0; i < 8; i++) {
		fill(small[i], 64, 40 + i);
		struct end *from = i % 2 ? &C : &A;
		CHECK_OK(POST(fi_tsend(from->ep, small[i], 64, NULL, from->peer, (uint64_t)i, NULL), from, &B));
	}
	int seen = 0, last_a = -1, last_c = -1;
	for (int i = 0; i < 8; i++) {
		c.tag = 99;
		double d = now_sec() + 10;
		while (fi_cq_read(B.cq, &c, 1) != 1 && now_sec() < d) {
			poke1(&A);
			poke1(&C);
		}
		CHECK(c.tag < 8);
		CHECK(check_fill(c.buf, 64, 40 + (unsigned)c.tag));
		/* each sender's messages in the order it sent them */
		if (c.tag % 2) {
			CHECK((int)c.tag > last_c);
			last_c = (int)c.tag;
		} else {
			CHECK((int)c.tag > last_a);
			last_a = (int)c.tag;
		}
		CHECK_OK(discard(&B, c.op_context, 1));
		seen++;
	}
	CHECK_EQ(seen, 8);
	/* The held one is still claimable, intact. */
	struct iovec iov = {rx, len};
	CHECK_OK(claim(&B, big.op_context, &iov, 1, 1));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.flags & FI_CLAIM);
	CHECK_EQ(c.tag, 1000);
	CHECK(check_fill(rx, len, 30));
	free(tx);
	free(rx);
	end_close(&C);
	unpair();
}

TEST(zero_min_reports_at_once)
{
	/* FI_OPT_BUFFERED_MIN = 0: a large message is reported with FI_MORE as
	 * soon as its request arrives, no data held; the claim gets it all. */
	struct fi_cq_tagged_entry c;
	struct bopts ob = {.buffered = 1, .set_min = 1, .min = 0};
	size_t len = 300000;
	SETUP(&PLAIN, &ob);
	char *tx = malloc(len), *rx = malloc(len);
	fill(tx, len, 50);
	CHECK_OK(POST(fi_send(A.ep, tx, len, NULL, A.peer, NULL), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.flags & FI_MORE);
	CHECK_EQ(c.len, len);
	struct iovec iov = {rx, len};
	CHECK_OK(claim(&B, c.op_context, &iov, 1, 0));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.flags & FI_CLAIM);
	CHECK(check_fill(rx, len, 50));
	free(tx);
	free(rx);
	unpair();
}

TEST(variable_messages_beyond_max_msg_size)
{
	/* FI_VARIABLE_MSG: the same mechanics without the mode bit, and no
	 * max_msg_size limit (fi_msg(3) "Variable Length Messages"). */
	struct fi_cq_tagged_entry c;
	struct bopts ov = {.caps = FI_MSG | FI_VARIABLE_MSG, .max_msg_size = 65536};
	size_t len = (1u << 20) + 5;
	SETUP(&ov, &ov);
	CHECK(B.info->caps & FI_VARIABLE_MSG);
	CHECK(!(B.info->mode & FI_BUFFERED_RECV));
	char *tx = malloc(len), *rx = malloc(len);
	fill(tx, len, 15);
	CHECK_OK(POST(fi_send(A.ep, tx, len, NULL, A.peer, (void *)0xa7), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.flags & FI_MORE);
	CHECK_EQ(c.len, len);
	CHECK(check_fill(c.buf, 4096, 15));
	struct iovec iov = {rx, len};
	CHECK_OK(claim(&B, c.op_context, &iov, 1, 0));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.flags & FI_CLAIM);
	CHECK_EQ(c.len, len);
	CHECK(check_fill(rx, len, 15));
	EXPECT_COMP(&A, &B, &c);
	CHECK(c.op_context == (void *)0xa7);
	free(tx);
	free(rx);
	unpair();
}

TEST(too_large_for_the_receiver_fails_only_that_send)
{
	/* A variable-message sender, a receiver with a 64 KiB maximum: the
	 * send completes with FI_EMSGSIZE, the next message still arrives. */
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	struct bopts ov = {.caps = FI_MSG | FI_VARIABLE_MSG};
	struct bopts small = {.buffered = 1, .max_msg_size = 65536};
	size_t len = 1u << 20;
	SETUP(&ov, &small);
	char *tx = malloc(len);
	fill(tx, len, 16);
	CHECK_OK(POST(fi_send(A.ep, tx, len, NULL, A.peer, (void *)0xa6), &A, &B));
	memset(&err, 0, sizeof err);
	CHECK_EQ(wait_comp(&A, &B, &c, &err, NULL, 10), -FI_EAVAIL);
	CHECK_EQ(err.err, FI_EMSGSIZE);
	CHECK(err.op_context == (void *)0xa6);
	CHECK_OK(POST(fi_send(A.ep, tx, 100, NULL, A.peer, NULL), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	CHECK_EQ(c.len, 100);
	CHECK(check_fill(c.buf, 100, 16));
	CHECK_OK(discard(&B, c.op_context, 0));
	/* Without FI_VARIABLE_MSG the limit is checked at post time. */
	CHECK_EQ(fi_send(B.ep, tx, len, NULL, B.peer, NULL), -FI_EMSGSIZE);
	free(tx);
	unpair();
}

TEST(variable_msg_only_when_asked)
{
	struct fi_info *h = rf_hints(rf_transport(), FI_EP_RDM), *info = NULL;
	CHECK_OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info));
	CHECK(!(info->caps & FI_VARIABLE_MSG)); /* never implied */
	fi_freeinfo(info);
	h->caps = FI_TAGGED | FI_VARIABLE_MSG;
	CHECK_OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info));
	CHECK(info->caps & FI_VARIABLE_MSG);
	CHECK(info->rx_attr->caps & FI_VARIABLE_MSG);
	fi_freeinfo(info);
	fi_freeinfo(h);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	RUN(getinfo_keeps_mode_only_when_asked);
	RUN(small_processed_in_place_then_discarded);
	RUN(large_more_claimed_into_iov);
	RUN(large_more_claimed_into_iov_without_cma);
	RUN(claim_truncates_like_a_receive);
	RUN(large_claim_truncated);
	RUN(discarded_large_message_completes_the_sender);
	RUN(reports_keep_the_senders_order);
	RUN(options_before_enable_only);
	RUN(small_limit_reports_more);
	RUN(invalid_claims_rejected);
	RUN(posted_receive_still_matches_first);
	RUN(without_the_mode_nothing_changes);
	RUN(pool_exhaustion_stalls_then_resumes);
	RUN(cq_admission_no_overrun);
	RUN(peer_killed_before_claim);
	RUN(sender_closed_before_claim);
	RUN(receiver_closed_while_holding);
	RUN(unclaimed_large_message_blocks_nobody);
	RUN(zero_min_reports_at_once);
	RUN(variable_messages_beyond_max_msg_size);
	RUN(too_large_for_the_receiver_fails_only_that_send);
	RUN(variable_msg_only_when_asked);
	return harness_done();
}
