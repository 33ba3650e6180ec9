/*
 * Shared contexts (fi_endpoint(3) SHARED CONTEXTS): fi_srx_context,
 * fi_stx_context and endpoints opened with FI_SHARED_CONTEXT, in one
 * process (one domain, one AV) over RF_TRANSPORT (shm, tcp, auto).
 *
 * Two receivers R0, R1 share one receive context (srx) and one receive CQ;
 * two senders S0, S1 share one transmit context (stx). Checked: a message
 * to either receiver takes the srx's receives in posting order, whether the
 * receives were posted before or after the messages came; the bytes, the
 * sender (FI_SOURCE) and the tag of each; a receive posted on a member goes
 * to the srx; the stx's depth is shared by its endpoints; fi_getinfo; and
 * the error codes of the calls fi_endpoint(3) restricts.
 */
#include "rdm_common.h"

#define NEND 2
#define MSG_LEN 64
#define BIG (1 << 20)

static struct fi_info *info_rx, *info_tx;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_ep *srx;
static struct fid_stx *stx;
static struct fid_ep *R[NEND], *S[NEND];
static struct fid_cq *rxcq, *rtxcq, *txcq, *srxcq;
static fi_addr_t Raddr[NEND], Saddr[NEND];

/* The info of an endpoint of `type` with `caps` and a shared receive
 * (`rx`) or transmit context. */
static struct fi_info *shared_info(int rx, enum fi_ep_type type, uint64_t caps)
{
	struct fi_info *hints = fi_allocinfo(), *fi = NULL;
	if (!hints)
		return NULL;
	hints->fabric_attr->prov_name = strdup("rustfab");
	hints->domain_attr->name = strdup(rf_transport());
	hints->ep_attr->type = type;
	hints->caps = caps;
	hints->domain_attr->av_type = FI_AV_TABLE;
	if (rx)
		hints->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	else
		hints->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT;
	int ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &fi);
	fi_freeinfo(hints);
	return ret ? NULL : fi;
}

static int cq_open(struct fid_cq **cq)
{
	struct fi_cq_attr attr = {0};
	attr.format = FI_CQ_FORMAT_TAGGED;
	return fi_cq_open(domain, &attr, cq, NULL);
}

static int ep_open(struct fi_info *fi, struct fid_ep **ep, int rx)
{
	int ret;
	if ((ret = fi_endpoint(domain, fi, ep, NULL)))
		return ret;
	if ((ret = fi_ep_bind(*ep, &av->fid, 0)))
		return ret;
	if (rx) {
		if ((ret = fi_ep_bind(*ep, &srx->fid, 0)))
			return ret;
		if ((ret = fi_ep_bind(*ep, &rxcq->fid, FI_RECV)) || (ret = fi_ep_bind(*ep, &rtxcq->fid, FI_TRANSMIT)))
			return ret;
	} else {
		if ((ret = fi_ep_bind(*ep, &stx->fid, 0)))
			return ret;
		if ((ret = fi_ep_bind(*ep, &txcq->fid, FI_TRANSMIT)) || (ret = fi_ep_bind(*ep, &srxcq->fid, FI_RECV)))
			return ret;
	}
	return fi_enable(*ep);
}

static int insert(struct fid_ep *ep, fi_addr_t *a)
{
	char name[128];
	size_t len = sizeof(name);
	int ret = fi_getname(&ep->fid, name, &len);
	if (ret)
		return ret;
	return fi_av_insert(av, name, 1, a, 0, NULL) == 1 ? 0 : -FI_EINVAL;
}

/* Opens the domain, the contexts (stx of depth `stx_size`, 0: default)
 * and the four endpoints. */
static int world_open(size_t stx_size)
{
	int ret;
	info_rx = shared_info(1, FI_EP_RDM, FI_MSG | FI_TAGGED | FI_SOURCE);
	info_tx = shared_info(0, FI_EP_RDM, FI_MSG | FI_TAGGED | FI_SOURCE);
	if (!info_rx || !info_tx)
		return -FI_ENODATA;
	if ((ret = fi_fabric(info_rx->fabric_attr, &fabric, NULL)) || (ret = fi_domain(fabric, info_rx, &domain, NULL)))
		return ret;
	struct fi_av_attr av_attr = {0};
	av_attr.type = FI_AV_TABLE;
	if ((ret = fi_av_open(domain, &av_attr, &av, NULL)))
		return ret;
	if ((ret = fi_srx_context(domain, info_rx->rx_attr, &srx, NULL)))
		return ret;
	struct fi_tx_attr tx_attr = *info_tx->tx_attr;
	tx_attr.size = stx_size;
	if ((ret = fi_stx_context(domain, &tx_attr, &stx, NULL)))
		return ret;
	if ((ret = cq_open(&rxcq)) || (ret = cq_open(&rtxcq)) || (ret = cq_open(&txcq)) || (ret = cq_open(&srxcq)))
		return ret;
	for (int i = 0; i < NEND; i++) {
		if ((ret = ep_open(info_rx, &R[i], 1)) || (ret = ep_open(info_tx, &S[i], 0)))
			return ret;
	}
	for (int i = 0; i < NEND; i++) {
		if ((ret = insert(R[i], &Raddr[i])) || (ret = insert(S[i], &Saddr[i])))
			return ret;
	}
	return 0;
}

static void world_close(void)
{
	for (int i = 0; i < NEND; i++) {
		if (R[i])
			fi_close(&R[i]->fid);
		if (S[i])
			fi_close(&S[i]->fid);
		R[i] = S[i] = NULL;
	}
	struct fid **f[] = {(struct fid **)&srx, (struct fid **)&stx, (struct fid **)&rxcq, (struct fid **)&rtxcq,
			    (struct fid **)&txcq, (struct fid **)&srxcq, (struct fid **)&av, (struct fid **)&domain,
			    (struct fid **)&fabric};
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if (*f[i]) {
			/* Each object starts with its struct fid. */
			fi_close(*f[i]);
			*f[i] = NULL;
		}
	}
	fi_freeinfo(info_rx);
	fi_freeinfo(info_tx);
	info_rx = info_tx = NULL;
}

/* One entry of `cq` with its source; 1, -FI_EAVAIL (error in *err) or 0
 * (timed out). Reads of the other CQs progress the domain too. */
static int cq_wait_from(struct fid_cq *cq, struct fi_cq_tagged_entry *e, fi_addr_t *src, struct fi_cq_err_entry *err)
{
	double deadline = now_sec() + 10 * rf_time_scale();
	while (now_sec() < deadline) {
		fi_addr_t a = FI_ADDR_NOTAVAIL;
		ssize_t r = fi_cq_readfrom(cq, e, 1, &a);
		if (r == 1) {
			if (src)
				*src = a;
			return 1;
		}
		if (r == -FI_EAVAIL) {
			struct fi_cq_err_entry tmp = {0};
			if (!err)
				err = &tmp;
			return fi_cq_readerr(cq, err, 0) == 1 ? -FI_EAVAIL : -FI_EOTHER;
		}
		if (r != -FI_EAGAIN)
			return (int)r;
	}
	return 0;
}

/* Progress for a while: every CQ read, nothing expected on rxcq. */
static int rx_quiet(void)
{
	struct fi_cq_tagged_entry e;
	for (int i = 0; i < 3000; i++) {
		if (fi_cq_read(rxcq, &e, 1) != -FI_EAGAIN)
			return 0;
		(void)fi_cq_read(txcq, &e, 0);
	}
	return 1;
}

#define RETRY(expr)                                                    \
	({                                                             \
		ssize_t _r;                                            \
		double _d = now_sec() + 10 * rf_time_scale();          \
		while ((_r = (expr)) == -FI_EAGAIN && now_sec() < _d) \
			(void)fi_cq_read(txcq, NULL, 0);                \
		_r;                                                    \
	})

/* Waits for `n` send completions on the senders' CQ. */
static int sends_done(int n)
{
	struct fi_cq_tagged_entry e;
	for (int i = 0; i < n; i++)
		if (cq_wait_from(txcq, &e, NULL, NULL) != 1)
			return 0;
	return 1;
}

static char sbuf[8][MSG_LEN], rbuf[8][MSG_LEN];

/* The message `k`: from sender s to receiver r. */
static void make_msg(int k, int s, int r)
{
	memset(sbuf[k], 0, MSG_LEN);
	snprintf(sbuf[k], MSG_LEN, "msg %d S%d->R%d", k, s, r);
}

/* Receive completion `e` (from `src`): the message in buffer `k` (its
 * context), whose text names the sender `src` is. Returns the message's
 * number, or -1. */
static int check_rx(const struct fi_cq_tagged_entry *e, fi_addr_t src)
{
	int k = (int)((uintptr_t)e->op_context - 1);
	if (k < 0 || k >= 8 || e->len != MSG_LEN || (e->buf != NULL && e->buf != rbuf[k]))
		return -1;
	int m, s, r;
	if (sscanf(rbuf[k], "msg %d S%d->R%d", &m, &s, &r) != 3 || s < 0 || s >= NEND)
		return -1;
	if (memcmp(rbuf[k], sbuf[m], MSG_LEN) != 0 || src != Saddr[s])
		return -1;
	return m;
}

TEST(getinfo_says_what_is_offered)
{
	struct fi_info *plain = rf_getinfo(rf_transport(), FI_EP_RDM, FI_MSG);
	CHECK(plain != NULL);
	if (plain) {
		/* Not asked: none (MPI libraries see what they saw before). */
		CHECK_EQ(plain->domain_attr->max_ep_stx_ctx, 0);
		CHECK_EQ(plain->domain_attr->max_ep_srx_ctx, 0);
		fi_freeinfo(plain);
	}
	enum fi_ep_type types[] = {FI_EP_RDM, FI_EP_MSG, FI_EP_DGRAM};
	for (int t = 0; t < 3; t++) {
		for (int rx = 0; rx < 2; rx++) {
			struct fi_info *fi = shared_info(rx, types[t], FI_MSG);
			CHECK(fi != NULL);
			if (!fi)
				continue;
			CHECK_EQ(fi->domain_attr->max_ep_stx_ctx, 1);
			CHECK_EQ(fi->domain_attr->max_ep_srx_ctx, 1);
			CHECK_EQ(rx ? fi->ep_attr->rx_ctx_cnt : fi->ep_attr->tx_ctx_cnt, FI_SHARED_CONTEXT);
			/* Not a scalable endpoint's contexts. */
			CHECK_EQ(fi->domain_attr->max_ep_tx_ctx, 1);
			fi_freeinfo(fi);
		}
	}
}

/* Receives posted on the srx first; S0 and S1 each send to R0 and R1. Each
 * message takes the first receive still posted: the k-th completion is the
 * k-th receive posted, holding a whole message from the sender FI_SOURCE
 * names; every message arrives once. */
TEST(srx_receives_taken_in_posting_order)
{
	CHECK_OK(world_open(0));
	for (int k = 0; k < 4; k++)
		CHECK_OK(fi_recv(srx, rbuf[k], MSG_LEN, NULL, FI_ADDR_UNSPEC, (void *)(uintptr_t)(k + 1)));
	/* fi_rx_size_left (deprecated in the header, still in the table). */
	CHECK_EQ(srx->ops->rx_size_left(srx), (ssize_t)info_rx->rx_attr->size - 4);
	int k = 0;
	for (int s = 0; s < NEND; s++)
		for (int r = 0; r < NEND; r++, k++) {
			make_msg(k, s, r);
			CHECK_EQ(RETRY(fi_send(S[s], sbuf[k], MSG_LEN, NULL, Raddr[r], NULL)), 0);
		}
	int seen = 0;
	for (int i = 0; i < 4; i++) {
		struct fi_cq_tagged_entry e;
		fi_addr_t src;
		CHECK_EQ(cq_wait_from(rxcq, &e, &src, NULL), 1);
		CHECK_EQ((uintptr_t)e.op_context, (uintptr_t)(i + 1));
		int m = check_rx(&e, src);
		CHECK(m >= 0);
		if (m >= 0)
			seen |= 1 << m;
	}
	CHECK_EQ(seen, 0xf);
	CHECK(sends_done(4));
	/* Nothing for the senders' receive CQ, nothing more here. */
	struct fi_cq_tagged_entry e;
	CHECK_EQ(fi_cq_read(srxcq, &e, 1), -FI_EAGAIN);
	CHECK(rx_quiet());
	world_close();
}

/* The messages come first (unexpected at R0 and R1), the receives after:
 * each receive posted on the srx takes a message, those to one receiver in
 * the order they were sent. */
TEST(srx_takes_unexpected_messages)
{
	CHECK_OK(world_open(0));
	int order[4][2] = {{0, 0}, {1, 1}, {1, 0}, {0, 0}}; /* (sender, receiver) */
	for (int k = 0; k < 4; k++) {
		make_msg(k, order[k][0], order[k][1]);
		CHECK_EQ(RETRY(fi_send(S[order[k][0]], sbuf[k], MSG_LEN, NULL, Raddr[order[k][1]], NULL)), 0);
	}
	CHECK(sends_done(4));
	CHECK(rx_quiet());
	int seen = 0, pos[4] = {-1, -1, -1, -1};
	for (int k = 0; k < 4; k++) {
		memset(rbuf[k], 0, MSG_LEN);
		CHECK_OK(fi_recv(srx, rbuf[k], MSG_LEN, NULL, FI_ADDR_UNSPEC, (void *)(uintptr_t)(k + 1)));
		struct fi_cq_tagged_entry e;
		fi_addr_t src;
		CHECK_EQ(cq_wait_from(rxcq, &e, &src, NULL), 1);
		int m = check_rx(&e, src);
		CHECK(m >= 0);
		if (m >= 0) {
			seen |= 1 << m;
			pos[m] = k;
		}
	}
	CHECK_EQ(seen, 0xf);
	/* Messages 0 and 3 both went S0 -> R0: 0 first. */
	CHECK(pos[0] < pos[3]);
	CHECK(rx_quiet());
	world_close();
}

/* Tagged receives on the srx pick their message by tag across receivers;
 * a receive posted on a member endpoint is the srx's (it takes a message
 * sent to the other member). */
TEST(srx_tags_and_member_posts)
{
	CHECK_OK(world_open(0));
	make_msg(0, 0, 1);
	make_msg(1, 1, 0);
	CHECK_OK(fi_trecv(srx, rbuf[1], MSG_LEN, NULL, FI_ADDR_UNSPEC, 0xb, 0, (void *)2));
	CHECK_OK(fi_trecv(R[0], rbuf[0], MSG_LEN, NULL, FI_ADDR_UNSPEC, 0xa, 0, (void *)1));
	CHECK_EQ(RETRY(fi_tsend(S[0], sbuf[0], MSG_LEN, NULL, Raddr[1], 0xa, NULL)), 0);
	CHECK_EQ(RETRY(fi_tsend(S[1], sbuf[1], MSG_LEN, NULL, Raddr[0], 0xb, NULL)), 0);
	int seen = 0;
	for (int i = 0; i < 2; i++) {
		struct fi_cq_tagged_entry e;
		fi_addr_t src;
		CHECK_EQ(cq_wait_from(rxcq, &e, &src, NULL), 1);
		int m = check_rx(&e, src);
		CHECK(m >= 0);
		CHECK_EQ(e.tag, m == 0 ? 0xa : 0xb);
		if (m >= 0)
			seen |= 1 << m;
	}
	CHECK_EQ(seen, 3);
	CHECK(sends_done(2));
	world_close();
}

/* fi_cancel on the srx: the receive completes with FI_ECANCELED on the
 * members' receive CQ; a second cancel finds nothing. */
TEST(srx_cancel)
{
	CHECK_OK(world_open(0));
	CHECK_OK(fi_recv(srx, rbuf[0], MSG_LEN, NULL, FI_ADDR_UNSPEC, (void *)7));
	CHECK_EQ(fi_cancel(&srx->fid, (void *)7), 0);
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = {0};
	CHECK_EQ(cq_wait_from(rxcq, &e, NULL, &err), -FI_EAVAIL);
	CHECK_EQ(err.err, FI_ECANCELED);
	CHECK_EQ((uintptr_t)err.op_context, 7);
	CHECK_EQ(fi_cancel(&srx->fid, (void *)7), -FI_ENOENT);
	world_close();
}

/* The stx's depth (4) is the senders' together: with nobody receiving
 * (1 MiB messages wait as rendezvous requests), S0 and S1 post 4 sends
 * between them, the fifth is -FI_EAGAIN; once receives take them, the
 * senders can send again. */
TEST(stx_depth_is_shared)
{
	CHECK_OK(world_open(4));
	char *big = calloc(8, BIG), *in = calloc(8, BIG);
	CHECK(big && in);
	if (!big || !in)
		return;
	int posted = 0;
	ssize_t r = 0;
	for (int i = 0; i < 8; i++) {
		memset(big + (size_t)i * BIG, 'a' + i, BIG);
		r = fi_send(S[i % 2], big + (size_t)i * BIG, BIG, NULL, Raddr[0], NULL);
		if (r)
			break;
		posted++;
		(void)fi_cq_read(txcq, NULL, 0);
	}
	CHECK_EQ(posted, 4);
	CHECK_EQ(r, -FI_EAGAIN);
	/* Still none after more progress. */
	CHECK(rx_quiet());
	CHECK_EQ(fi_send(S[1], big, BIG, NULL, Raddr[1], NULL), -FI_EAGAIN);
	for (int k = 0; k < 4; k++)
		CHECK_OK(fi_recv(srx, in + (size_t)k * BIG, BIG, NULL, FI_ADDR_UNSPEC, (void *)(uintptr_t)(k + 1)));
	for (int k = 0; k < 4; k++) {
		struct fi_cq_tagged_entry e;
		fi_addr_t src;
		CHECK_EQ(cq_wait_from(rxcq, &e, &src, NULL), 1);
		CHECK_EQ(e.len, BIG);
		int j = (int)((uintptr_t)e.op_context - 1);
		char c = in[(size_t)j * BIG];
		/* Message i came from S[i % 2]. */
		CHECK(c >= 'a' && c < 'a' + 4);
		CHECK_EQ(src, Saddr[(c - 'a') % 2]);
		CHECK_EQ(in[(size_t)j * BIG + BIG - 1], c);
	}
	CHECK(sends_done(4));
	CHECK_EQ(RETRY(fi_send(S[1], big, MSG_LEN, NULL, Raddr[1], NULL)), 0);
	CHECK_OK(fi_recv(srx, in, BIG, NULL, FI_ADDR_UNSPEC, NULL));
	struct fi_cq_tagged_entry e;
	CHECK_EQ(cq_wait_from(rxcq, &e, NULL, NULL), 1);
	CHECK(sends_done(1));
	free(big);
	free(in);
	world_close();
}

/* A receive into a NULL buffer holds nothing whatever its length: a
 * 0-byte message completes, a longer one is truncated (FI_ETRUNC), nothing
 * written (fabtests' fi_shared_ctx -e msg posts such receives). */
TEST(null_receive_buffer_holds_nothing)
{
	CHECK_OK(world_open(0));
	CHECK_OK(fi_recv(srx, NULL, MSG_LEN, NULL, FI_ADDR_UNSPEC, (void *)1));
	CHECK_EQ(RETRY(fi_send(S[0], NULL, 0, NULL, Raddr[0], NULL)), 0);
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = {0};
	CHECK_EQ(cq_wait_from(rxcq, &e, NULL, NULL), 1);
	CHECK_EQ((uintptr_t)e.op_context, 1);
	CHECK_EQ(e.len, 0);
	CHECK_OK(fi_recv(R[1], NULL, MSG_LEN, NULL, FI_ADDR_UNSPEC, (void *)2));
	make_msg(0, 1, 1);
	CHECK_EQ(RETRY(fi_send(S[1], sbuf[0], 8, NULL, Raddr[1], NULL)), 0);
	CHECK_EQ(cq_wait_from(rxcq, &e, NULL, &err), -FI_EAVAIL);
	CHECK_EQ(err.err, FI_ETRUNC);
	CHECK_EQ((uintptr_t)err.op_context, 2);
	/* A send from NULL with a length is refused. */
	CHECK_EQ(fi_send(S[0], NULL, 8, NULL, Raddr[0], NULL), -FI_EINVAL);
	CHECK(sends_done(2));
	world_close();
}

/* What fi_endpoint(3) restricts. */
TEST(errors)
{
	CHECK_OK(world_open(0));
	struct fi_info *plain = rf_getinfo(rf_transport(), FI_EP_RDM, FI_MSG);
	CHECK(plain != NULL);
	struct fid_ep *ep = NULL, *ep2 = NULL, *srx2 = NULL;
	/* An endpoint that did not ask for shared contexts takes none. */
	CHECK_OK(fi_endpoint(domain, plain, &ep, NULL));
	CHECK_EQ(fi_ep_bind(ep, &srx->fid, 0), -FI_EINVAL);
	CHECK_EQ(fi_ep_bind(ep, &stx->fid, 0), -FI_EINVAL);
	CHECK_OK(fi_close(&ep->fid));
	/* One asking for a shared receive context: not a transmit one, one
	 * srx, no flags, and it must have one when enabled. */
	CHECK_OK(fi_endpoint(domain, info_rx, &ep2, NULL));
	CHECK_EQ(fi_ep_bind(ep2, &stx->fid, 0), -FI_EINVAL);
	CHECK_EQ(fi_ep_bind(ep2, &srx->fid, FI_RECV), -FI_EBADFLAGS);
	CHECK_OK(fi_ep_bind(ep2, &av->fid, 0));
	CHECK_OK(fi_ep_bind(ep2, &rxcq->fid, FI_RECV));
	CHECK_OK(fi_ep_bind(ep2, &rtxcq->fid, FI_TRANSMIT));
	CHECK_EQ(fi_enable(ep2), -FI_EINVAL);
	CHECK_OK(fi_srx_context(domain, NULL, &srx2, NULL));
	CHECK_OK(fi_ep_bind(ep2, &srx2->fid, 0));
	CHECK_EQ(fi_ep_bind(ep2, &srx->fid, 0), -FI_EINVAL);
	/* A receive posted on an srx with no enabled endpoint. */
	CHECK_EQ(fi_recv(srx2, rbuf[0], MSG_LEN, NULL, FI_ADDR_UNSPEC, NULL), -FI_EOPBADSTATE);
	CHECK_OK(fi_enable(ep2));
	CHECK_EQ(fi_ep_bind(ep2, &srx->fid, 0), -FI_EOPBADSTATE);
	/* Sends on an srx; closing contexts still bound. */
	CHECK_EQ(fi_send(srx2, sbuf[0], 1, NULL, Raddr[0], NULL), -FI_ENOSYS);
	CHECK_EQ(fi_close(&srx2->fid), -FI_EBUSY);
	CHECK_EQ(fi_close(&srx->fid), -FI_EBUSY);
	CHECK_EQ(fi_close(&stx->fid), -FI_EBUSY);
	CHECK_OK(fi_close(&ep2->fid));
	CHECK_OK(fi_close(&srx2->fid));
	fi_freeinfo(plain);
	world_close();
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	RUN(getinfo_says_what_is_offered);
	RUN(srx_receives_taken_in_posting_order);
	RUN(srx_takes_unexpected_messages);
	RUN(srx_tags_and_member_posts);
	RUN(srx_cancel);
	RUN(stx_depth_is_shared);
	RUN(null_receive_buffer_holds_nothing);
	RUN(errors);
	return harness_done();
}
