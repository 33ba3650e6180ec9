/*
 * A peer killed (SIGKILL) and restarted at its address is reached again by
 * a client that keeps its endpoint (docs/security.md, "Addresses are taken
 * exactly or refused"; docs/shm.md, "Restarted peers"), over the transport
 * RF_TRANSPORT names (shm by default; make c-tests-tcp runs it over tcp and
 * auto too):
 *
 *  - B runs in a child process: it opens an RDM endpoint (its restarts at
 *    the first one's address, with fi_setname before fi_enable), answers
 *    every request 'R' with an answer 'A' carrying the same round and
 *    bytes, and answers anything sent to an earlier incarnation with a leak
 *    report 'L'.
 *  - A, this process, exchanges a request and its answer with B, leaves a
 *    message for B in flight (sent just before the kill), kills B with
 *    SIGKILL, sends one more to the dead B, starts B', and exchanges again:
 *    five restarts in a row, A's endpoint kept throughout; with the peer
 *    re-inserted (fi_av_remove, fi_av_insert) and with the fi_addr kept.
 *  - Nothing sent to a dead incarnation may reach a later one.
 */
#define _GNU_SOURCE
#include "rdm_common.h"
#include <signal.h>
#include <sys/wait.h>

#define ROUNDS 5
#define MSG 64

enum { KIND = 0, ROUND = 1, BODY = 8 };

/* An endpoint's name (the transport's address format: a string on shm
 * and auto, a sockaddr on tcp). */
struct name {
	size_t len;
	char b[128];
};

/* Opens an RDM endpoint of transport `tr`, at `name` (fi_setname before
 * fi_enable) or anywhere (NULL); 0 or the failing call's error. */
static int open_named(struct end *e, const char *tr, const struct name *name)
{
	memset(e, 0, sizeof *e);
	struct fi_info *h = fi_allocinfo();
	h->fabric_attr->prov_name = strdup("rustfab");
	h->domain_attr->name = strdup(tr);
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_MSG;
	h->domain_attr->av_type = FI_AV_MAP;
	int ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &e->info);
	fi_freeinfo(h);
	if (ret)
		return ret;
	struct fi_av_attr av_attr = {.type = FI_AV_MAP};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
	if ((ret = fi_fabric(e->info->fabric_attr, &e->fabric, NULL)) ||
	    (ret = fi_domain(e->fabric, e->info, &e->domain, NULL)) ||
	    (ret = fi_av_open(e->domain, &av_attr, &e->av, NULL)) ||
	    (ret = fi_cq_open(e->domain, &cq_attr, &e->cq, NULL)) ||
	    (ret = fi_endpoint(e->domain, e->info, &e->ep, NULL)) ||
	    (ret = fi_ep_bind(e->ep, &e->av->fid, 0)) ||
	    (ret = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV)))
		return ret;
	if (name && (ret = fi_setname(&e->ep->fid, (void *)name->b, name->len)))
		return ret;
	if ((ret = fi_enable(e->ep)))
		return ret;
	e->addrlen = sizeof e->addr;
	if ((ret = fi_getname(&e->ep->fid, e->addr, &e->addrlen)))
		return ret;
	return name && (e->addrlen != name->len || memcmp(e->addr, name->b, name->len)) ? -1000 : 0;
}

/* B's life: open (at `name` if given), report the address (or the error,
 * as a string starting with '!') to `fd`, then answer requests for ever. */
static void serve(const char *tr, const struct name *name, const char *client, int round, int fd)
{
	struct end b;
	struct name report = {0};
	int r = open_named(&b, tr, name);
	if (r) {
		report.len = 0;
		snprintf(report.b, sizeof report.b, "%d", r);
	} else {
		report.len = b.addrlen;
		memcpy(report.b, b.addr, b.addrlen);
	}
	if (write(fd, &report, sizeof report) != sizeof report || r)
		_exit(2);
	close(fd);
	fi_addr_t a;
	if (fi_av_insert(b.av, client, 1, &a, 0, NULL) != 1)
		_exit(3);
	unsigned char rx[MSG], tx[MSG];
	static int rxctx;
	if (fi_recv(b.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, &rxctx))
		_exit(4);
	for (;;) {
		struct fi_cq_tagged_entry c;
		ssize_t n = fi_cq_read(b.cq, &c, 1);
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(b.cq, &err, 0);
			continue;
		}
		if (n != 1 || c.op_context != &rxctx) {
			if (n == -FI_EAGAIN)
				usleep(50);
			continue;
		}
		memcpy(tx, rx, sizeof tx);
		/* A message of an earlier round was meant for an earlier
		 * incarnation: report the leak. */
		int answer = rx[KIND] == 'R' && rx[ROUND] == round;
		int leak = rx[ROUND] < round;
		if (fi_recv(b.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, &rxctx))
			_exit(5);
		if (!answer && !leak)
			continue;
		tx[KIND] = leak ? 'L' : 'A';
		double deadline = now_sec() + 10;
		while (fi_send(b.ep, tx, sizeof tx, NULL, a, NULL) == -FI_EAGAIN && now_sec() < deadline)
			fi_cq_read(b.cq, &c, 0);
	}
}

/* Forks B for `round` at `name` (NULL: anywhere); its address in `out`. */
static pid_t start_b(const char *tr, const struct name *name, const char *client, int round, struct name *out)
{
	int fds[2];
	if (pipe(fds))
		return -1;
	pid_t pid = rf_fork();
	if (pid == 0) {
		close(fds[0]);
		serve(tr, name, client, round, fds[1]);
		_exit(0);
	}
	close(fds[1]);
	ssize_t got = read(fds[0], out, sizeof *out);
	close(fds[0]);
	if (got != sizeof *out || !out->len) {
		if (got == sizeof *out)
			printf("    round %d: B did not open%s: %s\n", round, name ? " at its address" : "", out->b);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	return pid;
}

static int a_rxctx, a_txctx, a_stalectx;

/* A sends (kind, round) to `to`; for a request, waits up to 10 s for the
 * answer and checks it. Completions of earlier messages (stale ones may
 * fail) are skipped. 0: done; <0: what went wrong. */
static int exchange(struct end *a, fi_addr_t to, char kind, int round)
{
	unsigned char tx[MSG], rx[MSG];
	fill(tx, sizeof tx, (unsigned)round);
	tx[KIND] = (unsigned char)kind;
	tx[ROUND] = (unsigned char)round;
	void *ctx = kind == 'R' ? (void *)&a_txctx : (void *)&a_stalectx;
	if (kind == 'R' && fi_recv(a->ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, &a_rxctx))
		return -1;
	double deadline = now_sec() + 10 * rf_time_scale();
	ssize_t r;
	while ((r = fi_send(a->ep, tx, sizeof tx, NULL, to, ctx)) == -FI_EAGAIN && now_sec() < deadline) {
		struct fi_cq_tagged_entry c;
		(void)fi_cq_read(a->cq, &c, 0);
	}
	if (r) {
		if (kind == 'S')
			return 0; /* to a dead peer: refusing is fine */
		printf("    round %d: fi_send: %zd (%s)\n", round, r, fi_strerror((int)-r));
		return -2;
	}
	if (kind != 'R')
		return 0;
	int sent = 0;
	/* Over shm (and auto between processes of one host) a restart is
	 * noticed before the request is written: no retry. */
	int retries = !strcmp(rf_transport(), "tcp");
	while (now_sec() < deadline) {
		struct fi_cq_tagged_entry c;
		ssize_t n = fi_cq_read(a->cq, &c, 1);
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			if (fi_cq_readerr(a->cq, &err, 0) != 1)
				return -3;
			if (err.op_context == &a_stalectx)
				continue;
			/* tcp: a request written into the dead incarnation's
			 * connection before its end was read fails; once. */
			if (err.op_context == &a_txctx && err.err == FI_ECONNRESET && retries-- > 0) {
				printf("    round %d: the request failed (%s): sent again\n", round, fi_strerror(err.err));
				while ((r = fi_send(a->ep, tx, sizeof tx, NULL, to, ctx)) == -FI_EAGAIN && now_sec() < deadline)
					(void)fi_cq_read(a->cq, &c, 0);
				if (r)
					return -2;
				continue;
			}
			printf("    round %d: error completion %d (%s) for %s\n", round, err.err, fi_strerror(err.err),
			       err.op_context == &a_rxctx ? "the receive" : "the request");
			return -4;
		}
		if (n != 1) {
			usleep(20);
			continue;
		}
		if (c.op_context == &a_txctx)
			sent = 1;
		if (c.op_context != &a_rxctx)
			continue;
		if (rx[KIND] == 'L') {
			printf("    round %d: a message of round %d reached the new incarnation\n", round, rx[ROUND]);
			return -5;
		}
		tx[KIND] = 'A';
		if (memcmp(rx, tx, sizeof tx)) {
			printf("    round %d: wrong answer (kind %c, round %d)\n", round, rx[KIND], rx[ROUND]);
			return -6;
		}
		/* The request's own completion comes too (before or after). */
		while (!sent && now_sec() < deadline) {
			n = fi_cq_read(a->cq, &c, 1);
			if (n == 1 && c.op_context == &a_txctx)
				sent = 1;
			else if (n == -FI_EAVAIL) {
				struct fi_cq_err_entry err = {0};
				fi_cq_readerr(a->cq, &err, 0);
				if (err.op_context == &a_txctx)
					return -7;
			}
		}
		return sent ? 0 : -8;
	}
	printf("    round %d: no answer within 10 s\n", round);
	return -9;
}

static void restarts(int reinsert)
{
	const char *tr = rf_transport();
	struct end A;
	int r = open_named(&A, tr, NULL);
	if (r)
		printf("    open: %d (%s)\n", r, fi_strerror(-r));
	CHECK_OK(r);
	struct name name, got;
	pid_t b = start_b(tr, NULL, A.addr, 0, &name);
	CHECK(b > 0);
	fi_addr_t to;
	CHECK_EQ(fi_av_insert(A.av, name.b, 1, &to, 0, NULL), 1);
	int ok = 0;
	for (int round = 0; round <= ROUNDS; round++) {
		if (round > 0) {
			b = start_b(tr, &name, A.addr, round, &got);
			if (b < 0)
				break;
			if (reinsert) {
				if (fi_av_remove(A.av, &to, 1, 0) ||
				    fi_av_insert(A.av, name.b, 1, &to, 0, NULL) != 1)
					break;
			}
		}
		double t0 = now_sec();
		r = exchange(&A, to, 'R', round);
		if (r) {
			printf("    round %d (of %d): exchange failed (%d)\n", round, ROUNDS, r);
			break;
		}
		if (round > 0)
			printf("    restart %d: answered in %.1f ms\n", round, (now_sec() - t0) * 1e3);
		ok++;
		/* One message left to B, one more to it once dead. */
		exchange(&A, to, 'S', round);
		kill(b, SIGKILL);
		waitpid(b, NULL, 0);
		b = -1;
		exchange(&A, to, 'S', round);
	}
	if (b > 0) {
		kill(b, SIGKILL);
		waitpid(b, NULL, 0);
	}
	end_close(&A);
	CHECK_EQ(ok, ROUNDS + 1);
}

TEST(restart_at_same_address_reinserted)
{
	restarts(1);
}

TEST(restart_at_same_address_same_fi_addr)
{
	restarts(0);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	setenv("FI_RUSTFAB_IFACE", "lo", 0);
	printf("    transport %s\n", rf_transport());
	RUN(restart_at_same_address_reinserted);
	RUN(restart_at_same_address_same_fi_addr);
	return harness_done();
}
