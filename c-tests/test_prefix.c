/*
 * FI_MSG_PREFIX (fi_getinfo(3), fi_endpoint(3) msg_prefix_size, fi_msg(3),
 * fi_cq(3) len) on RDM endpoints over the rustfab transport RF_TRANSPORT
 * names (shm, tcp or auto): asked for in the hints, the mode is answered in
 * info->mode, tx_attr->mode and rx_attr->mode (where fabtests look) with a
 * msg_prefix_size that is a non-zero multiple of 8; every send and receive
 * buffer then begins with that many bytes the provider owns. The tests fill
 * the sender's prefix and the receiver's prefix with different bytes and
 * check that the payload arrives right after the receiver's prefix, that
 * the receiver's prefix is left as it was (the sender's is not sent), that
 * receive completions count the prefix in `len` (fi_cq(3)) and that limits
 * (inject_size) apply to the payload only. Buffers without room for the
 * prefix are -FI_EINVAL.
 */
#include "rdm_common.h"

#define SENDER_PREFIX 0xa5
#define RECEIVER_PREFIX 0x5a
#define UNTOUCHED 0xee

static struct fi_info *prefix_info(uint64_t mode, uint64_t caps)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	if (!hints)
		return NULL;
	hints->fabric_attr->prov_name = strdup("rustfab");
	hints->domain_attr->name = strdup(rf_transport());
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = caps;
	hints->mode = mode;
	if (fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info))
		info = NULL;
	fi_freeinfo(hints);
	return info;
}

TEST(getinfo_answers_the_mode_when_asked)
{
	struct fi_info *i = prefix_info(FI_CONTEXT | FI_MSG_PREFIX, FI_MSG | FI_TAGGED);
	CHECK(i != NULL);
	int ok = (i->mode & FI_MSG_PREFIX) && (i->tx_attr->mode & FI_MSG_PREFIX) &&
		 (i->rx_attr->mode & FI_MSG_PREFIX);
	size_t p = i->ep_attr->msg_prefix_size;
	fi_freeinfo(i);
	CHECK(ok);
	CHECK(p > 0 && p % 8 == 0);

	/* Not asked: no mode bit, no size. */
	i = prefix_info(FI_CONTEXT, FI_MSG | FI_TAGGED);
	CHECK(i != NULL);
	ok = !((i->mode | i->tx_attr->mode | i->rx_attr->mode) & FI_MSG_PREFIX) && i->ep_attr->msg_prefix_size == 0;
	fi_freeinfo(i);
	CHECK(ok);

	/* Multi-receive buffers hold many messages: no prefix with them. */
	i = prefix_info(FI_MSG_PREFIX, FI_MSG | FI_MULTI_RECV);
	CHECK(i != NULL);
	ok = !(i->mode & FI_MSG_PREFIX) && i->ep_attr->msg_prefix_size == 0;
	fi_freeinfo(i);
	CHECK(ok);
}

/* A pair of RDM ends opened with FI_MSG_PREFIX; *p = its prefix size. */
static int prefix_pair(struct end *a, struct end *b, size_t *p)
{
	struct end_opts o = {0};
	int ret;
	o.mode = FI_MSG_PREFIX;
	if ((ret = end_open(a, &o)) || (ret = end_open(b, &o)) || (ret = ends_connect(a, b)))
		return ret;
	*p = a->info->ep_attr->msg_prefix_size;
	return (a->info->rx_attr->mode & FI_MSG_PREFIX) && *p > 0 ? 0 : -FI_ENODATA;
}

/* The sender's buffer: its prefix, then `n` payload bytes. */
static void sender_buf(unsigned char *buf, size_t p, size_t n, unsigned seed)
{
	memset(buf, SENDER_PREFIX, p);
	fill(buf + p, n, seed);
}

/* The receiver's buffer of `cap` bytes in all before a receive. */
static void receiver_buf(unsigned char *buf, size_t p, size_t cap)
{
	memset(buf, RECEIVER_PREFIX, p);
	memset(buf + p, UNTOUCHED, cap - p);
}

/* After a receive of `n` bytes: prefix kept, payload after it, rest untouched. */
static int received_right(const unsigned char *buf, size_t p, size_t n, size_t cap, unsigned seed)
{
	return all_bytes(buf, p, RECEIVER_PREFIX) && check_fill(buf + p, n, seed) &&
	       all_bytes(buf + p + n, cap - p - n, UNTOUCHED);
}

TEST(send_and_receive_skip_the_prefix)
{
	struct end a, b;
	size_t p = 0;
	CHECK_OK(prefix_pair(&a, &b, &p));
	/* Eager, the inject size, rendezvous (and over shm a cross-memory read). */
	const size_t sizes[] = {0, 1, 100, 4096, 70000, 1 << 20};
	size_t cap = p + (1 << 20) + 64;
	unsigned char *sbuf = malloc(cap), *rbuf = malloc(cap);
	CHECK(sbuf && rbuf);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		for (int tagged = 0; tagged < 2; tagged++) {
			size_t n = sizes[k];
			unsigned seed = (unsigned)(k * 2 + tagged + 1);
			struct fi_cq_tagged_entry c;
			struct fi_cq_err_entry err;
			sender_buf(sbuf, p, n, seed);
			receiver_buf(rbuf, p, cap);
			if (tagged) {
				CHECK_OK(POST(fi_trecv(b.ep, rbuf, cap, NULL, b.peer, 7, 0, rbuf), &a, &b));
				CHECK_OK(POST(fi_tsenddata(a.ep, sbuf, p + n, NULL, 42, a.peer, 7, sbuf), &a, &b));
			} else {
				CHECK_OK(POST(fi_recv(b.ep, rbuf, cap, NULL, b.peer, rbuf), &a, &b));
				CHECK_OK(POST(fi_senddata(a.ep, sbuf, p + n, NULL, 42, a.peer, sbuf), &a, &b));
			}
			CHECK_EQ(wait_comp(&b, &a, &c, &err, NULL, 20), 1);
			CHECK(c.op_context == rbuf);
			CHECK_EQ(c.flags & (FI_RECV | FI_MSG | FI_TAGGED | FI_REMOTE_CQ_DATA),
				 FI_RECV | FI_REMOTE_CQ_DATA | (tagged ? FI_TAGGED : FI_MSG));
			/* fi_cq(3): the len also reflects the size of the prefix buffer. */
			CHECK_EQ(c.len, p + n);
			CHECK_EQ(c.data, 42);
			if (!received_right(rbuf, p, n, cap, seed))
				FAIL_AT("%zu bytes (tagged %d): prefix or payload wrong at the receiver", n, tagged);
			CHECK_EQ(wait_comp(&a, &b, &c, &err, NULL, 20), 1);
			CHECK(c.op_context == sbuf);
			/* The sender's prefix is the sender's: left as it was. */
			CHECK(all_bytes(sbuf, p, SENDER_PREFIX));
		}
	}
	free(sbuf);
	free(rbuf);
	end_close(&a);
	end_close(&b);
}

TEST(inject_size_counts_the_payload_only)
{
	struct end a, b;
	size_t p = 0;
	CHECK_OK(prefix_pair(&a, &b, &p));
	size_t inj = a.info->tx_attr->inject_size;
	size_t cap = p + inj + 64;
	unsigned char *sbuf = malloc(cap), *rbuf = malloc(cap);
	CHECK(sbuf && rbuf);
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	sender_buf(sbuf, p, inj, 9);
	receiver_buf(rbuf, p, cap);
	CHECK_OK(POST(fi_recv(b.ep, rbuf, cap, NULL, b.peer, rbuf), &a, &b));
	/* inject_size payload bytes behind the prefix: allowed (fi_getinfo(3):
	 * the prefix is not counted toward any message limit, including inject). */
	CHECK_OK(POST(fi_inject(a.ep, sbuf, p + inj, a.peer), &a, &b));
	memset(sbuf, 0, p + inj); /* the buffer is the application's again */
	CHECK_EQ(wait_comp(&b, &a, &c, &err, NULL, 20), 1);
	CHECK_EQ(c.len, p + inj);
	CHECK(received_right(rbuf, p, inj, cap, 9));
	/* One payload byte more is too many. */
	CHECK_EQ(fi_inject(a.ep, sbuf, p + inj + 1, a.peer), -FI_EMSGSIZE);
	CHECK_EQ(fi_tinject(a.ep, sbuf, p + inj + 1, a.peer, 1), -FI_EMSGSIZE);
	free(sbuf);
	free(rbuf);
	end_close(&a);
	end_close(&b);
}

TEST(vectors_carry_the_prefix_in_their_first_iovec)
{
	struct end a, b;
	size_t p = 0;
	CHECK_OK(prefix_pair(&a, &b, &p));
	enum { N = 3000 };
	unsigned char *shead = malloc(p + 1000), *stail = malloc(N - 1000);
	unsigned char *rbuf = malloc(p + N + 64), *whole = malloc(N);
	CHECK(shead && stail && rbuf && whole);
	fill(whole, N, 5);
	memset(shead, SENDER_PREFIX, p);
	memcpy(shead + p, whole, 1000);
	memcpy(stail, whole + 1000, N - 1000);
	/* Send: [prefix + 1000 bytes][2000 bytes]. Receive: [prefix + 10][rest]. */
	struct iovec siov[2] = {{shead, p + 1000}, {stail, N - 1000}};
	receiver_buf(rbuf, p, p + N + 64);
	struct iovec riov[2] = {{rbuf, p + 10}, {rbuf + p + 10, N + 54}};
	struct fi_msg_tagged rm = {.msg_iov = riov, .iov_count = 2, .addr = b.peer, .tag = 3, .context = rbuf};
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	CHECK_OK(POST(fi_trecvmsg(b.ep, &rm, FI_COMPLETION), &a, &b));
	CHECK_OK(POST(fi_tsendv(a.ep, siov, NULL, 2, a.peer, 3, shead), &a, &b));
	CHECK_EQ(wait_comp(&b, &a, &c, &err, NULL, 20), 1);
	CHECK_EQ(c.len, p + N);
	CHECK(all_bytes(rbuf, p, RECEIVER_PREFIX));
	CHECK(memcmp(rbuf + p, whole, N) == 0);
	CHECK(all_bytes(rbuf + p + N, 64, UNTOUCHED));
	CHECK_EQ(wait_comp(&a, &b, &c, &err, NULL, 20), 1);

	/* A prefix alone in the first iovec, the payload in the second. */
	struct iovec s2[2] = {{shead, p}, {stail, 500}};
	struct fi_msg sm = {.msg_iov = s2, .iov_count = 2, .addr = a.peer, .context = stail};
	receiver_buf(rbuf, p, p + N + 64);
	CHECK_OK(POST(fi_recv(b.ep, rbuf, p + N + 64, NULL, b.peer, rbuf), &a, &b));
	CHECK_OK(POST(fi_sendmsg(a.ep, &sm, FI_COMPLETION), &a, &b));
	CHECK_EQ(wait_comp(&b, &a, &c, &err, NULL, 20), 1);
	CHECK_EQ(c.len, p + 500);
	CHECK(all_bytes(rbuf, p, RECEIVER_PREFIX));
	CHECK(memcmp(rbuf + p, stail, 500) == 0);
	CHECK_EQ(wait_comp(&a, &b, &c, &err, NULL, 20), 1);

	/* No room for the prefix, or a prefix split across iovecs: -FI_EINVAL. */
	struct iovec split[2] = {{shead, p - 8}, {stail, 100}};
	CHECK_EQ(fi_send(a.ep, shead, p - 1, NULL, a.peer, NULL), -FI_EINVAL);
	CHECK_EQ(fi_tsend(a.ep, shead, 0, NULL, a.peer, 1, NULL), -FI_EINVAL);
	CHECK_EQ(fi_inject(a.ep, shead, p - 1, a.peer), -FI_EINVAL);
	CHECK_EQ(fi_sendv(a.ep, split, NULL, 2, a.peer, NULL), -FI_EINVAL);
	CHECK_EQ(fi_recv(b.ep, rbuf, p - 1, NULL, b.peer, NULL), -FI_EINVAL);
	CHECK_EQ(fi_trecvv(b.ep, split, NULL, 2, b.peer, 1, 0, NULL), -FI_EINVAL);
	CHECK_EQ(fi_recvv(b.ep, split, NULL, 0, b.peer, NULL), -FI_EINVAL);
	free(shead);
	free(stail);
	free(rbuf);
	free(whole);
	end_close(&a);
	end_close(&b);
}

TEST(truncation_counts_the_prefix)
{
	struct end a, b;
	size_t p = 0;
	CHECK_OK(prefix_pair(&a, &b, &p));
	size_t cap = p + 100;
	unsigned char *sbuf = malloc(p + 300), *rbuf = malloc(cap);
	CHECK(sbuf && rbuf);
	sender_buf(sbuf, p, 300, 11);
	receiver_buf(rbuf, p, cap);
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	memset(&err, 0, sizeof(err));
	CHECK_OK(POST(fi_recv(b.ep, rbuf, cap, NULL, b.peer, rbuf), &a, &b));
	CHECK_OK(POST(fi_send(a.ep, sbuf, p + 300, NULL, a.peer, sbuf), &a, &b));
	CHECK_EQ(wait_comp(&b, &a, &c, &err, NULL, 20), -FI_EAVAIL);
	CHECK_EQ(err.err, FI_ETRUNC);
	CHECK(err.op_context == rbuf);
	/* 100 payload bytes placed after the prefix, 200 left over. */
	CHECK_EQ(err.len, p + 100);
	CHECK_EQ(err.olen, 200);
	CHECK(received_right(rbuf, p, 100, cap, 11));
	free(sbuf);
	free(rbuf);
	end_close(&a);
	end_close(&b);
}

TEST(endpoint_takes_only_the_answered_prefix_size)
{
	struct fi_info *i = prefix_info(FI_MSG_PREFIX, FI_MSG);
	struct fid_fabric *fab = NULL;
	struct fid_domain *dom = NULL;
	struct fid_ep *ep = NULL;
	CHECK(i != NULL && i->ep_attr->msg_prefix_size > 0);
	CHECK_OK(fi_fabric(i->fabric_attr, &fab, NULL));
	CHECK_OK(fi_domain(fab, i, &dom, NULL));
	/* The application's buffers would not match what fi_getinfo said. */
	i->ep_attr->msg_prefix_size += 8;
	CHECK_EQ(fi_endpoint(dom, i, &ep, NULL), -FI_EINVAL);
	i->ep_attr->msg_prefix_size -= 8;
	CHECK_OK(fi_endpoint(dom, i, &ep, NULL));
	CHECK_OK(fi_close(&ep->fid));
	CHECK_OK(fi_close(&dom->fid));
	CHECK_OK(fi_close(&fab->fid));
	fi_freeinfo(i);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	printf("transport: %s\n", rf_transport());
	RUN(getinfo_answers_the_mode_when_asked);
	RUN(send_and_receive_skip_the_prefix);
	RUN(inject_size_counts_the_payload_only);
	RUN(vectors_carry_the_prefix_in_their_first_iovec);
	RUN(truncation_counts_the_prefix);
	RUN(endpoint_takes_only_the_answered_prefix_size);
	return harness_done();
}
