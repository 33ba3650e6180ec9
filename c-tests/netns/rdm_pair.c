/*
 * rdm_pair: the RDM scenarios of test_rdm.c between two processes, one end
 * each, over rustfab tcp — run by netns/run.sh in two network namespaces
 * joined by a veth pair, so that every byte crosses a network link between
 * two "hosts" (separate network stacks, non-loopback addresses).
 *
 *   rdm_pair server|client <fifo to peer> <fifo from peer>
 *
 * The two processes keep in step and exchange endpoint names through the
 * two FIFOs (a control channel outside libfabric, as fabtests' OOB socket).
 * Each scenario prints "ok <name>" or "FAIL <name>"; the first failure ends
 * the process (the peer then sees the control channel close and stops).
 * The last scenario kills a helper process mid-transfer (SIGKILL): the
 * server's receive must end in error within 5 s.
 */
#include "../rdm_common.h"
#include "oob.h"
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>

static int server;
static struct end me;

/* Exchanges endpoint names; returns the peer's fi_addr in `e`'s AV. */
static int exchange_names(struct end *e, fi_addr_t *peer, char *peer_name, size_t *peer_len)
{
	send_u64(e->addrlen);
	oob_write(e->addr, e->addrlen);
	*peer_len = recv_u64();
	if (*peer_len > 128)
		return -1;
	oob_read(peer_name, *peer_len);
	return fi_av_insert(e->av, peer_name, 1, peer, 0, NULL) == 1 ? 0 : -1;
}

static int is_link_addr(const void *a, size_t len)
{
	const struct sockaddr_in *s = a;
	return len == sizeof(*s) && s->sin_family == AF_INET &&
	       (ntohl(s->sin_addr.s_addr) >> 8) == ((10u << 16) | (123u << 8)); /* 10.123.0.x */
}

#define WAIT(cq_end, ent)                                                                        \
	do {                                                                                     \
		struct fi_cq_err_entry _err;                                                     \
		memset(&_err, 0, sizeof(_err));                                                  \
		int _w = wait_comp((cq_end), NULL, (ent), &_err, NULL, 30);                      \
		if (_w != 1)                                                                     \
			FAIL_AT("no completion (%d, err %d %s)", _w, _err.err, fi_strerror(_err.err)); \
	} while (0)

#define WAIT_ERR(cq_end, errp)                                                  \
	do {                                                                    \
		struct fi_cq_tagged_entry _c;                                   \
		int _w = wait_comp((cq_end), NULL, &_c, (errp), NULL, 30);      \
		if (_w != -FI_EAVAIL)                                           \
			FAIL_AT("expected an error completion, got %d", _w);    \
	} while (0)

#define SEND(expr) CHECK_OK(POST((expr), &me, NULL))

static char *big_tx, *big_rx;
#define BIG (16 << 20)

TEST(names_are_link_addresses)
{
	char peer[128];
	size_t plen = 0;
	CHECK(is_link_addr(me.addr, me.addrlen));
	CHECK_OK(exchange_names(&me, &me.peer, peer, &plen));
	CHECK(is_link_addr(peer, plen));
	CHECK(memcmp(peer, me.addr, plen) != 0);
	/* The AV gives the name back. */
	char back[128];
	size_t blen = sizeof(back);
	CHECK_OK(fi_av_lookup(me.av, me.peer, back, &blen));
	CHECK_EQ(blen, plen);
	CHECK(!memcmp(back, peer, plen));
	sync_peer();
}

/* Every protocol size in both directions, data verified (eager, largest
 * eager, rendezvous). */
TEST(sizes_both_ways)
{
	size_t sizes[] = {0, 1, 100, 4096, 65536, 65537, 1 << 20, BIG};
	struct fi_cq_tagged_entry c;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];
		for (int dir = 0; dir < 2; dir++) {
			int receiver = dir == 0 ? server : !server;
			if (receiver) {
				memset(big_rx, 0, n + 1);
				CHECK_OK(fi_recv(me.ep, big_rx, n, NULL, FI_ADDR_UNSPEC, big_rx));
				sync_peer();
				WAIT(&me, &c);
				CHECK(c.op_context == big_rx);
				CHECK_EQ(c.len, n);
				CHECK(check_fill(big_rx, n, (unsigned)(k + dir)));
			} else {
				fill(big_tx, n, (unsigned)(k + dir));
				sync_peer();
				SEND(fi_send(me.ep, big_tx, n, NULL, me.peer, big_tx));
				WAIT(&me, &c);
				CHECK(c.op_context == big_tx);
			}
			sync_peer();
		}
	}
}

/* Tag matching out of posting order, an ignore mask, CQ data, the
 * source address of every receive (FI_SOURCE), iov sends. */
TEST(tagged_cq_data_source)
{
	struct fi_cq_tagged_entry c;
	fi_addr_t src;
	if (server) {
		char r1[64], r2[64], r3[64];
		CHECK_OK(fi_trecv(me.ep, r2, sizeof r2, NULL, FI_ADDR_UNSPEC, 2, 0, r2));
		CHECK_OK(fi_trecv(me.ep, r1, sizeof r1, NULL, FI_ADDR_UNSPEC, 1, 0, r1));
		CHECK_OK(fi_trecv(me.ep, r3, sizeof r3, NULL, me.peer, 0x100, 0xff, r3));
		sync_peer();
		int seen = 0;
		for (int k = 0; k < 3; k++) {
			struct fi_cq_err_entry err;
			CHECK_EQ(wait_comp(&me, NULL, &c, &err, &src, 30), 1);
			CHECK_EQ(src, me.peer);
			CHECK(c.flags & FI_REMOTE_CQ_DATA);
			if (c.op_context == r1) {
				seen |= 1;
				CHECK_EQ(c.data, 0x11);
				CHECK(!strcmp(r1, "one"));
			} else if (c.op_context == r2) {
				seen |= 2;
				CHECK_EQ(c.data, 0x22);
				CHECK(!strcmp(r2, "two"));
			} else if (c.op_context == r3) {
				seen |= 4;
				CHECK_EQ(c.tag, 0x1ab);
				CHECK(!strcmp(r3, "iovec"));
			}
		}
		CHECK_EQ(seen, 7);
	} else {
		char p1[] = "io", p2[] = "vec";
		struct iovec iov[2] = {{p1, 2}, {p2, 4}};
		struct fi_msg_tagged m = {.msg_iov = iov, .iov_count = 2, .addr = me.peer, .tag = 0x1ab,
					  .context = iov, .data = 0x33};
		sync_peer();
		SEND(fi_tsenddata(me.ep, "one", 4, NULL, 0x11, me.peer, 1, NULL));
		SEND(fi_tsenddata(me.ep, "two", 4, NULL, 0x22, me.peer, 2, NULL));
		SEND(fi_tsendmsg(me.ep, &m, FI_REMOTE_CQ_DATA | FI_COMPLETION));
		for (int k = 0; k < 3; k++)
			WAIT(&me, &c);
	}
	sync_peer();
}

/* FI_ETRUNC with olen, eager and rendezvous; the next message is intact. */
TEST(truncation_then_intact)
{
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	if (server) {
		CHECK_OK(fi_recv(me.ep, big_rx, 10, NULL, FI_ADDR_UNSPEC, NULL));
		CHECK_OK(fi_recv(me.ep, big_rx + 100, 100, NULL, FI_ADDR_UNSPEC, NULL));
		CHECK_OK(fi_recv(me.ep, big_rx + 200, 1 << 20, NULL, FI_ADDR_UNSPEC, NULL));
		CHECK_OK(fi_recv(me.ep, big_rx + (2 << 20), 1000, NULL, FI_ADDR_UNSPEC, NULL));
		sync_peer();
		/* Error entries are read before successes: gather all four. */
		int seen = 0;
		for (int k = 0; k < 4; k++) {
			memset(&err, 0, sizeof err);
			int w = wait_comp(&me, NULL, &c, &err, NULL, 30);
			if (w == -FI_EAVAIL) {
				CHECK_EQ(err.err, FI_ETRUNC);
				if (err.olen == 90) {
					seen |= 1;
				} else {
					CHECK_EQ(err.olen, (4 << 20) - (1 << 20));
					CHECK(check_fill(big_rx + 200, 1 << 20, 9));
					seen |= 2;
				}
			} else {
				CHECK_EQ(w, 1);
				if (c.len == 50) {
					CHECK(check_fill(big_rx + 100, 50, 8));
					seen |= 4;
				} else {
					CHECK_EQ(c.len, 1000);
					CHECK(check_fill(big_rx + (2 << 20), 1000, 10));
					seen |= 8;
				}
			}
		}
		CHECK_EQ(seen, 15);
	} else {
		sync_peer();
		fill(big_tx, 100, 7);
		SEND(fi_send(me.ep, big_tx, 100, NULL, me.peer, NULL));
		fill(big_tx + 100, 50, 8);
		SEND(fi_send(me.ep, big_tx + 100, 50, NULL, me.peer, NULL));
		fill(big_tx + 200, 4 << 20, 9);
		SEND(fi_send(me.ep, big_tx + 200, 4 << 20, NULL, me.peer, NULL));
		fill(big_tx + (5 << 20), 1000, 10);
		SEND(fi_send(me.ep, big_tx + (5 << 20), 1000, NULL, me.peer, NULL));
		for (int k = 0; k < 4; k++)
			WAIT(&me, &c);
	}
	sync_peer();
}

/* Messages sent before any receive is posted arrive in order; a large
 * unexpected message does not hold up later ones (rendezvous). */
TEST(unexpected_in_order_and_large_not_blocking)
{
	struct fi_cq_tagged_entry c;
	enum { N = 200, LEN = 1024 };
	if (server) {
		sync_peer(); /* the client has sent everything */
		for (int i = 0; i < N; i++) {
			CHECK_OK(fi_trecv(me.ep, big_rx, LEN, NULL, FI_ADDR_UNSPEC, 5, 0, NULL));
			WAIT(&me, &c);
			CHECK_EQ(c.len, LEN);
			CHECK(check_fill(big_rx, LEN, (unsigned)i));
		}
		/* tag 10 (small, sent after the big tag-9 one) first. */
		CHECK_OK(fi_trecv(me.ep, big_rx, 64, NULL, FI_ADDR_UNSPEC, 10, 0, (void *)10));
		WAIT(&me, &c);
		CHECK(c.op_context == (void *)10);
		CHECK_OK(fi_trecv(me.ep, big_rx, 4 << 20, NULL, FI_ADDR_UNSPEC, 9, 0, (void *)9));
		WAIT(&me, &c);
		CHECK(c.op_context == (void *)9);
		CHECK(check_fill(big_rx, 4 << 20, 99));
	} else {
		for (int i = 0; i < N; i++) {
			fill(big_tx + (size_t)i * LEN, LEN, (unsigned)i);
			SEND(fi_tsend(me.ep, big_tx + (size_t)i * LEN, LEN, NULL, me.peer, 5, NULL));
		}
		fill(big_tx + (1 << 20), 4 << 20, 99);
		SEND(fi_tsend(me.ep, big_tx + (1 << 20), 4 << 20, NULL, me.peer, 9, NULL));
		SEND(fi_tsend(me.ep, "x", 2, NULL, me.peer, 10, NULL));
		/* Eager sends complete locally; wait for those. */
		for (int i = 0; i < N; i++)
			WAIT(&me, &c);
		sync_peer();
		for (int i = 0; i < 2; i++)
			WAIT(&me, &c);
	}
	sync_peer();
}

TEST(multi_recv_buffer)
{
	struct fi_cq_tagged_entry c;
	enum { N = 20, LEN = 3000 };
	if (server) {
		size_t min = 1024;
		CHECK_OK(fi_setopt(&me.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof min));
		struct iovec iov = {big_rx, 64 * 1024};
		struct fi_msg m = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = big_rx};
		CHECK_OK(fi_recvmsg(me.ep, &m, FI_MULTI_RECV));
		sync_peer();
		int got = 0, released = 0;
		while (!released) {
			WAIT(&me, &c);
			CHECK_EQ(c.len, got < N ? LEN : 5000);
			CHECK(check_fill(c.buf, c.len, (unsigned)got));
			got++;
			released = (c.flags & FI_MULTI_RECV) != 0;
		}
		/* 20 x 3000 + 5000 leave less than the 1024-byte minimum. */
		CHECK_EQ(got, N + 1);
	} else {
		sync_peer();
		for (int i = 0; i < N; i++) {
			fill(big_tx + (size_t)i * LEN, LEN, (unsigned)i);
			SEND(fi_send(me.ep, big_tx + (size_t)i * LEN, LEN, NULL, me.peer, NULL));
		}
		fill(big_tx + N * LEN, 5000, N);
		SEND(fi_send(me.ep, big_tx + N * LEN, 5000, NULL, me.peer, NULL));
		for (int i = 0; i < N + 1; i++)
			WAIT(&me, &c);
	}
	sync_peer();
}

/* Injects (no completion) and a delivery-complete send, whose completion
 * means the data is in the receiver's buffer. */
TEST(inject_and_delivery_complete)
{
	struct fi_cq_tagged_entry c;
	if (server) {
		for (int i = 0; i < 11; i++)
			CHECK_OK(fi_recv(me.ep, big_rx + i * 128, 128, NULL, FI_ADDR_UNSPEC, NULL));
		sync_peer();
		for (int i = 0; i < 11; i++) {
			WAIT(&me, &c);
			CHECK(check_fill(c.buf, 100, (unsigned)i));
		}
	} else {
		sync_peer();
		for (int i = 0; i < 10; i++) {
			fill(big_tx, 100, (unsigned)i);
			SEND(fi_inject(me.ep, big_tx, 100, me.peer));
		}
		fill(big_tx, 100, 10);
		struct iovec iov = {big_tx, 100};
		struct fi_msg m = {.msg_iov = &iov, .iov_count = 1, .addr = me.peer, .context = big_tx};
		SEND(fi_sendmsg(me.ep, &m, FI_DELIVERY_COMPLETE | FI_COMPLETION));
		WAIT(&me, &c);
		CHECK(c.op_context == big_tx);
	}
	sync_peer();
}

/* A window of 64 KiB messages, 2000 of them. */
TEST(streaming_window)
{
	struct fi_cq_tagged_entry c;
	enum { N = 2000, LEN = 64 << 10, W = 32 };
	if (server) {
		int posted = 0, done = 0;
		while (posted < W)
			CHECK_OK(fi_recv(me.ep, big_rx + (size_t)(posted++ % W) * LEN, LEN, NULL, FI_ADDR_UNSPEC, NULL));
		sync_peer();
		while (done < N) {
			WAIT(&me, &c);
			CHECK_EQ(c.len, LEN);
			done++;
			if (posted < N) {
				CHECK_OK(fi_recv(me.ep, c.buf, LEN, NULL, FI_ADDR_UNSPEC, NULL));
				posted++;
			}
		}
	} else {
		int out = 0, sent = 0;
		fill(big_tx, LEN, 3);
		sync_peer();
		while (sent < N) {
			if (out < W) {
				SEND(fi_send(me.ep, big_tx, LEN, NULL, me.peer, NULL));
				sent++;
				out++;
			} else {
				WAIT(&me, &c);
				out--;
			}
		}
		while (out--)
			WAIT(&me, &c);
	}
	sync_peer();
}

/*
 * A helper process (the client's child, with its own endpoint) sends a
 * small delivery-complete message (so the connection is up and the server
 * is matching), starts a 128 MiB send (its rendezvous request goes out at
 * once; the server matches it and asks for the data) and is killed with
 * SIGKILL 100 ms later, before streaming it: the server's matched receive
 * ends in error within 5 s, and the server still talks to the client.
 */
TEST(peer_killed_mid_transfer)
{
	enum { N = 128 << 20 };
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	if (server) {
		char name[128];
		size_t len = recv_u64();
		fi_addr_t victim;
		CHECK(len <= sizeof name);
		oob_read(name, len);
		CHECK_EQ(fi_av_insert(me.av, name, 1, &victim, 0, NULL), 1);
		char *buf = malloc(N);
		CHECK(buf);
		char hello[16];
		CHECK_OK(fi_recv(me.ep, hello, sizeof hello, NULL, victim, hello));
		CHECK_OK(fi_recv(me.ep, buf, N, NULL, victim, buf));
		sync_peer();
		WAIT(&me, &c);
		CHECK(c.op_context == hello);
		double t0 = now_sec();
		memset(&err, 0, sizeof err);
		int w = wait_comp(&me, NULL, &c, &err, NULL, 30);
		double dt = now_sec() - t0;
		free(buf);
		sync_peer(); /* the victim is dead by now */
		printf("    receive ended after %.2f s: %s\n", dt, w == -FI_EAVAIL ? fi_strerror(err.err) : "completed");
		CHECK_EQ(w, -FI_EAVAIL);
		CHECK(err.err == FI_ECONNRESET || err.err == FI_ECANCELED || err.err == FI_EIO);
		CHECK(dt < 5);
		/* The surviving client is unaffected. */
		CHECK_OK(fi_recv(me.ep, big_rx, 64, NULL, FI_ADDR_UNSPEC, NULL));
		sync_peer();
		WAIT(&me, &c);
		CHECK(!strcmp(big_rx, "still here"));
	} else {
		int up[2], down[2]; /* victim -> client, client -> victim */
		CHECK_OK(pipe(up));
		CHECK_OK(pipe(down));
		fflush(stdout);
		pid_t pid = rf_fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			struct end v;
			struct end_opts o = {0};
			char *buf = malloc(N);
			fi_addr_t srv;
			char sname[128];
			if (!buf || end_open(&v, &o))
				_exit(2);
			if (write(up[1], &v.addrlen, sizeof v.addrlen) != sizeof v.addrlen ||
			    write(up[1], v.addr, v.addrlen) != (ssize_t)v.addrlen)
				_exit(3);
			if (read(down[0], sname, 1) != 1) /* wait for the server's name */
				_exit(4);
			size_t slen = 0;
			if (read(down[0], &slen, sizeof slen) != sizeof slen || slen > sizeof sname ||
			    read(down[0], sname, slen) != (ssize_t)slen)
				_exit(5);
			if (fi_av_insert(v.av, sname, 1, &srv, 0, NULL) != 1)
				_exit(6);
			struct iovec iov = {"hello", 6};
			struct fi_msg m = {.msg_iov = &iov, .iov_count = 1, .addr = srv};
			struct fi_cq_tagged_entry vc;
			if (fi_sendmsg(v.ep, &m, FI_DELIVERY_COMPLETE | FI_COMPLETION) ||
			    wait_comp(&v, NULL, &vc, NULL, NULL, 10) != 1)
				_exit(7);
			fill(buf, N, 1);
			if (fi_send(v.ep, buf, N, NULL, srv, NULL))
				_exit(7);
			usleep(100 * 1000); /* no progress: the data never follows */
			raise(SIGKILL);
			_exit(8);
		}
		size_t vlen;
		char vname[128];
		CHECK_EQ(read(up[0], &vlen, sizeof vlen), (ssize_t)sizeof vlen);
		CHECK(vlen <= sizeof vname);
		CHECK_EQ(read(up[0], vname, vlen), (ssize_t)vlen);
		send_u64(vlen);
		oob_write(vname, vlen);
		/* The server's name for the victim: the one we have in our AV. */
		char sname[128];
		size_t slen = sizeof sname;
		CHECK_OK(fi_av_lookup(me.av, me.peer, sname, &slen));
		sync_peer(); /* the server's receive is posted */
		CHECK_EQ(write(down[1], "g", 1), 1);
		CHECK_EQ(write(down[1], &slen, sizeof slen), (ssize_t)sizeof slen);
		CHECK_EQ(write(down[1], sname, slen), (ssize_t)slen);
		int st = 0;
		CHECK_EQ(waitpid(pid, &st, 0), pid);
		CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
		sync_peer();
		sync_peer();
		SEND(fi_send(me.ep, "still here", 11, NULL, me.peer, NULL));
		WAIT(&me, &c);
		close(up[0]);
		close(up[1]);
		close(down[0]);
		close(down[1]);
	}
}

int main(int argc, char **argv)
{
	if (argc != 4 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: rdm_pair server|client <fifo to peer> <fifo from peer>\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	server = !strcmp(argv[1], "server");
	if (oob_open(server, argv[2], argv[3]))
		return 2;
	struct end_opts o = {.caps = FI_MSG | FI_TAGGED | FI_MULTI_RECV | FI_SOURCE | FI_DIRECTED_RECV};
	int ret = end_open(&me, &o);
	if (ret) {
		printf("end_open: %s\n", fi_strerror(-ret));
		return 1;
	}
	big_tx = malloc(BIG + 4096);
	big_rx = malloc(BIG + 4096);
	if (!big_tx || !big_rx)
		return 1;
	/* Each scenario must pass before the next starts. */
#define STEP(name)                          \
	do {                                \
		RUN(name);                  \
		if (h_failed)               \
			goto out;           \
	} while (0)
	STEP(names_are_link_addresses);
	STEP(sizes_both_ways);
	STEP(tagged_cq_data_source);
	STEP(truncation_then_intact);
	STEP(unexpected_in_order_and_large_not_blocking);
	STEP(multi_recv_buffer);
	STEP(inject_and_delivery_complete);
	STEP(streaming_window);
	STEP(peer_killed_mid_transfer);
out:
	end_close(&me);
	return harness_done();
}
