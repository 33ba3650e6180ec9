/*
 * TCP peer identity and authentication against hostile peers speaking the
 * wire by hand (docs/protocol.md, docs/security.md "## TCP"): an impostor
 * claiming a live peer's address, an address that is not the connection's
 * source, authentication keys on both sides, on one side only and
 * different, an impostor without the key or with a wrong proof, a
 * connection flood beyond FI_RUSTFAB_TCP_MAX_CONNS, and the RTS that must
 * not carry our buffer addresses. Always over tcp on loopback.
 */
#include "rdm_common.h"
#include <arpa/inet.h>
#include <fcntl.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

static struct end A, B, C;

static void close_all(void)
{
	end_close(&A);
	end_close(&B);
	end_close(&C);
}

static const struct end_opts DEF = {0};

static int addr_port(const void *a)
{
	return ntohs(((const struct sockaddr_in *)a)->sin_port);
}

/* ESTABLISHED IPv4 connections whose local port is `port`. */
static int established_on(int port)
{
	int n = 0;
	FILE *fp = fopen("/proc/net/tcp", "r");
	char line[512];
	if (!fp)
		return -1;
	while (fgets(line, sizeof line, fp)) {
		char local[128], remote[128];
		unsigned st;
		if (sscanf(line, " %*d: %127s %127s %x", local, remote, &st) != 3)
			continue;
		char *colon = strrchr(local, ':');
		if (colon && st == 1 && (int)strtol(colon + 1, NULL, 16) == port)
			n++;
	}
	fclose(fp);
	return n;
}

/* The 64-byte record header (docs/protocol.md), little-endian. */
static void put_hdr(uint8_t *h, uint8_t op, uint64_t len, uint64_t tag, uint64_t data, uint64_t msg_id,
		    uint64_t offset, uint32_t payload, uint32_t aux)
{
	memset(h, 0, 64);
	h[0] = 0x46;
	h[1] = 0x52;
	h[2] = 1;
	h[3] = op;
	for (int i = 0; i < 8; i++) {
		h[8 + i] = (uint8_t)(len >> (8 * i));
		h[16 + i] = (uint8_t)(tag >> (8 * i));
		h[24 + i] = (uint8_t)(data >> (8 * i));
		h[32 + i] = (uint8_t)(msg_id >> (8 * i));
		h[40 + i] = (uint8_t)(offset >> (8 * i));
	}
	for (int i = 0; i < 4; i++) {
		h[48 + i] = (uint8_t)(payload >> (8 * i));
		h[52 + i] = (uint8_t)(aux >> (8 * i));
	}
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* A HELLO (version 2) of `kind` claiming 127.x address `claim`. */
static void hello(uint8_t out[128], int kind, const struct sockaddr_in *claim, uint64_t nonce, int keyed)
{
	put_hdr(out, 6, 64, nonce, 2, 0, keyed ? 1 : 0, 64, (uint32_t)kind);
	memset(out + 64, 0, 64);
	memcpy(out + 64, claim, 16);
	for (int i = 0; i < 16; i++)
		out[80 + i] = (uint8_t)(nonce * 7 + i); /* a challenge */
}

static struct sockaddr_in lo_addr(const char *ip, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

/* A raw connection to `target` from source IP `src_ip` (NULL: any) that
 * says `h`; non-blocking. */
static int raw_connect(struct end *target, const char *src_ip, const uint8_t *h, size_t n)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0)
		return -1;
	if (src_ip) {
		struct sockaddr_in me = lo_addr(src_ip, 0);
		if (bind(s, (struct sockaddr *)&me, sizeof me) != 0) {
			close(s);
			return -1;
		}
	}
	if (connect(s, (struct sockaddr *)target->addr, sizeof(struct sockaddr_in)) != 0 ||
	    write(s, h, n) != (ssize_t)n) {
		close(s);
		return -1;
	}
	fcntl(s, F_SETFL, O_NONBLOCK);
	return s;
}

/* Reads up to `want` bytes (or until EOF) within `secs` while the
 * endpoints progress; returns what arrived (-1: reset). *eof tells EOF. */
static ssize_t read_answer(int s, uint8_t *buf, size_t want, struct end *t, struct end *o, double secs, int *eof)
{
	size_t got = 0;
	double deadline = now_sec() + secs * rf_time_scale();
	*eof = 0;
	while (got < want && now_sec() < deadline) {
		if (o)
			poke(t, o);
		else
			poke1(t);
		ssize_t r = read(s, buf + got, want - got);
		if (r > 0)
			got += (size_t)r;
		else if (r == 0) {
			*eof = 1;
			break;
		} else if (errno != EAGAIN && errno != EWOULDBLOCK) {
			*eof = 1;
			break;
		}
	}
	return (ssize_t)got;
}

/* A raw HELLO claiming B's address (B live, with traffic) is never taken
 * as B: A keeps sending to the real B, the impostor gets no data and is
 * refused ("in use") once the live connection outlasts its wait. */
TEST(impostor_cannot_displace_a_live_peer)
{
	char rx[16], tx[16] = "to the real B";
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err = {0};
	CHECK_OK(end_open(&A, &DEF));
	CHECK_OK(end_open(&B, &DEF));
	CHECK_OK(ends_connect(&A, &B));
	/* B dials A: A's connection for B's address is the inbound one. */
	CHECK_OK(fi_recv(A.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
	CHECK_OK(POST(fi_send(B.ep, tx, sizeof tx, NULL, B.peer, NULL), &B, &A));
	CHECK_EQ(wait_comp(&A, &B, &c, NULL, NULL, 5), 1);
	CHECK_EQ(wait_comp(&B, &A, &c, NULL, NULL, 5), 1);
	uint8_t h[128], ans[256];
	struct sockaddr_in claim;
	memcpy(&claim, B.addr, sizeof claim);
	hello(h, 0, &claim, 0x5eedULL, 0);
	int s = raw_connect(&A, NULL, h, sizeof h);
	CHECK(s >= 0);
	/* While the impostor waits, A's sends still reach the real B. */
	for (int i = 0; i < 3; i++) {
		CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
		CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, A.peer, NULL), &A, &B));
		CHECK_EQ(wait_comp(&B, &A, &c, NULL, NULL, 5), 1);
		CHECK(!strcmp(rx, tx));
		CHECK_EQ(wait_comp(&A, &B, &c, &err, NULL, 5), 1);
	}
	int eof;
	ssize_t got = read_answer(s, ans, sizeof ans, &A, &B, 8, &eof);
	/* Exactly one answer, a REFUSE "in use", then the close: no data. */
	CHECK_EQ(got, 128);
	CHECK_EQ(ans[3], 6);
	CHECK_EQ(ans[52], 3);
	CHECK_EQ(get64(ans + 32), 2);
	CHECK(eof);
	close(s);
	/* And nothing failed between A and B. */
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
	CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, A.peer, NULL), &A, &B));
	CHECK_EQ(wait_comp(&B, &A, &c, NULL, NULL, 5), 1);
	CHECK_EQ(wait_comp(&A, &B, &c, &err, NULL, 5), 1);
	close_all();
}

/* A HELLO whose claimed IP is not the connection's source is refused. */
TEST(claimed_address_must_be_the_source)
{
	CHECK_OK(end_open(&A, &DEF));
	uint8_t h[128], ans[256];
	struct sockaddr_in claim = lo_addr("127.0.0.1", 1);
	hello(h, 0, &claim, 77, 0);
	int s = raw_connect(&A, "127.0.0.2", h, sizeof h);
	CHECK(s >= 0);
	int eof;
	ssize_t got = read_answer(s, ans, sizeof ans, &A, NULL, 5, &eof);
	CHECK_EQ(got, 128);
	CHECK_EQ(ans[52], 3);	       /* REFUSE */
	CHECK_EQ(get64(ans + 32), 1); /* address */
	CHECK(eof);
	close(s);
	/* From the claimed IP itself, the same HELLO is accepted. */
	s = raw_connect(&A, "127.0.0.1", h, sizeof h);
	CHECK(s >= 0);
	got = read_answer(s, ans, 128, &A, NULL, 5, &eof);
	CHECK_EQ(got, 128);
	CHECK_EQ(ans[52], 1); /* ACCEPT */
	close(s);
	close_all();
}

static void exchange_ok(struct end *x, struct end *y)
{
	char rx[16], tx[16] = "keyed";
	struct fi_cq_tagged_entry c;
	CHECK_OK(fi_recv(y->ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
	CHECK_OK(POST(fi_send(x->ep, tx, sizeof tx, NULL, x->peer, NULL), x, y));
	CHECK_EQ(wait_comp(y, x, &c, NULL, NULL, 5), 1);
	CHECK(!strcmp(rx, tx));
	CHECK_EQ(wait_comp(x, y, &c, NULL, NULL, 5), 1);
}

/* x's send to y fails with an error completion; y receives nothing. */
static void exchange_refused(struct end *x, struct end *y)
{
	char rx[16], tx[16] = "refused";
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err = {0};
	CHECK_OK(fi_recv(y->ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, (void *)0x77));
	CHECK_OK(POST(fi_send(x->ep, tx, sizeof tx, NULL, x->peer, (void *)0x55), x, y));
	CHECK_EQ(wait_comp(x, y, &c, &err, NULL, 5), -FI_EAVAIL);
	CHECK(err.op_context == (void *)0x55);
	CHECK(err.err == FI_EACCES || err.err == FI_ECONNREFUSED);
	CHECK_EQ(wait_comp(y, x, &c, NULL, NULL, 1), 0);
	CHECK_OK(fi_cancel(&y->ep->fid, (void *)0x77));
	wait_comp(y, NULL, &c, &err, NULL, 1);
}

TEST(same_key_both_sides_traffic_flows)
{
	/* From the environment (unmodified applications) ... */
	setenv("FI_RUSTFAB_AUTH_KEY", "job-4711-secret", 1);
	CHECK_OK(end_open(&A, &DEF));
	CHECK_OK(end_open(&B, &DEF));
	unsetenv("FI_RUSTFAB_AUTH_KEY");
	CHECK_OK(ends_connect(&A, &B));
	exchange_ok(&A, &B);
	exchange_ok(&B, &A);
	close_all();
	/* ... and from domain_attr->auth_key. */
	struct end_opts k = {.auth_key = "another key"};
	CHECK_OK(end_open(&A, &k));
	CHECK_OK(end_open(&B, &k));
	CHECK_OK(ends_connect(&A, &B));
	exchange_ok(&B, &A);
	exchange_ok(&A, &B);
	close_all();
}

TEST(key_on_one_side_only_or_different_keys_refused)
{
	struct end_opts k1 = {.auth_key = "key one"}, k2 = {.auth_key = "key two"};
	CHECK_OK(end_open(&A, &k1));
	CHECK_OK(end_open(&B, &DEF));
	CHECK_OK(end_open(&C, &k2));
	CHECK_OK(ends_connect(&A, &B));
	exchange_refused(&B, &A); /* unkeyed dialer, keyed acceptor */
	exchange_refused(&A, &B); /* keyed dialer, unkeyed acceptor */
	close_all();
	CHECK_OK(end_open(&A, &k1));
	CHECK_OK(end_open(&C, &k2));
	CHECK_OK(ends_connect(&A, &C));
	exchange_refused(&A, &C);
	exchange_refused(&C, &A);
	close_all();
}

/* x's operation (posted by `post`) towards y, refused for its key,
 * completes with FI_EACCES: the application learns why. */
#define EXPECT_EACCES(x, y, post, ctx)                                            \
	do {                                                                      \
		struct fi_cq_tagged_entry _c;                                     \
		struct fi_cq_err_entry _e = {0};                                  \
		CHECK_OK(POST(post, (x), (y)));                                   \
		CHECK_EQ(wait_comp((x), (y), &_c, &_e, NULL, 5), -FI_EAVAIL);     \
		CHECK(_e.op_context == (ctx));                                    \
		if (_e.err != FI_EACCES)                                          \
			printf("    %s: error %d (%s)\n", #post, _e.err, fi_strerror(_e.err)); \
		CHECK_EQ(_e.err, FI_EACCES);                                      \
	} while (0)

/* Every operation towards a peer refused for its key (messages, RMA reads
 * and writes, atomics), keyed dialer and unkeyed acceptor and the reverse,
 * ends with FI_EACCES, as a send does. */
TEST(key_refusal_fails_every_operation_with_eacces)
{
	struct end_opts k = {.auth_key = "key one", .caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC};
	struct end_opts none = {.caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC};
	uint64_t buf[8] = {0};
	char tx[16] = "refused";
	for (int dir = 0; dir < 2; dir++) {
		CHECK_OK(end_open(&A, dir ? &none : &k));
		CHECK_OK(end_open(&B, dir ? &k : &none));
		CHECK_OK(ends_connect(&A, &B));
		EXPECT_EACCES(&A, &B, fi_read(A.ep, buf, sizeof buf, NULL, A.peer, 0, 0x1234, (void *)0x61),
			      (void *)0x61);
		EXPECT_EACCES(&A, &B, fi_write(A.ep, buf, sizeof buf, NULL, A.peer, 0, 0x1234, (void *)0x62),
			      (void *)0x62);
		EXPECT_EACCES(&A, &B,
			      fi_atomic(A.ep, buf, 1, NULL, A.peer, 0, 0x1234, FI_UINT64, FI_SUM, (void *)0x63),
			      (void *)0x63);
		EXPECT_EACCES(&A, &B, fi_send(A.ep, tx, sizeof tx, NULL, A.peer, (void *)0x64), (void *)0x64);
		close_all();
	}
}

/* Against a keyed endpoint: a HELLO without a key is refused; one that
 * claims a key but cannot prove it is cut off before anything it sends is
 * delivered. */
TEST(impostor_without_the_key)
{
	struct end_opts k = {.auth_key = "the real key"};
	char rx[16];
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err = {0};
	CHECK_OK(end_open(&A, &k));
	CHECK_OK(fi_recv(A.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, (void *)0x99));
	uint8_t h[128], ans[256];
	struct sockaddr_in claim = lo_addr("127.0.0.1", 2);
	hello(h, 0, &claim, 5, 0);
	int s = raw_connect(&A, "127.0.0.1", h, sizeof h);
	CHECK(s >= 0);
	int eof;
	CHECK_EQ(read_answer(s, ans, sizeof ans, &A, NULL, 5, &eof), 128);
	CHECK_EQ(ans[52], 3);
	CHECK_EQ(get64(ans + 32), 3); /* key required */
	CHECK(eof);
	close(s);
	/* Keyed request: A proves its key (ACCEPT with offset 1)... */
	hello(h, 0, &claim, 6, 1);
	s = raw_connect(&A, "127.0.0.1", h, sizeof h);
	CHECK(s >= 0);
	CHECK_EQ(read_answer(s, ans, 128, &A, NULL, 5, &eof), 128);
	CHECK_EQ(ans[52], 1);
	CHECK_EQ(get64(ans + 40), 1);
	/* ... our PROOF is garbage, and a message follows it. */
	uint8_t proof[128], msg[64 + 8];
	hello(proof, 4, &claim, 6, 1);
	memset(proof + 96, 0xab, 32);
	put_hdr(msg, 1, 8, 0, 0, 1, 0, 8, 0);
	memcpy(msg + 64, "intruder", 8);
	CHECK_EQ(write(s, proof, sizeof proof), (ssize_t)sizeof proof);
	(void)!write(s, msg, sizeof msg);
	read_answer(s, ans, sizeof ans, &A, NULL, 3, &eof);
	CHECK(eof);
	close(s);
	CHECK_EQ(wait_comp(&A, NULL, &c, NULL, NULL, 1), 0);
	CHECK_OK(fi_cancel(&A.ep->fid, (void *)0x99));
	wait_comp(&A, NULL, &c, &err, NULL, 1);
	close_all();
}

/* FI_RUSTFAB_TCP_MAX_CONNS: a flood of completed handshakes never holds
 * more connections than the cap, and a live peer with traffic keeps its
 * connection throughout. */
TEST(connection_flood_is_capped)
{
	enum { CAP = 8, FLOOD = 40 };
	char rx[16], tx[16] = "still here";
	struct fi_cq_tagged_entry c;
	setenv("FI_RUSTFAB_TCP_MAX_CONNS", "8", 1);
	CHECK_OK(end_open(&A, &DEF));
	unsetenv("FI_RUSTFAB_TCP_MAX_CONNS");
	CHECK_OK(end_open(&B, &DEF));
	CHECK_OK(ends_connect(&A, &B));
	int socks[FLOOD];
	for (int i = 0; i < FLOOD; i++) {
		uint8_t h[128], ans[128];
		struct sockaddr_in claim = lo_addr("127.0.0.1", 20000 + i);
		hello(h, 0, &claim, 1000 + i, 0);
		socks[i] = raw_connect(&A, "127.0.0.1", h, sizeof h);
		CHECK(socks[i] >= 0);
		int eof;
		read_answer(socks[i], ans, sizeof ans, &A, &B, 2, &eof);
		/* B talks to A all along. */
		CHECK_OK(fi_recv(A.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
		CHECK_OK(POST(fi_send(B.ep, tx, sizeof tx, NULL, B.peer, NULL), &B, &A));
		CHECK_EQ(wait_comp(&A, &B, &c, NULL, NULL, 5), 1);
		CHECK_EQ(wait_comp(&B, &A, &c, NULL, NULL, 5), 1);
	}
	int n = established_on(addr_port(A.addr));
	printf("    %d connections established on A after a flood of %d (cap %d)\n", n, FLOOD, CAP);
	CHECK(n <= CAP);
	exchange_ok(&A, &B);
	for (int i = 0; i < FLOOD; i++)
		close(socks[i]);
	close_all();
}

/* An RTS (a large message) reaching a raw TCP peer names no address of
 * the sender's memory: only lengths. */
TEST(rts_carries_no_buffer_address)
{
	CHECK_OK(end_open(&A, &DEF));
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in me = lo_addr("127.0.0.1", 0);
	socklen_t ml = sizeof me;
	CHECK(bind(l, (struct sockaddr *)&me, sizeof me) == 0);
	CHECK(listen(l, 4) == 0);
	CHECK(getsockname(l, (struct sockaddr *)&me, &ml) == 0);
	fi_addr_t raw;
	CHECK_EQ(fi_av_insert(A.av, &me, 1, &raw, 0, NULL), 1);
	size_t n = 1 << 20;
	char *big = malloc(n);
	CHECK(big);
	memset(big, 1, n);
	CHECK_OK(fi_send(A.ep, big, n, NULL, raw, NULL));
	int s = -1;
	double deadline = now_sec() + 5;
	fcntl(l, F_SETFL, O_NONBLOCK);
	while (s < 0 && now_sec() < deadline) {
		poke1(&A);
		s = accept(l, NULL, NULL);
	}
	CHECK(s >= 0);
	fcntl(s, F_SETFL, O_NONBLOCK);
	uint8_t req[128], ans[128];
	int eof;
	CHECK_EQ(read_answer(s, req, 128, &A, NULL, 5, &eof), 128);
	CHECK_EQ(req[52], 0); /* REQUEST */
	hello(ans, 1, &me, 4242, 0);
	CHECK_EQ(write(s, ans, sizeof ans), (ssize_t)sizeof ans);
	uint8_t rts[64 + 16];
	CHECK_EQ(read_answer(s, rts, sizeof rts, &A, NULL, 5, &eof), (ssize_t)sizeof rts);
	CHECK_EQ(rts[3], 2);			 /* RTS */
	CHECK_EQ(get64(rts + 64), 0);		 /* no address */
	CHECK_EQ(get64(rts + 72), (uint64_t)n); /* the length */
	close(s);
	close(l);
	free(big);
	close_all();
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	signal(SIGPIPE, SIG_IGN);
	setenv("RF_TRANSPORT", "tcp", 1);
	setenv("FI_RUSTFAB_IFACE", "lo", 0);
	unsetenv("FI_RUSTFAB_AUTH_KEY");
	RUN(impostor_cannot_displace_a_live_peer);
	RUN(claimed_address_must_be_the_source);
	RUN(same_key_both_sides_traffic_flows);
	RUN(key_on_one_side_only_or_different_keys_refused);
	RUN(impostor_without_the_key);
	RUN(key_refusal_fails_every_operation_with_eacces);
	RUN(connection_flood_is_capped);
	RUN(rts_carries_no_buffer_address);
	return harness_done();
}
