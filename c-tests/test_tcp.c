/*
 * TCP transport specifics (always over tcp, whatever RF_TRANSPORT says):
 * simultaneous first sends, a peer killed mid-transfer, a closed port,
 * FI_SOURCE for a peer that dialed us, a hostile raw socket, self-sends and
 * IPv6 on ::1. Traffic stays on loopback.
 */
#include "rdm_common.h"
#include <rdma/fi_ext_rustfab.h> /* this tree's include/, not an installed copy */
#include <arpa/inet.h>
#include <fcntl.h>
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

#define SETUP2()                                                                  \
	do {                                                                      \
		int _r;                                                           \
		if ((_r = end_open(&A, &DEF)) || (_r = end_open(&B, &DEF)) ||     \
		    (_r = ends_connect(&A, &B))) {                                \
			close_all();                                              \
			FAIL_AT("setup: %s", fi_strerror(-_r));                   \
		}                                                                 \
	} while (0)

static const struct end_opts DEF = {0};

/* Port (host order) of a sockaddr_in / sockaddr_in6 address. */
static int addr_port(const void *a)
{
	const struct sockaddr *sa = a;
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)a)->sin_port);
	return ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
}

/* ESTABLISHED connections in /proc/net/tcp{,6} whose local port is `port`. */
static int established_on(int port)
{
	int n = 0;
	const char *files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	for (int f = 0; f < 2; f++) {
		FILE *fp = fopen(files[f], "r");
		char line[512];
		if (!fp)
			continue;
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
	}
	return n;
}

TEST(simultaneous_first_sends_one_connection)
{
	enum { N = 40 };
	static uint32_t ra[N], rb[N], va[N], vb[N];
	struct fi_cq_tagged_entry c;
	SETUP2();
	for (uint32_t i = 0; i < N; i++) {
		CHECK_OK(fi_trecv(A.ep, &ra[i], 4, NULL, FI_ADDR_UNSPEC, 3, 0, NULL));
		CHECK_OK(fi_trecv(B.ep, &rb[i], 4, NULL, FI_ADDR_UNSPEC, 3, 0, NULL));
	}
	/* Both ends send before either makes progress: both dial. */
	for (uint32_t i = 0; i < N; i++) {
		va[i] = i;
		vb[i] = 1000 + i;
		CHECK_OK(fi_tsend(A.ep, &va[i], 4, NULL, A.peer, 3, NULL));
		CHECK_OK(fi_tsend(B.ep, &vb[i], 4, NULL, B.peer, 3, NULL));
	}
	int got_a = 0, got_b = 0, sent_a = 0, sent_b = 0;
	double deadline = now_sec() + 10;
	while ((got_a < N || got_b < N || sent_a < N || sent_b < N) && now_sec() < deadline) {
		if (fi_cq_read(A.cq, &c, 1) == 1)
			(c.flags & FI_RECV) ? got_a++ : sent_a++;
		if (fi_cq_read(B.cq, &c, 1) == 1)
			(c.flags & FI_RECV) ? got_b++ : sent_b++;
	}
	CHECK_EQ(got_a, N);
	CHECK_EQ(got_b, N);
	CHECK_EQ(sent_a, N);
	CHECK_EQ(sent_b, N);
	for (uint32_t i = 0; i < N; i++) {
		CHECK_EQ(ra[i], 1000 + i); /* in order */
		CHECK_EQ(rb[i], i);
	}
	/* Exactly one connection is left between the two endpoints. */
	int pa = addr_port(A.addr), pb = addr_port(B.addr), n = 0;
	deadline = now_sec() + 5;
	while (now_sec() < deadline) {
		poke(&A, &B);
		n = established_on(pa) + established_on(pb);
		if (n == 1)
			break;
	}
	CHECK_EQ(n, 1);
	close_all();
}

TEST(send_to_self)
{
	char tx[64] = "to myself", rx[64];
	struct fi_cq_tagged_entry c;
	fi_addr_t src;
	struct end_opts o = {.caps = FI_MSG | FI_TAGGED | FI_SOURCE};
	CHECK_OK(end_open(&A, &o));
	CHECK_OK(fi_recv(A.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, (void *)1));
	CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, A.self, (void *)2), &A, NULL));
	int seen = 0;
	double deadline = now_sec() + 5;
	while (seen < 2 && now_sec() < deadline) {
		if (fi_cq_readfrom(A.cq, &c, 1, &src) == 1) {
			seen++;
			if (c.flags & FI_RECV) {
				CHECK(c.op_context == (void *)1);
				CHECK_EQ(src, A.self);
				CHECK(!strcmp(rx, tx));
			}
		}
	}
	CHECK_EQ(seen, 2);
	close_all();
}

TEST(closed_port_gives_error_completion)
{
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err = {0};
	fi_addr_t dead;
	char tx[8] = "x";
	CHECK_OK(end_open(&A, &DEF));
	/* An address nobody listens on: bind a port, then close it. */
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof sin;
	CHECK(bind(s, (struct sockaddr *)&sin, sizeof sin) == 0);
	CHECK(getsockname(s, (struct sockaddr *)&sin, &l) == 0);
	close(s);
	CHECK_EQ(fi_av_insert(A.av, &sin, 1, &dead, 0, NULL), 1);
	double t0 = now_sec();
	CHECK_OK(fi_send(A.ep, tx, sizeof tx, NULL, dead, (void *)0xdead));
	CHECK_EQ(wait_comp(&A, NULL, &c, &err, NULL, 5), -FI_EAVAIL);
	CHECK(err.op_context == (void *)0xdead);
	CHECK(err.err == FI_ECONNREFUSED);
	/* The entry says why, and what to set: the dial found nobody. */
	CHECK_EQ(err.prov_errno, FI_RUSTFAB_ERR_UNREACHABLE);
	char why[512];
	const char *text = fi_cq_strerror(A.cq, err.prov_errno, err.err_data, why, sizeof why);
	CHECK(text == why && strstr(why, "FI_RUSTFAB_IFACE") && strstr(why, "cannot reach"));
	CHECK(now_sec() - t0 < 5);
	/* Exactly one completion, and the endpoint still works (to itself). */
	CHECK_EQ(wait_comp(&A, NULL, &c, NULL, NULL, 0.2), 0);
	CHECK_OK(fi_recv(A.ep, tx, sizeof tx, NULL, FI_ADDR_UNSPEC, NULL));
	CHECK_OK(POST(fi_send(A.ep, "y", 1, NULL, A.self, NULL), &A, NULL));
	CHECK_EQ(wait_comp(&A, NULL, &c, NULL, NULL, 5), 1);
	close_all();
}

TEST(fi_source_for_a_peer_that_dialed_us)
{
	char rx[8], tx[8] = "hello";
	struct fi_cq_tagged_entry c;
	fi_addr_t src = 0;
	struct end_opts o = {.caps = FI_MSG | FI_TAGGED | FI_SOURCE};
	CHECK_OK(end_open(&A, &o));
	CHECK_OK(end_open(&B, &o));
	CHECK_OK(ends_connect(&A, &B));
	/* A never sends: the only connection is B's dial. */
	CHECK_OK(fi_recv(A.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
	CHECK_OK(POST(fi_send(B.ep, tx, sizeof tx, NULL, B.peer, NULL), &B, &A));
	CHECK_EQ(wait_comp(&A, &B, &c, NULL, &src, 5), 1);
	CHECK(c.flags & FI_RECV);
	CHECK_EQ(src, A.peer);
	CHECK_EQ(established_on(addr_port(A.addr)), 1);
	CHECK_EQ(wait_comp(&B, &A, &c, NULL, NULL, 5), 1);
	CHECK(c.flags & FI_SEND);
	/* And A answers over the same connection. */
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
	CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, src, NULL), &A, &B));
	CHECK_EQ(wait_comp(&B, &A, &c, NULL, &src, 5), 1);
	CHECK(c.flags & FI_RECV);
	CHECK_EQ(src, B.peer);
	CHECK_EQ(established_on(addr_port(B.addr)), 0);
	close_all();
}

/* The 64-byte record header (docs/protocol.md), little-endian. */
static void put_hdr(uint8_t *h, uint8_t op, uint64_t len, uint64_t tag, uint64_t data, uint32_t payload,
		    uint32_t aux)
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
	}
	for (int i = 0; i < 4; i++) {
		h[48 + i] = (uint8_t)(payload >> (8 * i));
		h[52 + i] = (uint8_t)(aux >> (8 * i));
	}
}

/* A raw socket that completes the handshake as a fake peer 127.0.0.1:port. */
static int evil_connect(struct end *target, struct end *other, int fake_port)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0 || connect(s, (struct sockaddr *)target->addr, sizeof(struct sockaddr_in)) != 0)
		return -1;
	uint8_t hello[64 + 64] = {0};
	struct sockaddr_in me = {.sin_family = AF_INET, .sin_port = htons(fake_port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	/* HELLO version 2: the address, then a challenge and a MAC (unused). */
	put_hdr(hello, 6, 64, 0x1234, 2, 64, 0);
	memcpy(hello + 64, &me, 16);
	if (write(s, hello, sizeof hello) != (ssize_t)sizeof hello)
		return -1;
	/* The target answers (ACCEPT) once it progresses. */
	fcntl(s, F_SETFL, O_NONBLOCK);
	uint8_t ans[128];
	size_t got = 0;
	double deadline = now_sec() + 5;
	while (got < sizeof ans && now_sec() < deadline) {
		poke(target, other);
		ssize_t r = read(s, ans + got, sizeof ans - got);
		if (r > 0)
			got += (size_t)r;
	}
	if (got != sizeof ans || ans[3] != 6 || ans[52] != 1)
		return -1;
	return s;
}

/* Whether `s` gets closed by the peer within 5 s (while progressing). */
static int cut_off(int s, struct end *target, struct end *other)
{
	double deadline = now_sec() + 5;
	char buf[256];
	while (now_sec() < deadline) {
		poke(target, other);
		ssize_t r = read(s, buf, sizeof buf);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
			return 1;
	}
	return 0;
}

TEST(malformed_frames_cut_off_only_that_connection)
{
	char rx[16], tx[16] = "healthy";
	struct fi_cq_tagged_entry c;
	SETUP2();
	/* A healthy exchange first. */
	CHECK_OK(fi_recv(A.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
	CHECK_OK(POST(fi_send(B.ep, tx, sizeof tx, NULL, B.peer, NULL), &B, &A));
	CHECK_EQ(wait_comp(&A, &B, &c, NULL, NULL, 5), 1);
	/* 1: bad magic. 2: a MSG claiming 2^40 bytes. 3: data before HELLO. */
	for (int k = 0; k < 3; k++) {
		int s;
		uint8_t h[64];
		if (k < 2) {
			s = evil_connect(&A, &B, 1 + k);
			CHECK(s >= 0);
			if (k == 0) {
				put_hdr(h, 1, 4, 0, 0, 4, 0);
				h[0] = 0xee;
			} else {
				put_hdr(h, 1, 1ULL << 40, 0, 0, 0xffffffffu, 0);
			}
		} else {
			s = socket(AF_INET, SOCK_STREAM, 0);
			CHECK(connect(s, (struct sockaddr *)A.addr, sizeof(struct sockaddr_in)) == 0);
			fcntl(s, F_SETFL, O_NONBLOCK);
			put_hdr(h, 1, 0, 0, 0, 0, 0);
		}
		CHECK_EQ(write(s, h, 64), 64);
		CHECK(cut_off(s, &A, &B));
		close(s);
		/* The healthy peer is unaffected, both ways. */
		CHECK_OK(fi_recv(A.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
		CHECK_OK(POST(fi_send(B.ep, tx, sizeof tx, NULL, B.peer, NULL), &B, &A));
		CHECK_EQ(wait_comp(&A, &B, &c, NULL, NULL, 5), 1);
		CHECK(!strcmp(rx, tx));
		CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
		CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, A.peer, NULL), &A, &B));
		CHECK_EQ(wait_comp(&B, &A, &c, NULL, NULL, 5), 1);
	}
	close_all();
}

TEST(peer_killed_mid_transfer)
{
	int to_child[2], to_parent[2];
	CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0);
	fflush(stdout);
	pid_t pid = rf_fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		/* The victim: an endpoint that accepts and reads, but never posts
		 * a receive, so a large message stays in flight. */
		struct end K;
		char go;
		if (end_open(&K, &DEF))
			_exit(1);
		if (write(to_parent[1], K.addr, K.addrlen) != (ssize_t)K.addrlen)
			_exit(1);
		if (read(to_child[0], &go, 1) != 1)
			_exit(1);
		for (;;)
			poke1(&K);
	}
	char kaddr[128];
	ssize_t kl = read(to_parent[0], kaddr, sizeof kaddr);
	CHECK(kl > 0);
	SETUP2();
	fi_addr_t k;
	CHECK_EQ(fi_av_insert(A.av, kaddr, 1, &k, 0, NULL), 1);
	CHECK_EQ(write(to_child[1], "g", 1), 1);
	size_t n = 64u << 20;
	char *big = malloc(n);
	CHECK(big);
	fill(big, n, 7);
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err = {0};
	CHECK_OK(POST(fi_tsend(A.ep, big, n, NULL, k, 1, (void *)0xb16), &A, NULL));
	/* Let part of it flow, then kill the receiver. */
	double t = now_sec() + 0.3;
	while (now_sec() < t)
		poke1(&A);
	CHECK_EQ(A.nstash, 0);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	double t0 = now_sec();
	CHECK_EQ(wait_comp(&A, NULL, &c, &err, NULL, 5), -FI_EAVAIL);
	CHECK(now_sec() - t0 < 5);
	CHECK(err.op_context == (void *)0xb16);
	CHECK(err.err == FI_ECONNRESET || err.err == EPIPE);
	CHECK_EQ(wait_comp(&A, NULL, &c, NULL, NULL, 0.2), 0); /* exactly one */
	free(big);
	/* Other peers are unaffected. */
	char rx[300], tx[300];
	fill(tx, sizeof tx, 9);
	CHECK_OK(fi_recv(B.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, NULL));
	CHECK_OK(POST(fi_send(A.ep, tx, sizeof tx, NULL, A.peer, NULL), &A, &B));
	CHECK_EQ(wait_comp(&B, &A, &c, NULL, NULL, 5), 1);
	CHECK(check_fill(rx, sizeof rx, 9));
	close_all();
}

TEST(ipv6_loopback)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct fid_fabric *fab = NULL;
	struct fid_domain *dom = NULL;
	struct fid_av *av = NULL;
	struct fid_cq *cq = NULL;
	struct fid_ep *ep[2] = {NULL, NULL};
	char addr[2][64];
	fi_addr_t peer[2];
	char rx[8], tx[8] = "six";
	CHECK(hints);
	hints->fabric_attr->prov_name = strdup("rustfab");
	hints->domain_attr->name = strdup("tcp");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->addr_format = FI_SOCKADDR_IN6;
	int r = fi_getinfo(FI_VERSION(1, 17), "::1", NULL, FI_SOURCE, hints, &info);
	fi_freeinfo(hints);
	if (r == -FI_ENODATA) {
		printf("    (no IPv6 loopback here)\n");
		return;
	}
	CHECK_OK(r);
	CHECK_EQ(info->addr_format, FI_SOCKADDR_IN6);
	CHECK_OK(fi_fabric(info->fabric_attr, &fab, NULL));
	CHECK_OK(fi_domain(fab, info, &dom, NULL));
	struct fi_av_attr ava = {.type = FI_AV_MAP};
	CHECK_OK(fi_av_open(dom, &ava, &av, NULL));
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED};
	CHECK_OK(fi_cq_open(dom, &cqa, &cq, NULL));
	for (int i = 0; i < 2; i++) {
		size_t l = sizeof addr[i];
		CHECK_OK(fi_endpoint(dom, info, &ep[i], NULL));
		CHECK_OK(fi_ep_bind(ep[i], &av->fid, 0));
		CHECK_OK(fi_ep_bind(ep[i], &cq->fid, FI_TRANSMIT | FI_RECV));
		CHECK_OK(fi_enable(ep[i]));
		CHECK_OK(fi_getname(&ep[i]->fid, addr[i], &l));
		CHECK_EQ(l, sizeof(struct sockaddr_in6));
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)addr[i];
		CHECK_EQ(s6->sin6_family, AF_INET6);
		CHECK(IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr));
		CHECK(s6->sin6_port != 0);
		CHECK_EQ(fi_av_insert(av, addr[i], 1, &peer[i], 0, NULL), 1);
	}
	CHECK_OK(fi_recv(ep[1], rx, sizeof rx, NULL, FI_ADDR_UNSPEC, (void *)1));
	CHECK_OK(fi_send(ep[0], tx, sizeof tx, NULL, peer[1], (void *)2));
	struct fi_cq_tagged_entry c;
	int got = 0;
	double deadline = now_sec() + 5;
	while (got < 2 && now_sec() < deadline)
		if (fi_cq_read(cq, &c, 1) == 1)
			got++;
	CHECK_EQ(got, 2);
	CHECK(!strcmp(rx, tx));
	for (int i = 0; i < 2; i++)
		CHECK_OK(fi_close(&ep[i]->fid));
	CHECK_OK(fi_close(&cq->fid));
	CHECK_OK(fi_close(&av->fid));
	CHECK_OK(fi_close(&dom->fid));
	CHECK_OK(fi_close(&fab->fid));
	fi_freeinfo(info);
}

TEST(getname_is_never_a_wildcard)
{
	CHECK_OK(end_open(&A, &DEF));
	struct sockaddr_in *sin = (struct sockaddr_in *)A.addr;
	CHECK_EQ(A.addrlen, sizeof(struct sockaddr_in));
	CHECK_EQ(sin->sin_family, AF_INET);
	CHECK(sin->sin_addr.s_addr != htonl(INADDR_ANY));
	CHECK(sin->sin_port != 0);
	close_all();
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	signal(SIGPIPE, SIG_IGN); /* the raw test sockets, not rustfab's */
	setenv("RF_TRANSPORT", "tcp", 1);
	/* Wildcard-bound endpoints advertise loopback: traffic stays local. */
	setenv("FI_RUSTFAB_IFACE", "lo", 0);
	RUN(simultaneous_first_sends_one_connection);
	RUN(send_to_self);
	RUN(closed_port_gives_error_completion);
	RUN(fi_source_for_a_peer_that_dialed_us);
	RUN(malformed_frames_cut_off_only_that_connection);
	RUN(peer_killed_mid_transfer);
	RUN(ipv6_loopback);
	RUN(getname_is_never_a_wildcard);
	return harness_done();
}
