/*
 * RDM messaging through the public API (fi_msg(3), fi_tagged(3), fi_cq(3)):
 * every send/recv call and flag, over the transport named by RF_TRANSPORT
 * (shm by default; the Makefile also runs it with RF_TRANSPORT=tcp).
 */
#include "rdm_common.h"
#include <rdma/fi_tagged.h>

static struct end A, B;

static int pair(const struct end_opts *oa, const struct end_opts *ob)
{
	int r;
	if ((r = end_open(&A, oa)) || (r = end_open(&B, ob ? ob : oa)))
		return r;
	return ends_connect(&A, &B);
}

static void unpair(void)
{
	end_close(&A);
	end_close(&B);
}

static const struct end_opts DEF = {0};

#define SETUP(oa, ob)                            \
	do {                                     \
		int _r = pair((oa), (ob));       \
		if (_r) {                        \
			unpair();                \
			FAIL_AT("setup: %s", fi_strerror(-_r)); \
		}                                \
	} while (0)

#define EXPECT_COMP(e, other, ent)                                              \
	do {                                                                    \
		struct fi_cq_err_entry _err;                                    \
		memset(&_err, 0, sizeof(_err));                                 \
		int _w = wait_comp((e), (other), (ent), &_err, NULL, 10);       \
		if (_w != 1) {                                                  \
			unpair();                                               \
			FAIL_AT("no completion (%d, err %d %s)", _w, _err.err, fi_strerror(_err.err)); \
		}                                                               \
	} while (0)

TEST(send_recv_basic)
{
	char tx[100], rx[100];
	struct fi_cq_tagged_entry c;
	SETUP(&DEF, NULL);
	fill(tx, sizeof tx, 1);
	memset(rx, 0, sizeof rx);
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, (void *)0xb1));
	CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, A.peer, (void *)0xa1), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.op_context == (void *)0xb1);
	CHECK_EQ(c.len, sizeof tx);
	CHECK(c.flags & FI_RECV);
	CHECK(c.flags & FI_MSG);
	CHECK(c.buf == rx);
	CHECK(check_fill(rx, sizeof rx, 1));
	EXPECT_COMP(&A, &B, &c);
	CHECK(c.op_context == (void *)0xa1);
	CHECK(c.flags & FI_SEND);
	unpair();
}

TEST(unexpected_then_recv)
{
	char tx[3000], rx[3000];
	struct fi_cq_tagged_entry c;
	SETUP(&DEF, NULL);
	fill(tx, sizeof tx, 2);
	CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, A.peer, NULL), &A, &B));
	for (int i = 0; i < 20; i++)
		poke(&A, &B);
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, (void *)0xb2));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.op_context == (void *)0xb2);
	CHECK_EQ(c.len, sizeof tx);
	CHECK(check_fill(rx, sizeof rx, 2));
	unpair();
}

TEST(sendv_recvv)
{
	char a[10], b2[20], c3[30], r1[25], r2[35];
	struct iovec tiov[3] = {{a, sizeof a}, {b2, sizeof b2}, {c3, sizeof c3}};
	struct iovec riov[2] = {{r1, sizeof r1}, {r2, sizeof r2}};
	char all[60], got[60];
	struct fi_cq_tagged_entry c;
	SETUP(&DEF, NULL);
	fill(all, sizeof all, 3);
	memcpy(a, all, 10);
	memcpy(b2, all + 10, 20);
	memcpy(c3, all + 30, 30);
	CHECK_OK(fi_recvv(B.ep, riov, NULL, 2, FI_ADDR_UNSPEC, (void *)1));
	CHECK_OK(POST(fi_sendv(A.ep, tiov, NULL, 3, A.peer, (void *)2), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	CHECK_EQ(c.len, 60);
	memcpy(got, r1, 25);
	memcpy(got + 25, r2, 35);
	CHECK(memcmp(got, all, 60) == 0);
	/* iov_limit is enforced */
	struct iovec many[64];
	for (int i = 0; i < 64; i++)
		many[i] = (struct iovec){a, 1};
	CHECK_EQ(fi_sendv(A.ep, many, NULL, 64, A.peer, NULL), -FI_EINVAL);
	unpair();
}

TEST(sendmsg_recvmsg_and_cq_data)
{
	char tx[64], rx[64];
	struct iovec t = {tx, sizeof tx}, r = {rx, sizeof rx};
	struct fi_msg sm = {0}, rm = {0};
	struct fi_cq_tagged_entry c;
	SETUP(&DEF, NULL);
	fill(tx, sizeof tx, 4);
	rm.msg_iov = &r;
	rm.iov_count = 1;
	rm.addr = FI_ADDR_UNSPEC;
	rm.context = (void *)0x77;
	CHECK_OK(fi_recvmsg(B.ep, &rm, FI_COMPLETION));
	sm.msg_iov = &t;
	sm.iov_count = 1;
	sm.addr = A.peer;
	sm.context = (void *)0x78;
	sm.data = 0xabcdef;
	CHECK_OK(POST(fi_sendmsg(A.ep, &sm, FI_COMPLETION | FI_REMOTE_CQ_DATA), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.op_context == (void *)0x77);
	CHECK(c.flags & FI_REMOTE_CQ_DATA);
	CHECK_EQ(c.data, 0xabcdef);
	CHECK(check_fill(rx, sizeof rx, 4));
	/* senddata */
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
	CHECK_OK(POST(fi_senddata(A.ep, tx, 8, NULL, 42, A.peer, NULL), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.flags & FI_REMOTE_CQ_DATA);
	CHECK_EQ(c.data, 42);
	CHECK_EQ(c.len, 8);
	/* Bad flags rejected */
	CHECK_EQ(fi_sendmsg(A.ep, &sm, 1ULL << 63), -FI_EBADFLAGS);
	CHECK_EQ(fi_sendmsg(A.ep, NULL, 0), -FI_EINVAL);
	unpair();
}

TEST(inject_has_no_completion)
{
	char tx[16], rx[16];
	struct fi_cq_tagged_entry c;
	SETUP(&DEF, NULL);
	fill(tx, sizeof tx, 5);
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
	CHECK_OK(POST(fi_inject(A.ep, tx, sizeof tx, A.peer), &A, &B));
	memset(tx, 0, sizeof tx); /* buffer reusable at once */
	EXPECT_COMP(&B, &A, &c);
	CHECK(check_fill(rx, sizeof rx, 5));
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
	CHECK_OK(POST(fi_injectdata(A.ep, tx, 4, 99, A.peer), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	CHECK_EQ(c.data, 99);
	/* no send completion at all */
	CHECK_EQ(wait_comp(&A, &B, &c, NULL, NULL, 0.2), 0);
	/* above inject_size: -FI_EMSGSIZE */
	size_t big = A.info->tx_attr->inject_size + 1;
	char *bb = calloc(1, big);
	CHECK_EQ(fi_inject(A.ep, bb, big, A.peer), -FI_EMSGSIZE);
	free(bb);
	unpair();
}

TEST(zero_length)
{
	struct fi_cq_tagged_entry c;
	SETUP(&DEF, NULL);
	CHECK_OK(fi_recv(B.ep, NULL, 0, NULL, FI_ADDR_UNSPEC, (void *)5));
	CHECK_OK(POST(fi_send(A.ep, NULL, 0, NULL, A.peer, (void *)6), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.op_context == (void *)5);
	CHECK_EQ(c.len, 0);
	EXPECT_COMP(&A, &B, &c);
	CHECK(c.op_context == (void *)6);
	unpair();
}

TEST(truncation_reports_olen_and_next_intact)
{
	static char tx[200000], rx[200000];
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	size_t sizes[] = {100, 8192, 131072};
	SETUP(&DEF, NULL);
	for (unsigned k = 0; k < 3; k++) {
		size_t n = sizes[k];
		fill(tx, n, 10 + k);
		memset(&err, 0, sizeof err);
		CHECK_OK(fi_recv(B.ep, rx, n / 2, NULL, FI_ADDR_UNSPEC, (void *)0x51));
		CHECK_OK(POST(fi_send(A.ep, tx, n, NULL, A.peer, NULL), &A, &B));
		CHECK_EQ(wait_comp(&B, &A, &c, &err, NULL, 10), -FI_EAVAIL);
		CHECK_EQ(err.err, FI_ETRUNC);
		CHECK(err.op_context == (void *)0x51);
		CHECK_EQ(err.len, n / 2);
		CHECK_EQ(err.olen, n - n / 2);
		CHECK(check_fill(rx, n / 2, 10 + k));
		/* the send itself succeeds */
		EXPECT_COMP(&A, &B, &c);
		/* next message intact */
		fill(tx, n, 20 + k);
		CHECK_OK(fi_recv(B.ep, rx, n, NULL, FI_ADDR_UNSPEC, (void *)0x52));
		CHECK_OK(POST(fi_send(A.ep, tx, n, NULL, A.peer, NULL), &A, &B));
		EXPECT_COMP(&B, &A, &c);
		CHECK(c.op_context == (void *)0x52);
		CHECK_EQ(c.len, n);
		CHECK(check_fill(rx, n, 20 + k));
		EXPECT_COMP(&A, &B, &c);
	}
	unpair();
}

static void large_transfer(size_t n)
{
	char *tx = malloc(n), *rx = malloc(n);
	struct fi_cq_tagged_entry c;
	CHECK(tx && rx);
	fill(tx, n, 7);
	memset(rx, 0, n);
	CHECK_OK(fi_trecv(B.ep, rx, n, NULL, FI_ADDR_UNSPEC, 9, 0, (void *)0x99));
	CHECK_OK(POST(fi_tsend(A.ep, tx, n, NULL, A.peer, 9, (void *)0x98), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	CHECK_EQ(c.len, n);
	CHECK_EQ(c.tag, 9);
	CHECK(check_fill(rx, n, 7));
	EXPECT_COMP(&A, &B, &c);
	CHECK(c.op_context == (void *)0x98);
	/* unexpected large message */
	fill(tx, n, 8);
	CHECK_OK(POST(fi_tsend(A.ep, tx, n, NULL, A.peer, 10, NULL), &A, &B));
	for (int i = 0; i < 10; i++)
		poke(&A, &B);
	CHECK_OK(fi_trecv(B.ep, rx, n, NULL, FI_ADDR_UNSPEC, 10, 0, NULL));
	EXPECT_COMP(&B, &A, &c);
	CHECK(check_fill(rx, n, 8));
	EXPECT_COMP(&A, &B, &c);
	free(tx);
	free(rx);
}

TEST(large_messages)
{
	SETUP(&DEF, NULL);
	large_transfer(1 << 20);
	large_transfer((16 << 20) + 3);
	unpair();
}

TEST(large_messages_without_cma)
{
	setenv("FI_RUSTFAB_SHM_CMA", "0", 1);
	SETUP(&DEF, NULL);
	unsetenv("FI_RUSTFAB_SHM_CMA");
	large_transfer(1 << 20);
	large_transfer((4 << 20) + 5);
	unpair();
}

TEST(tagged_matching_and_ignore)
{
	uint64_t v[4] = {0}, one;
	struct fi_cq_tagged_entry c;
	SETUP(&DEF, NULL);
	CHECK_OK(fi_trecv(B.ep, &v[0], 8, NULL, FI_ADDR_UNSPEC, 0x100, 0xff, (void *)0));
	CHECK_OK(fi_trecv(B.ep, &v[1], 8, NULL, FI_ADDR_UNSPEC, 0x200, 0, (void *)1));
	one = 2;
	CHECK_OK(POST(fi_tsend(A.ep, &one, 8, NULL, A.peer, 0x200, NULL), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.op_context == (void *)1);
	CHECK_EQ(c.tag, 0x200);
	CHECK(c.flags & FI_TAGGED);
	one = 1;
	CHECK_OK(POST(fi_tsend(A.ep, &one, 8, NULL, A.peer, 0x1ab, NULL), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.op_context == (void *)0);
	CHECK_EQ(c.tag, 0x1ab); /* the sender's full tag */
	CHECK_EQ(v[0], 1);
	/* bit 63 is usable */
	CHECK_OK(fi_trecv(B.ep, &v[2], 8, NULL, FI_ADDR_UNSPEC, 1ULL << 63, 0, (void *)2));
	CHECK_OK(POST(fi_tsend(A.ep, &one, 8, NULL, A.peer, 1ULL << 63, NULL), &A, &B));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.op_context == (void *)2);
	CHECK_EQ(c.tag, 1ULL << 63);
	unpair();
}

TEST(send_after_send_ordering)
{
	uint32_t rx[64], v;
	struct fi_cq_tagged_entry c;
	SETUP(&DEF, NULL);
	for (uint32_t i = 0; i < 64; i++) {
		v = i;
		CHECK_OK(POST(fi_tsend(A.ep, &v, 4, NULL, A.peer, 7, NULL), &A, &B));
	}
	for (uint32_t i = 0; i < 64; i++)
		CHECK_OK(fi_trecv(B.ep, &rx[i], 4, NULL, FI_ADDR_UNSPEC, 7, 0, (void *)(uintptr_t)i));
	for (uint32_t i = 0; i < 64; i++) {
		EXPECT_COMP(&B, &A, &c);
		CHECK_EQ((uintptr_t)c.op_context, i);
		CHECK_EQ(rx[i], i);
	}
	unpair();
}

TEST(directed_receive)
{
	struct end C;
	uint64_t x = 0, y = 0, v;
	fi_addr_t c_in_b, b_in_c;
	struct fi_cq_tagged_entry c;
	struct end_opts o = {.caps = FI_MSG | FI_TAGGED | FI_DIRECTED_RECV};
	SETUP(&o, NULL);
	CHECK_OK(end_open(&C, &o));
	CHECK_EQ(fi_av_insert(B.av, C.addr, 1, &c_in_b, 0, NULL), 1);
	CHECK_EQ(fi_av_insert(C.av, B.addr, 1, &b_in_c, 0, NULL), 1);
	/* B only accepts from C */
	CHECK_OK(fi_trecv(B.ep, &x, 8, NULL, c_in_b, 1, 0, (void *)0xc));
	v = 111;
	CHECK_OK(POST(fi_tsend(A.ep, &v, 8, NULL, A.peer, 1, NULL), &A, &B));
	for (int i = 0; i < 20; i++)
		poke(&A, &B);
	CHECK_EQ(wait_comp(&B, &A, &c, NULL, NULL, 0.2), 0); /* A's message is unexpected */
	v = 222;
	CHECK_OK(POST(fi_tsend(C.ep, &v, 8, NULL, b_in_c, 1, NULL), &C, &B));
	EXPECT_COMP(&B, &C, &c);
	CHECK(c.op_context == (void *)0xc);
	CHECK_EQ(x, 222);
	/* FI_ADDR_UNSPEC takes A's queued message */
	CHECK_OK(fi_trecv(B.ep, &y, 8, NULL, FI_ADDR_UNSPEC, 1, 0, (void *)0xa));
	EXPECT_COMP(&B, &A, &c);
	CHECK_EQ(y, 111);
	end_close(&C);
	unpair();
}

TEST(multi_recv)
{
	static char buf[4096];
	char tx[1000];
	struct fi_msg m = {0};
	struct iovec io = {buf, sizeof buf};
	struct fi_cq_tagged_entry c;
	size_t min = 1024, len = sizeof min;
	struct end_opts o = {.caps = FI_MSG | FI_MULTI_RECV};
	SETUP(&o, NULL);
	CHECK_OK(fi_setopt(&B.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof min));
	min = 0;
	CHECK_OK(fi_getopt(&B.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, &len));
	CHECK_EQ(min, 1024);
	m.msg_iov = &io;
	m.iov_count = 1;
	m.addr = FI_ADDR_UNSPEC;
	m.context = (void *)0x3;
	CHECK_OK(fi_recvmsg(B.ep, &m, FI_MULTI_RECV | FI_COMPLETION));
	for (int i = 0; i < 5; i++) {
		fill(tx, sizeof tx, 30 + i);
		CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, A.peer, NULL), &A, &B));
	}
	size_t off = 0;
	for (int i = 0; i < 4; i++) {
		EXPECT_COMP(&B, &A, &c);
		CHECK(c.op_context == (void *)0x3);
		CHECK_EQ(c.len, 1000);
		CHECK(c.buf == buf + off);
		CHECK(check_fill(c.buf, 1000, 30 + i));
		off += 1000;
		/* After the 4th message 96 bytes are left (< 1024): the buffer is
		 * released, flagged on that completion only. */
		CHECK_EQ(!!(c.flags & FI_MULTI_RECV), i == 3);
	}
	/* The 5th message waits for the next receive. */
	char rx[1000];
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, (void *)0x4));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.op_context == (void *)0x4);
	CHECK(check_fill(rx, 1000, 34));
	/* A message that does not fit the space left releases the buffer
	 * (an empty FI_MULTI_RECV completion) and goes to the next receive. */
	min = 16;
	CHECK_OK(fi_setopt(&B.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof min));
	io.iov_len = 1500;
	CHECK_OK(fi_recvmsg(B.ep, &m, FI_MULTI_RECV | FI_COMPLETION));
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, (void *)0x5));
	for (int i = 0; i < 2; i++) {
		fill(tx, sizeof tx, 40 + i);
		CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, A.peer, NULL), &A, &B));
	}
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.op_context == (void *)0x3);
	CHECK_EQ(c.len, 1000);
	CHECK(!(c.flags & FI_MULTI_RECV));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.op_context == (void *)0x3);
	CHECK_EQ(c.len, 0);
	CHECK(c.flags & FI_MULTI_RECV);
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.op_context == (void *)0x5);
	CHECK(check_fill(rx, 1000, 41));
	unpair();
}

TEST(cancel_gives_ecanceled)
{
	char rx[8];
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err = {0};
	SETUP(&DEF, NULL);
	CHECK_OK(fi_trecv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, 5, 0, (void *)0xcc));
	CHECK_OK(fi_cancel(&B.ep->fid, (void *)0xcc));
	CHECK_EQ(wait_comp(&B, &A, &c, &err, NULL, 5), -FI_EAVAIL);
	CHECK_EQ(err.err, FI_ECANCELED);
	CHECK(err.op_context == (void *)0xcc);
	CHECK_EQ(fi_cancel(&B.ep->fid, (void *)0xcc), -FI_ENOENT);
	/* exactly one completion */
	CHECK_EQ(wait_comp(&B, &A, &c, &err, NULL, 0.2), 0);
	unpair();
}

TEST(selective_completion)
{
	char tx[8] = "abcdefg", rx[8];
	struct fi_cq_tagged_entry c;
	struct fi_msg m = {0};
	struct iovec io = {tx, sizeof tx};
	struct end_opts o = {.selective = 1};
	SETUP(&o, NULL);
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, (void *)1));
	CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, A.peer, (void *)2), &A, &B));
	for (int i = 0; i < 20; i++)
		poke(&A, &B);
	CHECK_EQ(A.nstash + B.nstash, 0); /* neither side asked for completions */
	CHECK(memcmp(rx, tx, 8) == 0);
	m.msg_iov = &io;
	m.iov_count = 1;
	m.addr = A.peer;
	m.context = (void *)3;
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, (void *)4));
	CHECK_OK(POST(fi_sendmsg(A.ep, &m, FI_COMPLETION), &A, &B));
	EXPECT_COMP(&A, &B, &c);
	CHECK(c.op_context == (void *)3);
	CHECK_EQ(wait_comp(&B, &A, &c, NULL, NULL, 0.2), 0);
	unpair();
}

TEST(delivery_complete)
{
	static char tx[50000], rx[50000];
	struct fi_cq_tagged_entry c;
	struct end_opts o = {.tx_op_flags = FI_DELIVERY_COMPLETE};
	SETUP(&o, NULL);
	CHECK(A.info->tx_attr->op_flags & FI_DELIVERY_COMPLETE);
	fill(tx, 100, 40);
	CHECK_OK(POST(fi_send(A.ep, tx, 100, NULL, A.peer, (void *)0xd), &A, &B));
	/* Not delivered yet (no receive posted): no send completion. */
	for (int i = 0; i < 20; i++)
		poke(&A, NULL);
	CHECK_EQ(A.nstash, 0);
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
	EXPECT_COMP(&B, &A, &c);
	EXPECT_COMP(&A, &B, &c);
	CHECK(c.op_context == (void *)0xd);
	unpair();
}

/*
 * Send completion levels (fi_cq(3); docs/protocol.md, Completion levels):
 * the endpoint's default (tx op_flags 0 or FI_TRANSMIT_COMPLETE) and the
 * level fi_sendmsg names (none, FI_INJECT_COMPLETE, FI_TRANSMIT_COMPLETE).
 * The sender first progresses alone, the receiver not at all:
 * - tcp, transmit complete in effect: no completion (a socket buffer is
 *   not the peer's); once the receiver progresses — with NO receive
 *   posted, as an application that waits for its sends before posting its
 *   receives — the send completes (answered on arrival, not on delivery);
 * - otherwise (tcp with no level or inject complete; shm and auto, same
 *   host, at any of these levels): complete already.
 * The message then arrives whole at a receive posted afterwards.
 */
TEST(send_completion_levels)
{
	static const uint64_t defaults[] = {0, FI_TRANSMIT_COMPLETE};
	static const uint64_t levels[] = {~0ull, 0, FI_INJECT_COMPLETE, FI_TRANSMIT_COMPLETE};
	static char tx[100], rx[100];
	struct fi_cq_tagged_entry c;
	int tcp = !strcmp(rf_transport(), "tcp");
	unsigned seed = 60;
	for (size_t d = 0; d < sizeof(defaults) / sizeof(defaults[0]); d++) {
		struct end_opts o = {.tx_op_flags = defaults[d]};
		SETUP(&o, NULL);
		/* Connected first (on tcp the first record waits for the
		 * handshake, which needs the peer). */
		CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, rx));
		CHECK_OK(POST(fi_sendmsg(A.ep, &(struct fi_msg){.msg_iov = &(struct iovec){tx, 1}, .iov_count = 1,
							  .addr = A.peer, .context = tx},
					 FI_COMPLETION | FI_DELIVERY_COMPLETE),
			      &A, &B));
		EXPECT_COMP(&A, &B, &c);
		EXPECT_COMP(&B, &A, &c);
		for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++, seed++) {
			uint64_t level = levels[i];
			struct iovec io = {tx, sizeof tx};
			struct fi_msg m = {.msg_iov = &io, .iov_count = 1, .addr = A.peer, .context = tx};
			fill(tx, sizeof tx, seed);
			if (level == ~0ull) /* fi_send: the endpoint's default */
				CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, A.peer, tx), &A, NULL));
			else
				CHECK_OK(POST(fi_sendmsg(A.ep, &m, FI_COMPLETION | level), &A, NULL));
			uint64_t eff = level == ~0ull || level == 0 ? defaults[d] : level;
			int must_wait = tcp && eff == FI_TRANSMIT_COMPLETE;
			for (int k = 0; k < 200; k++)
				poke1(&A);
			int early = A.nstash > 0;
			if (early && must_wait) {
				unpair();
				FAIL_AT("default 0x%" PRIx64 ", level 0x%" PRIx64 ": complete before the peer progressed",
					defaults[d], level);
			}
			if (!early && !must_wait) {
				unpair();
				FAIL_AT("default 0x%" PRIx64 ", level 0x%" PRIx64 ": not complete once written",
					defaults[d], level);
			}
			/* The receiver progresses, no receive posted. */
			EXPECT_COMP(&A, &B, &c);
			CHECK(c.op_context == tx);
			CHECK_EQ(c.flags, FI_SEND | FI_MSG);
			memset(tx, 0, sizeof tx);
			memset(rx, 0, sizeof rx);
			CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, rx));
			EXPECT_COMP(&B, &A, &c);
			CHECK(c.op_context == rx);
			CHECK(check_fill(rx, sizeof rx, seed));
		}
		unpair();
	}
}

TEST(source_address_and_source_err)
{
	char rx[8], tx[8] = "1234567";
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	fi_addr_t src = 12345;
	char ed[128];
	struct end_opts o = {.caps = FI_MSG | FI_TAGGED | FI_SOURCE};
	struct end_opts oe = {.caps = FI_MSG | FI_TAGGED | FI_SOURCE | FI_SOURCE_ERR};
	SETUP(&o, NULL);
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
	CHECK_OK(POST(fi_send(A.ep, tx, 8, NULL, A.peer, NULL), &A, &B));
	CHECK_EQ(wait_comp(&B, &A, &c, NULL, &src, 10), 1);
	CHECK_EQ(src, B.peer); /* A as B's AV knows it */
	unpair();

	/* Sender not in the receiver's AV: FI_ADDR_NOTAVAIL with FI_SOURCE. */
	CHECK_OK(end_open(&A, &o));
	CHECK_OK(end_open(&B, &o));
	CHECK_EQ(fi_av_insert(A.av, B.addr, 1, &A.peer, 0, NULL), 1);
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
	CHECK_OK(POST(fi_send(A.ep, tx, 8, NULL, A.peer, NULL), &A, &B));
	CHECK_EQ(wait_comp(&B, &A, &c, NULL, &src, 10), 1);
	CHECK_EQ(src, FI_ADDR_NOTAVAIL);
	unpair();

	/* With FI_SOURCE_ERR: an error entry carrying the raw address. */
	CHECK_OK(end_open(&A, &oe));
	CHECK_OK(end_open(&B, &oe));
	CHECK_EQ(fi_av_insert(A.av, B.addr, 1, &A.peer, 0, NULL), 1);
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, (void *)0xe));
	CHECK_OK(POST(fi_send(A.ep, tx, 8, NULL, A.peer, NULL), &A, &B));
	memset(&err, 0, sizeof err);
	err.err_data = ed;
	err.err_data_size = sizeof ed;
	CHECK_EQ(wait_comp(&B, &A, &c, &err, NULL, 10), -FI_EAVAIL);
	CHECK_EQ(err.err, FI_EADDRNOTAVAIL);
	CHECK(err.op_context == (void *)0xe);
	CHECK_EQ(err.len, 8);
	CHECK(memcmp(rx, tx, 8) == 0);
	if (strcmp(rf_transport(), "auto")) {
		CHECK_EQ(err.err_data_size, A.addrlen);
		CHECK(memcmp(ed, A.addr, A.addrlen) == 0);
	} else {
		/* auto: the address of the path the message came by (the
		 * sender's shm address on this host) — also the sender's */
		CHECK(err.err_data_size > 0 && err.err_data_size <= sizeof ed);
	}
	/* The address from err_data is insertable and can be replied to. */
	fi_addr_t back;
	CHECK_EQ(fi_av_insert(B.av, ed, 1, &back, 0, NULL), 1);
	CHECK_OK(fi_recv(A.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, (void *)0xf));
	CHECK_OK(POST(fi_send(B.ep, tx, 8, NULL, back, NULL), &B, &A));
	EXPECT_COMP(&A, &B, &c);
	unpair();
}

TEST(peek_claim_discard)
{
	uint64_t v = 5, r = 0;
	struct fi_msg_tagged m = {0};
	struct iovec io = {&r, 8};
	struct fi_context2 ctx;
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err = {0};
	SETUP(&DEF, NULL);
	/* no message: FI_ENOMSG error completion */
	m.addr = FI_ADDR_UNSPEC;
	m.tag = 77;
	m.context = &ctx;
	CHECK_OK(fi_trecvmsg(B.ep, &m, FI_PEEK | FI_COMPLETION));
	CHECK_EQ(wait_comp(&B, &A, &c, &err, NULL, 5), -FI_EAVAIL);
	CHECK_EQ(err.err, FI_ENOMSG);
	/* message present: peek reports length and tag, message stays */
	CHECK_OK(POST(fi_tsend(A.ep, &v, 8, NULL, A.peer, 77, NULL), &A, &B));
	int found = 0;
	for (int i = 0; i < 200 && !found; i++) {
		poke(&A, NULL);
		CHECK_OK(fi_trecvmsg(B.ep, &m, FI_PEEK | FI_COMPLETION));
		int w = wait_comp(&B, &A, &c, &err, NULL, 5);
		found = w == 1;
		CHECK(w == 1 || (w == -FI_EAVAIL && err.err == FI_ENOMSG));
	}
	CHECK(found);
	CHECK_EQ(c.len, 8);
	CHECK_EQ(c.tag, 77);
	/* peek + claim, then claim-receive with the same context */
	CHECK_OK(fi_trecvmsg(B.ep, &m, FI_PEEK | FI_CLAIM | FI_COMPLETION));
	EXPECT_COMP(&B, &A, &c);
	/* a plain receive no longer sees the claimed message */
	m.msg_iov = &io;
	m.iov_count = 1;
	CHECK_OK(fi_trecvmsg(B.ep, &m, FI_CLAIM | FI_COMPLETION));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.op_context == &ctx);
	CHECK_EQ(r, 5);
	CHECK(c.flags & FI_CLAIM);
	/* peek + discard drops the message */
	CHECK_OK(POST(fi_tsend(A.ep, &v, 8, NULL, A.peer, 78, NULL), &A, &B));
	for (int i = 0; i < 20; i++)
		poke(&A, NULL);
	m.msg_iov = NULL;
	m.iov_count = 0;
	m.tag = 78;
	CHECK_OK(fi_trecvmsg(B.ep, &m, FI_PEEK | FI_DISCARD | FI_COMPLETION));
	EXPECT_COMP(&B, &A, &c);
	CHECK_OK(fi_trecvmsg(B.ep, &m, FI_PEEK | FI_COMPLETION));
	CHECK_EQ(wait_comp(&B, &A, &c, &err, NULL, 5), -FI_EAVAIL);
	CHECK_EQ(err.err, FI_ENOMSG);
	unpair();
}

TEST(unexpected_flood_backpressure)
{
	/* More unexpected data than the receiver's budget: the sender is held
	 * back with -FI_EAGAIN, nothing is lost, and all arrives in order once
	 * receives are posted. */
	setenv("FI_RUSTFAB_UNEXP_BUDGET", "65536", 1);
	SETUP(&DEF, NULL);
	unsetenv("FI_RUSTFAB_UNEXP_BUDGET");
	/* N * SZ (12.8 MB) above what tcp's kernel buffers hold while the
	 * receiver holds back (an 8 MiB send buffer, docs/performance-history.md
	 * "tcpbw"), so the push-back must come from the provider; N within
	 * what the sender's CQ and stash hold unread. Eager on shm too. */
	enum { N = 800, SZ = 16000 };
	static char tx[SZ], rx[SZ];
	int sent = 0, eagain = 0;
	double deadline = now_sec() + 5;
	while (sent < N && now_sec() < deadline) {
		fill(tx, SZ, sent);
		ssize_t r = fi_send(A.ep, tx, SZ, NULL, A.peer, NULL);
		if (r == -FI_EAGAIN) {
			eagain++;
			poke(&A, &B);
			if (eagain > 1000)
				break;
			continue;
		}
		CHECK_OK(r);
		sent++;
	}
	CHECK(eagain > 0);
	CHECK(sent < N);
	struct fi_cq_tagged_entry c;
	int got = 0;
	while (got < N) {
		CHECK_OK(fi_recv(B.ep, rx, SZ, NULL, FI_ADDR_UNSPEC, NULL));
		while (sent < N) {
			fill(tx, SZ, sent);
			ssize_t r = fi_send(A.ep, tx, SZ, NULL, A.peer, NULL);
			if (r == -FI_EAGAIN)
				break;
			CHECK_OK(r);
			sent++;
		}
		EXPECT_COMP(&B, &A, &c);
		CHECK(check_fill(rx, SZ, got));
		got++;
	}
	unpair();
}

TEST(large_unexpected_does_not_block_later_messages)
{
	/* MPI's progress rule: a matched pair must complete even while an
	 * earlier, larger-than-any-buffer message from the same peer waits for
	 * its receive. Large messages therefore go by rendezvous on both
	 * transports (only a descriptor waits). */
	setenv("FI_RUSTFAB_UNEXP_BUDGET", "1048576", 1);
	SETUP(&DEF, NULL);
	unsetenv("FI_RUSTFAB_UNEXP_BUDGET");
	size_t n = 32u << 20;
	char *big = malloc(n), *bigr = malloc(n);
	uint64_t small = 0x5a5a, got = 0;
	struct fi_cq_tagged_entry c;
	fill(big, n, 77);
	CHECK_OK(POST(fi_tsend(A.ep, big, n, NULL, A.peer, 1, (void *)0xb1), &A, &B));
	CHECK_OK(POST(fi_tsend(A.ep, &small, 8, NULL, A.peer, 2, (void *)0xb2), &A, &B));
	CHECK_OK(fi_trecv(B.ep, &got, 8, NULL, FI_ADDR_UNSPEC, 2, 0, (void *)0xc2));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.op_context == (void *)0xc2);
	CHECK_EQ(got, 0x5a5a);
	CHECK_OK(fi_trecv(B.ep, bigr, n, NULL, FI_ADDR_UNSPEC, 1, 0, (void *)0xc1));
	EXPECT_COMP(&B, &A, &c);
	CHECK(c.op_context == (void *)0xc1);
	CHECK(check_fill(bigr, n, 77));
	/* both sends complete */
	int sends = 0;
	for (int i = 0; i < 2; i++) {
		EXPECT_COMP(&A, &B, &c);
		sends++;
	}
	CHECK_EQ(sends, 2);
	free(big);
	free(bigr);
	unpair();
}

/* FI_PROGRESS_AUTO: the sender's data moves without the sender calling into
 * rustfab. Each end has its own fabric and domain, and only the receiver is
 * polled, so nothing but the sender's own progress can write its burst of
 * small sends (which a manual-progress TCP endpoint coalesces until its next
 * call) or stream a rendezvous message. */
TEST(auto_progress_moves_data_without_calls)
{
	enum { N = 16 };
	static char tx[N][64], rx[N][64];
	size_t n = 4u << 20;
	char *big = malloc(n), *bigr = calloc(1, n);
	struct fi_cq_tagged_entry c;
	struct end_opts autop = {.auto_progress = 1};
	CHECK(big && bigr);
	SETUP(&autop, &DEF);
	CHECK_EQ(A.info->domain_attr->data_progress, FI_PROGRESS_AUTO);
	for (int i = 0; i < N; i++)
		CHECK_OK(fi_trecv(B.ep, rx[i], sizeof rx[i], NULL, FI_ADDR_UNSPEC, (uint64_t)i, 0, NULL));
	CHECK_OK(fi_trecv(B.ep, bigr, n, NULL, FI_ADDR_UNSPEC, 100, 0, (void *)0xb16));
	fill(big, n, 9);
	for (int i = 0; i < N; i++) {
		fill(tx[i], sizeof tx[i], (unsigned)i);
		CHECK_OK(POST(fi_tsend(A.ep, tx[i], sizeof tx[i], NULL, A.peer, (uint64_t)i, NULL), &A, &B));
	}
	CHECK_OK(POST(fi_tsend(A.ep, big, n, NULL, A.peer, 100, NULL), &A, &B));
	/* From here on only B is polled. */
	for (int i = 0; i <= N; i++) {
		struct fi_cq_err_entry err;
		memset(&err, 0, sizeof(err));
		int w = wait_comp(&B, NULL, &c, &err, NULL, 10);
		if (w != 1) {
			unpair();
			FAIL_AT("receive %d of %d: %d (err %d)", i, N + 1, w, err.err);
		}
	}
	for (int i = 0; i < N; i++)
		CHECK(check_fill(rx[i], sizeof rx[i], (unsigned)i));
	CHECK(check_fill(bigr, n, 9));
	for (int i = 0; i <= N; i++)
		EXPECT_COMP(&A, NULL, &c);
	free(big);
	free(bigr);
	unpair();
}

/*
 * Waits for the completion of `ctx` on e (driving `other` too unless NULL);
 * completions of `skip` read on the way are counted in *skipped. 1, or what
 * went wrong (0: timeout, -FI_EOTHER: a completion of another context).
 */
static int wait_ctx(struct end *e, struct end *other, void *ctx, void *skip, int *skipped,
		    struct fi_cq_tagged_entry *c)
{
	for (;;) {
		struct fi_cq_err_entry err;
		memset(&err, 0, sizeof(err));
		int w = wait_comp(e, other, c, &err, NULL, 10);
		if (w != 1)
			return w;
		if (c->op_context == ctx)
			return 1;
		if (c->op_context != skip)
			return -FI_EOTHER;
		(*skipped)++;
	}
}

/*
 * Reads e's completions (driving `other` too unless NULL) until *done
 * reaches `want`, each one of `ctx`. 1, or what went wrong (0: timeout,
 * -FI_EOTHER: a completion of another context).
 */
static int drain_ctx(struct end *e, struct end *other, void *ctx, int *done, int want)
{
	while (*done < want) {
		struct fi_cq_tagged_entry c;
		int w = wait_comp(e, other, &c, NULL, NULL, 10);
		if (w != 1)
			return w;
		if (c.op_context != ctx)
			return -FI_EOTHER;
		(*done)++;
	}
	return 1;
}

/*
 * The ping-pong fabtests' fi_rdm_pingpong runs: both domains opened with
 * FI_THREAD_DOMAIN (one thread: every call serialised, the model a
 * provider may drop its locks for; docs/performance-history.md), with manual and
 * with automatic progress; sizes from inline to rendezvous, each message's
 * bytes and completion checked. With FI_PROGRESS_AUTO each side polls only
 * its own CQ, so the other side's part of a transfer (a TCP sender's
 * stream) must come from its domain's progress thread.
 */
TEST(thread_domain_ping_pong)
{
	static const size_t sizes[] = {1, 64, 4096, 65536, 1u << 20};
	size_t max = 1u << 20;
	char *ta = malloc(max), *ra = malloc(max), *tb = malloc(max), *rb = malloc(max);
	CHECK(ta && ra && tb && rb);
	for (int autop = 0; autop <= 1; autop++) {
		struct end_opts o = {.threading = FI_THREAD_DOMAIN, .auto_progress = autop};
		struct fi_cq_tagged_entry c;
		int sa_done = 0, sb_done = 0, rounds = 0;
		SETUP(&o, NULL);
		CHECK_EQ(A.info->domain_attr->threading, FI_THREAD_DOMAIN);
		CHECK_EQ(A.info->domain_attr->data_progress, autop ? FI_PROGRESS_AUTO : FI_PROGRESS_MANUAL);
		struct end *oa = autop ? NULL : &B, *ob = autop ? NULL : &A;
		for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
			size_t n = sizes[k];
			int iters = n > 65536 ? 4 : 50;
			CHECK_OK(fi_recv(B.ep, rb, n, NULL, FI_ADDR_UNSPEC, (void *)0xb1));
			for (int i = 0; i < iters; i++, rounds++) {
				unsigned seed = (unsigned)(k * 1000 + i);
				fill(ta, n, seed);
				CHECK_OK(fi_recv(A.ep, ra, n, NULL, FI_ADDR_UNSPEC, (void *)0xa1));
				CHECK_OK(POST(fi_send(A.ep, ta, n, NULL, A.peer, (void *)0xa2), &A, &B));
				int w = wait_ctx(&B, ob, (void *)0xb1, (void *)0xb2, &sb_done, &c);
				if (w != 1) {
					unpair();
					FAIL_AT("progress %d size %zu round %d: B's receive: %d", autop, n, i, w);
				}
				CHECK_EQ(c.len, n);
				CHECK(check_fill(rb, n, seed));
				fill(tb, n, seed + 7);
				CHECK_OK(fi_recv(B.ep, rb, n, NULL, FI_ADDR_UNSPEC, (void *)0xb1));
				CHECK_OK(POST(fi_send(B.ep, tb, n, NULL, B.peer, (void *)0xb2), &B, &A));
				w = wait_ctx(&A, oa, (void *)0xa1, (void *)0xa2, &sa_done, &c);
				if (w != 1) {
					unpair();
					FAIL_AT("progress %d size %zu round %d: A's receive: %d", autop, n, i, w);
				}
				CHECK_EQ(c.len, n);
				CHECK(check_fill(ra, n, seed + 7));
			}
			/* B's last receive of this size stays posted: cancel it. */
			CHECK_OK(fi_cancel(&B.ep->fid, (void *)0xb1));
			struct fi_cq_err_entry err;
			memset(&err, 0, sizeof(err));
			for (;;) {
				int w = wait_comp(&B, ob, &c, &err, NULL, 10);
				if (w == -FI_EAVAIL && err.err == FI_ECANCELED && err.op_context == (void *)0xb1)
					break;
				if (w != 1 || c.op_context != (void *)0xb2) {
					unpair();
					FAIL_AT("progress %d size %zu: cancel: %d (err %d)", autop, n, w, err.err);
				}
				sb_done++;
			}
		}
		/* Every send completed once. */
		int w = drain_ctx(&A, oa, (void *)0xa2, &sa_done, rounds);
		if (w == 1)
			w = drain_ctx(&B, ob, (void *)0xb2, &sb_done, rounds);
		if (w != 1) {
			unpair();
			FAIL_AT("progress %d: sends A %d, B %d of %d (%d)", autop, sa_done, sb_done, rounds, w);
		}
		unpair();
	}
	free(ta);
	free(ra);
	free(tb);
	free(rb);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	printf("# transport: %s\n", rf_transport());
	RUN(send_recv_basic);
	RUN(unexpected_then_recv);
	RUN(sendv_recvv);
	RUN(sendmsg_recvmsg_and_cq_data);
	RUN(inject_has_no_completion);
	RUN(zero_length);
	RUN(truncation_reports_olen_and_next_intact);
	RUN(large_messages);
	if (!strcmp(rf_transport(), "shm"))
		RUN(large_messages_without_cma);
	RUN(tagged_matching_and_ignore);
	RUN(send_after_send_ordering);
	RUN(directed_receive);
	RUN(multi_recv);
	RUN(cancel_gives_ecanceled);
	RUN(selective_completion);
	RUN(delivery_complete);
	RUN(send_completion_levels);
	RUN(source_address_and_source_err);
	RUN(peek_claim_discard);
	RUN(unexpected_flood_backpressure);
	RUN(large_unexpected_does_not_block_later_messages);
	RUN(auto_progress_moves_data_without_calls);
	RUN(thread_domain_ping_pong);
	return harness_done();
}
