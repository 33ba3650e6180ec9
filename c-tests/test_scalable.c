/*
 * Scalable endpoints (fi_endpoint(3) SCALABLE ENDPOINTS, fi_av(3)
 * rx_ctx_bits, fi_rx_addr): one address, several transmit and receive
 * contexts each with its own CQ; a sender names receive context k of a peer
 * with fi_rx_addr(). Two scalable endpoints in one process (one domain)
 * over RF_TRANSPORT (shm, tcp, auto). Data, tags, CQ data and which CQ each
 * completion lands on are checked; so are the error codes of bad calls.
 */
#include "rdm_common.h"

#define NCTX 4
#define BITS 2 /* fi_rx_addr bits for NCTX receive contexts */

struct sep {
	struct fid_ep *sep;
	struct fid_av *av;
	struct fid_ep *tx[NCTX], *rx[NCTX];
	struct fid_cq *txcq[NCTX], *rxcq[NCTX];
	char addr[128];
	size_t addrlen;
	fi_addr_t peer; /* the other endpoint, as inserted into this one's AV */
};

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;

static int dom_open(void)
{
	struct fi_info *hints = fi_allocinfo();
	int ret;
	if (!hints)
		return -FI_ENOMEM;
	hints->fabric_attr->prov_name = strdup("rustfab");
	hints->domain_attr->name = strdup(rf_transport());
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_NAMED_RX_CTX;
	hints->domain_attr->av_type = FI_AV_TABLE;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	if (ret)
		return ret;
	if ((ret = fi_fabric(info->fabric_attr, &fabric, NULL)))
		return ret;
	return fi_domain(fabric, info, &domain, NULL);
}

static void dom_close(void)
{
	if (domain)
		fi_close(&domain->fid);
	if (fabric)
		fi_close(&fabric->fid);
	if (info)
		fi_freeinfo(info);
	domain = NULL;
	fabric = NULL;
	info = NULL;
}

/* A scalable endpoint with `n` contexts of each kind, enabled, each context
 * with a CQ of its own. */
static int sep_open(struct sep *s, int n)
{
	int ret;
	memset(s, 0, sizeof(*s));
	struct fi_av_attr av_attr = {0};
	av_attr.type = FI_AV_TABLE;
	av_attr.rx_ctx_bits = BITS;
	if ((ret = fi_av_open(domain, &av_attr, &s->av, NULL)))
		return ret;
	info->ep_attr->tx_ctx_cnt = (size_t)n;
	info->ep_attr->rx_ctx_cnt = (size_t)n;
	if ((ret = fi_scalable_ep(domain, info, &s->sep, NULL)))
		return ret;
	if ((ret = fi_scalable_ep_bind(s->sep, &s->av->fid, 0)))
		return ret;
	struct fi_cq_attr cq_attr = {0};
	cq_attr.format = FI_CQ_FORMAT_TAGGED;
	for (int i = 0; i < n; i++) {
		if ((ret = fi_tx_context(s->sep, i, NULL, &s->tx[i], NULL)))
			return ret;
		if ((ret = fi_rx_context(s->sep, i, NULL, &s->rx[i], NULL)))
			return ret;
		if ((ret = fi_cq_open(domain, &cq_attr, &s->txcq[i], NULL)))
			return ret;
		if ((ret = fi_cq_open(domain, &cq_attr, &s->rxcq[i], NULL)))
			return ret;
		if ((ret = fi_ep_bind(s->tx[i], &s->txcq[i]->fid, FI_TRANSMIT)))
			return ret;
		if ((ret = fi_ep_bind(s->rx[i], &s->rxcq[i]->fid, FI_RECV)))
			return ret;
		if ((ret = fi_enable(s->tx[i])) || (ret = fi_enable(s->rx[i])))
			return ret;
	}
	if ((ret = fi_enable(s->sep)))
		return ret;
	s->addrlen = sizeof(s->addr);
	return fi_getname(&s->sep->fid, s->addr, &s->addrlen);
}

static void sep_close(struct sep *s)
{
	for (int i = 0; i < NCTX; i++) {
		if (s->tx[i])
			fi_close(&s->tx[i]->fid);
		if (s->rx[i])
			fi_close(&s->rx[i]->fid);
		if (s->txcq[i])
			fi_close(&s->txcq[i]->fid);
		if (s->rxcq[i])
			fi_close(&s->rxcq[i]->fid);
	}
	if (s->sep)
		fi_close(&s->sep->fid);
	if (s->av)
		fi_close(&s->av->fid);
	memset(s, 0, sizeof(*s));
}

static int seps_connect(struct sep *a, struct sep *b)
{
	if (fi_av_insert(a->av, b->addr, 1, &a->peer, 0, NULL) != 1)
		return -FI_EINVAL;
	if (fi_av_insert(b->av, a->addr, 1, &b->peer, 0, NULL) != 1)
		return -FI_EINVAL;
	return 0;
}

/* Reads one entry of `cq` (any CQ read progresses the whole domain).
 * 1: an entry; -FI_EAVAIL: an error entry in *err; 0: timed out. */
static int cq_wait(struct fid_cq *cq, struct fi_cq_tagged_entry *e, struct fi_cq_err_entry *err)
{
	double deadline = now_sec() + 10 * rf_time_scale();
	while (now_sec() < deadline) {
		ssize_t r = fi_cq_read(cq, e, 1);
		if (r == 1)
			return 1;
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

/* Nothing on `cq` after a few passes of progress. */
static int cq_quiet(struct fid_cq *cq)
{
	struct fi_cq_tagged_entry e;
	for (int i = 0; i < 2000; i++) {
		ssize_t r = fi_cq_read(cq, &e, 1);
		if (r != -FI_EAGAIN)
			return 0;
	}
	return 1;
}

#define SEND(expr)                                                     \
	({                                                             \
		ssize_t _r;                                            \
		double _d = now_sec() + 10 * rf_time_scale();          \
		while ((_r = (expr)) == -FI_EAGAIN && now_sec() < _d) \
			(void)fi_cq_read(a.rxcq[0], NULL, 0);           \
		_r;                                                    \
	})

TEST(getinfo_says_what_is_offered)
{
	struct fi_info *hints = fi_allocinfo(), *fi = NULL;
	CHECK(hints != NULL);
	hints->fabric_attr->prov_name = strdup("rustfab");
	hints->domain_attr->name = strdup(rf_transport());
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_NAMED_RX_CTX;
	CHECK_OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &fi));
	CHECK(fi->caps & FI_NAMED_RX_CTX);
	CHECK_EQ(fi->domain_attr->max_ep_tx_ctx, 16);
	CHECK_EQ(fi->domain_attr->max_ep_rx_ctx, 16);
	fi_freeinfo(fi);
	fi = NULL;
	/* Up to 16 contexts of each kind may be asked for; not 17. */
	hints->ep_attr->tx_ctx_cnt = 16;
	hints->ep_attr->rx_ctx_cnt = 16;
	CHECK_OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &fi));
	fi_freeinfo(fi);
	fi = NULL;
	hints->ep_attr->rx_ctx_cnt = 17;
	CHECK_EQ(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &fi), -FI_ENODATA);
	fi_freeinfo(hints);
}

/* Every transmit context sends to every receive context of the peer: each
 * message lands on the CQ of the context it named, with its bytes, tag and
 * data; each send completes on its own transmit context's CQ. */
TEST(each_message_reaches_the_context_it_names)
{
	struct sep a, b;
	CHECK_OK(dom_open());
	CHECK_OK(sep_open(&a, NCTX));
	CHECK_OK(sep_open(&b, NCTX));
	CHECK_OK(seps_connect(&a, &b));
	static char rbuf[NCTX][NCTX][64];
	static char sbuf[NCTX][NCTX][64];
	for (int k = 0; k < NCTX; k++)
		for (int j = 0; j < NCTX; j++) {
			/* Half tagged, half untagged; receives posted before the
			 * sends for even j, after them for odd j (unexpected). */
			if (j % 2 == 0) {
				if (k % 2)
					CHECK_OK(fi_trecv(b.rx[k], rbuf[k][j], 64, NULL, FI_ADDR_UNSPEC,
							  0x100 + (uint64_t)j, 0, &rbuf[k][j]));
				else
					CHECK_OK(fi_recv(b.rx[k], rbuf[k][j], 64, NULL, FI_ADDR_UNSPEC, &rbuf[k][j]));
			}
		}
	for (int j = 0; j < NCTX; j++)
		for (int k = 0; k < NCTX; k++) {
			snprintf(sbuf[j][k], 64, "from tx %d to rx %d", j, k);
			fi_addr_t to = fi_rx_addr(a.peer, k, BITS);
			if (k % 2)
				CHECK_OK(SEND(fi_tsenddata(a.tx[j], sbuf[j][k], 64, NULL, 1000u * j + k, to,
							   0x100 + (uint64_t)j, &sbuf[j][k])));
			else
				CHECK_OK(SEND(fi_senddata(a.tx[j], sbuf[j][k], 64, NULL, 1000u * j + k, to,
							  &sbuf[j][k])));
		}
	for (int k = 0; k < NCTX; k++)
		for (int j = 1; j < NCTX; j += 2) {
			if (k % 2)
				CHECK_OK(fi_trecv(b.rx[k], rbuf[k][j], 64, NULL, FI_ADDR_UNSPEC, 0x100 + (uint64_t)j,
						  0, &rbuf[k][j]));
			else
				CHECK_OK(fi_recv(b.rx[k], rbuf[k][j], 64, NULL, FI_ADDR_UNSPEC, &rbuf[k][j]));
		}
	/* Receive side: NCTX completions per context, each from a message
	 * naming that context. Untagged receives match in arrival order, so
	 * the data word tells which message filled which buffer. */
	for (int k = 0; k < NCTX; k++) {
		int seen[NCTX] = {0};
		for (int n = 0; n < NCTX; n++) {
			struct fi_cq_tagged_entry e;
			CHECK_EQ(cq_wait(b.rxcq[k], &e, NULL), 1);
			CHECK(e.flags & FI_RECV);
			CHECK(e.flags & FI_REMOTE_CQ_DATA);
			int j = (int)(e.data / 1000), kk = (int)(e.data % 1000);
			CHECK_EQ(kk, k);
			CHECK(j >= 0 && j < NCTX && !seen[j]);
			seen[j] = 1;
			char want[64];
			snprintf(want, sizeof(want), "from tx %d to rx %d", j, k);
			CHECK(strcmp((char *)e.buf, want) == 0);
			if (k % 2) {
				CHECK(e.flags & FI_TAGGED);
				CHECK_EQ(e.tag, 0x100 + j);
				CHECK(e.op_context == &rbuf[k][j]);
			}
		}
		CHECK(cq_quiet(b.rxcq[k]));
	}
	/* Transmit side: each context's CQ has its own NCTX sends. */
	for (int j = 0; j < NCTX; j++) {
		int seen[NCTX] = {0};
		for (int n = 0; n < NCTX; n++) {
			struct fi_cq_tagged_entry e;
			CHECK_EQ(cq_wait(a.txcq[j], &e, NULL), 1);
			CHECK(e.flags & FI_SEND);
			char *p = e.op_context;
			CHECK(p >= sbuf[j][0] && p <= sbuf[j][NCTX - 1]);
			int k = (int)((p - sbuf[j][0]) / 64);
			CHECK(!seen[k]);
			seen[k] = 1;
		}
		CHECK(cq_quiet(a.txcq[j]));
	}
	sep_close(&a);
	sep_close(&b);
	dom_close();
}

/* Large messages (rendezvous) to each context, and an unexpected one that
 * waits in its own context's queue: a receive posted on another context
 * does not take it. */
TEST(large_and_unexpected_messages_stay_in_their_context)
{
	struct sep a, b;
	const size_t len = 1 << 20;
	CHECK_OK(dom_open());
	CHECK_OK(sep_open(&a, 2));
	CHECK_OK(sep_open(&b, 2));
	CHECK_OK(seps_connect(&a, &b));
	char *s0 = malloc(len), *s1 = malloc(len), *r0 = malloc(len), *r1 = malloc(len);
	CHECK(s0 && s1 && r0 && r1);
	fill(s0, len, 10);
	fill(s1, len, 11);
	memset(r0, 0, len);
	memset(r1, 0, len);
	/* Both sent before any receive is posted: unexpected on each side. */
	CHECK_OK(SEND(fi_send(a.tx[0], s1, len, NULL, fi_rx_addr(a.peer, 1, BITS), s1)));
	CHECK_OK(SEND(fi_send(a.tx[1], s0, len, NULL, fi_rx_addr(a.peer, 0, BITS), s0)));
	CHECK(cq_quiet(b.rxcq[0]) && cq_quiet(b.rxcq[1]));
	/* Context 1's receive takes context 1's message, whatever came first. */
	CHECK_OK(fi_recv(b.rx[1], r1, len, NULL, FI_ADDR_UNSPEC, r1));
	struct fi_cq_tagged_entry e;
	CHECK_EQ(cq_wait(b.rxcq[1], &e, NULL), 1);
	CHECK(e.op_context == r1);
	CHECK_EQ(e.len, len);
	CHECK(check_fill(r1, len, 11));
	CHECK(cq_quiet(b.rxcq[0]));
	CHECK_OK(fi_recv(b.rx[0], r0, len, NULL, FI_ADDR_UNSPEC, r0));
	CHECK_EQ(cq_wait(b.rxcq[0], &e, NULL), 1);
	CHECK(e.op_context == r0);
	CHECK(check_fill(r0, len, 10));
	CHECK_EQ(cq_wait(a.txcq[0], &e, NULL), 1);
	CHECK(e.op_context == s1);
	CHECK_EQ(cq_wait(a.txcq[1], &e, NULL), 1);
	CHECK(e.op_context == s0);
	free(s0);
	free(s1);
	free(r0);
	free(r1);
	sep_close(&a);
	sep_close(&b);
	dom_close();
}

/* A message naming a receive context the peer does not have is refused:
 * the sender's delivery-complete send (eager and rendezvous) completes in
 * error, and the peer's contexts see nothing. */
TEST(a_context_the_peer_lacks_is_refused)
{
	struct sep a, b;
	CHECK_OK(dom_open());
	CHECK_OK(sep_open(&a, 2));
	CHECK_OK(sep_open(&b, 2));
	CHECK_OK(seps_connect(&a, &b));
	static char small[64], big[1 << 18];
	char rbuf[64];
	CHECK_OK(fi_recv(b.rx[0], rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, rbuf));
	struct fi_msg m = {0};
	struct iovec iov = {small, sizeof(small)};
	m.msg_iov = &iov;
	m.iov_count = 1;
	m.addr = fi_rx_addr(a.peer, 3, BITS);
	m.context = small;
	CHECK_OK(SEND(fi_sendmsg(a.tx[0], &m, FI_DELIVERY_COMPLETE | FI_COMPLETION)));
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = {0};
	CHECK_EQ(cq_wait(a.txcq[0], &e, &err), -FI_EAVAIL);
	CHECK(err.op_context == small);
	CHECK_EQ(err.err, FI_EADDRNOTAVAIL);
	CHECK_OK(SEND(fi_send(a.tx[1], big, sizeof(big), NULL, fi_rx_addr(a.peer, 2, BITS), big)));
	memset(&err, 0, sizeof(err));
	CHECK_EQ(cq_wait(a.txcq[1], &e, &err), -FI_EAVAIL);
	CHECK(err.op_context == big);
	CHECK_EQ(err.err, FI_EADDRNOTAVAIL);
	CHECK(cq_quiet(b.rxcq[0]) && cq_quiet(b.rxcq[1]));
	/* Context 0 still works. */
	CHECK_OK(SEND(fi_send(a.tx[0], small, sizeof(small), NULL, fi_rx_addr(a.peer, 0, BITS), small)));
	CHECK_EQ(cq_wait(b.rxcq[0], &e, NULL), 1);
	CHECK(e.op_context == rbuf);
	sep_close(&a);
	sep_close(&b);
	dom_close();
}

/* A plain RDM endpoint whose AV has rx_ctx_bits reaches a chosen context
 * of a scalable endpoint; the context's answer reaches the plain endpoint. */
TEST(a_plain_endpoint_names_a_context)
{
	struct sep b;
	CHECK_OK(dom_open());
	CHECK_OK(sep_open(&b, 2));
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fi_av_attr av_attr = {0};
	av_attr.type = FI_AV_TABLE;
	av_attr.rx_ctx_bits = BITS;
	CHECK_OK(fi_av_open(domain, &av_attr, &av, NULL));
	struct fi_cq_attr cq_attr = {0};
	cq_attr.format = FI_CQ_FORMAT_TAGGED;
	CHECK_OK(fi_cq_open(domain, &cq_attr, &cq, NULL));
	info->ep_attr->tx_ctx_cnt = 1;
	info->ep_attr->rx_ctx_cnt = 1;
	CHECK_OK(fi_endpoint(domain, info, &ep, NULL));
	CHECK_OK(fi_ep_bind(ep, &av->fid, 0));
	CHECK_OK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK_OK(fi_enable(ep));
	char addr[128];
	size_t alen = sizeof(addr);
	CHECK_OK(fi_getname(&ep->fid, addr, &alen));
	fi_addr_t to_b, to_ep;
	CHECK_EQ(fi_av_insert(av, b.addr, 1, &to_b, 0, NULL), 1);
	CHECK_EQ(fi_av_insert(b.av, addr, 1, &to_ep, 0, NULL), 1);
	char r0[16] = {0}, r1[16] = {0}, back[16] = {0};
	CHECK_OK(fi_recv(b.rx[0], r0, sizeof(r0), NULL, FI_ADDR_UNSPEC, r0));
	CHECK_OK(fi_recv(b.rx[1], r1, sizeof(r1), NULL, FI_ADDR_UNSPEC, r1));
	CHECK_OK(fi_recv(ep, back, sizeof(back), NULL, FI_ADDR_UNSPEC, back));
	CHECK_OK(fi_send(ep, "to one", 7, NULL, fi_rx_addr(to_b, 1, BITS), NULL));
	struct fi_cq_tagged_entry e;
	CHECK_EQ(cq_wait(b.rxcq[1], &e, NULL), 1);
	CHECK(e.op_context == r1);
	CHECK(strcmp(r1, "to one") == 0);
	CHECK(cq_quiet(b.rxcq[0]));
	CHECK_OK(fi_send(b.tx[1], "back", 5, NULL, to_ep, NULL));
	int got_back = 0, sends = 0;
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(cq_wait(cq, &e, NULL), 1);
		if (e.flags & FI_RECV) {
			got_back = 1;
			CHECK(strcmp(back, "back") == 0);
		} else {
			sends++;
		}
	}
	CHECK(got_back && sends == 1);
	CHECK_EQ(cq_wait(b.txcq[1], &e, NULL), 1);
	CHECK_OK(fi_close(&ep->fid));
	CHECK_OK(fi_close(&cq->fid));
	CHECK_OK(fi_close(&av->fid));
	sep_close(&b);
	dom_close();
}

/* The error codes of bad calls (fi_endpoint(3), fi_av(3)). */
TEST(bad_calls_get_their_error_codes)
{
	CHECK_OK(dom_open());
	struct fi_av_attr av_attr = {0};
	struct fid_av *av;
	av_attr.type = FI_AV_TABLE;
	av_attr.rx_ctx_bits = 17;
	CHECK_EQ(fi_av_open(domain, &av_attr, &av, NULL), -FI_EINVAL);
	av_attr.rx_ctx_bits = BITS;
	CHECK_OK(fi_av_open(domain, &av_attr, &av, NULL));
	struct fid_ep *sep, *tx, *rx, *tx2;
	info->ep_attr->tx_ctx_cnt = 17;
	CHECK_EQ(fi_scalable_ep(domain, info, &sep, NULL), -FI_EINVAL);
	info->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT;
	CHECK_EQ(fi_scalable_ep(domain, info, &sep, NULL), -FI_EINVAL);
	info->ep_attr->tx_ctx_cnt = 2;
	info->ep_attr->rx_ctx_cnt = 2;
	CHECK_OK(fi_scalable_ep(domain, info, &sep, NULL));
	CHECK_EQ(sep->fid.fclass, FI_CLASS_SEP);
	CHECK_EQ(fi_tx_context(sep, 2, NULL, &tx, NULL), -FI_EINVAL);
	CHECK_EQ(fi_rx_context(sep, -1, NULL, &rx, NULL), -FI_EINVAL);
	/* The attributes a context got are reported back: the endpoint's. */
	struct fi_tx_attr txa = {0};
	struct fi_rx_attr rxa = {0};
	CHECK_OK(fi_tx_context(sep, 1, &txa, &tx, NULL));
	CHECK_EQ(tx->fid.fclass, FI_CLASS_TX_CTX);
	CHECK_EQ(txa.size, info->tx_attr->size);
	CHECK_EQ(txa.inject_size, info->tx_attr->inject_size);
	CHECK_EQ(txa.iov_limit, info->tx_attr->iov_limit);
	CHECK_EQ(fi_tx_context(sep, 1, NULL, &tx2, NULL), -FI_EBUSY);
	CHECK_OK(fi_rx_context(sep, 1, &rxa, &rx, NULL));
	CHECK_EQ(rx->fid.fclass, FI_CLASS_RX_CTX);
	CHECK_EQ(rxa.size, info->rx_attr->size);
	CHECK(rxa.size > 0);
	struct fid_cq *cq;
	struct fi_cq_attr cq_attr = {0};
	CHECK_OK(fi_cq_open(domain, &cq_attr, &cq, NULL));
	/* A transmit context takes a transmit CQ only, once. */
	CHECK_EQ(fi_ep_bind(tx, &cq->fid, FI_RECV), -FI_EINVAL);
	CHECK_EQ(fi_ep_bind(tx, &av->fid, 0), -FI_EINVAL);
	CHECK_OK(fi_ep_bind(tx, &cq->fid, FI_TRANSMIT));
	CHECK_EQ(fi_ep_bind(tx, &cq->fid, FI_TRANSMIT), -FI_EINVAL);
	CHECK_OK(fi_enable(tx));
	CHECK_OK(fi_enable(rx));
	char buf[8] = {0};
	/* Not before the endpoint is enabled (it has no AV yet). */
	CHECK_EQ(fi_send(tx, buf, 8, NULL, 0, NULL), -FI_EOPBADSTATE);
	CHECK_EQ(fi_enable(sep), -FI_ENOAV);
	CHECK_EQ(fi_scalable_ep_bind(sep, &cq->fid, 0), -FI_EINVAL);
	CHECK_OK(fi_scalable_ep_bind(sep, &av->fid, 0));
	CHECK_OK(fi_enable(sep));
	/* The endpoint itself carries no data calls; a context only those of
	 * its direction. */
	CHECK_EQ(fi_send(sep, buf, 8, NULL, 0, NULL), -FI_ENOSYS);
	CHECK_EQ(fi_recv(sep, buf, 8, NULL, 0, NULL), -FI_ENOSYS);
	CHECK_EQ(fi_recv(tx, buf, 8, NULL, 0, NULL), -FI_ENOSYS);
	CHECK_EQ(fi_send(rx, buf, 8, NULL, 0, NULL), -FI_ENOSYS);
	/* A receive context's cancel finds what was posted on it. */
	CHECK_OK(fi_recv(rx, buf, 8, NULL, FI_ADDR_UNSPEC, buf));
	CHECK_EQ(fi_cancel(&rx->fid, &tx), -FI_ENOENT);
	CHECK_OK(fi_cancel(&rx->fid, buf));
	/* In use: the endpoint while it has contexts, the CQ while bound. */
	CHECK_EQ(fi_close(&sep->fid), -FI_EBUSY);
	CHECK_EQ(fi_close(&cq->fid), -FI_EBUSY);
	CHECK_OK(fi_close(&tx->fid));
	CHECK_OK(fi_close(&cq->fid));
	/* A closed context's index can be opened again. */
	CHECK_OK(fi_tx_context(sep, 1, NULL, &tx, NULL));
	CHECK_OK(fi_close(&tx->fid));
	CHECK_OK(fi_close(&rx->fid));
	CHECK_OK(fi_close(&sep->fid));
	CHECK_OK(fi_close(&av->fid));
	dom_close();
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	printf("# transport: %s\n", rf_transport());
	RUN(getinfo_says_what_is_offered);
	RUN(each_message_reaches_the_context_it_names);
	RUN(large_and_unexpected_messages_stay_in_their_context);
	RUN(a_context_the_peer_lacks_is_refused);
	RUN(a_plain_endpoint_names_a_context);
	RUN(bad_calls_get_their_error_codes);
	return harness_done();
}
