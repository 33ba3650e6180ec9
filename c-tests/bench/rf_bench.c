/*
 * rf_bench: ping-pong latency and streaming bandwidth between two processes
 * over any libfabric RDM or MSG provider, so that rustfab and the built-in
 * providers are measured by the same code in the same run (bench/run.sh
 * drives it).
 *
 *   rf_bench -p <prov> [-d <domain>] [-e rdm|msg] [-s sizes] [-i iters] [-w window]
 *            [-m lat|bw|both] [-B]
 *
 * -B: the endpoints are opened with FI_BUFFERED_RECV and post no receives;
 * each message arrives as a completion (FI_CQ_FORMAT_DATA: op_context is a
 * struct fi_recv_context, buf the provider's copy), is read in place (its
 * first byte) and released with FI_DISCARD; one reported with FI_MORE is
 * claimed (FI_CLAIM) into the receive buffer, and its FI_CLAIM completion is
 * what counts. Without -B: posted receives, FI_CQ_FORMAT_CONTEXT.
 *
 * The parent is the server (CPU 0), a forked child the client (CPU 1);
 * addresses are exchanged over a pipe (RDM: both endpoint names, inserted
 * into the AVs; MSG: the server's passive endpoint name, which the client
 * connects to; the server accepts). Prints one line per measurement:
 *   lat <prov> <bytes> <one-way usec>
 *   bw  <prov> <bytes> <MB/s>
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define BENCH_PROG "rf_bench"
#include "bench_common.h"

static const char *prov = "rustfab", *domain_name;
static size_t iters = 10000, window = 64;
static const char *mode = "both";
static int buffered; /* -B */
static volatile unsigned char sink; /* bytes read in place (-B) */
static int use_msg; /* -e msg: connected endpoints */
static size_t sizes[64];
static int nsizes;

struct res {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_eq *eq;   /* MSG */
	struct fid_pep *pep; /* MSG server */
	fi_addr_t peer;
	char *buf;
	size_t buflen;
	uint64_t pending_tx;
};

static struct fi_info *bench_hints(enum fi_ep_type type)
{
	struct fi_info *hints = fi_allocinfo();
	hints->fabric_attr->prov_name = strdup(prov);
	if (domain_name)
		hints->domain_attr->name = strdup(domain_name);
	hints->ep_attr->type = type;
	hints->caps = FI_MSG;
	hints->mode = FI_CONTEXT | FI_CONTEXT2 | (buffered ? FI_BUFFERED_RECV : 0);
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	return hints;
}

static void alloc_buf(struct res *r, size_t maxsize)
{
	r->buflen = maxsize * 2 + 4096;
	if (posix_memalign((void **)&r->buf, 4096, r->buflen))
		DIE("no memory");
	memset(r->buf, 0xa5, r->buflen);
}

/* Waits for one CM event of type `want` on `eq`. */
static struct fi_eq_cm_entry cm_wait(struct fid_eq *eq, uint32_t want)
{
	struct fi_eq_cm_entry e;
	uint32_t ev;
	ssize_t n = fi_eq_sread(eq, &ev, &e, sizeof e, 30000, 0);
	if (n == -FI_EAVAIL) {
		struct fi_eq_err_entry err = {0};
		fi_eq_readerr(eq, &err, 0);
		DIE("EQ error %d (%s)", err.err, fi_strerror(err.err));
	}
	if (n < (ssize_t)sizeof e || ev != want)
		DIE("fi_eq_sread: %zd, event %u (wanted %u)", n, ev, want);
	return e;
}

static void open_msg_ep(struct res *r, struct fi_info *info)
{
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_CONTEXT, .size = 1024};
	CK(fi_domain(r->fabric, info, &r->domain, NULL));
	CK(fi_cq_open(r->domain, &ca, &r->cq, NULL));
	CK(fi_endpoint(r->domain, info, &r->ep, NULL));
	CK(fi_ep_bind(r->ep, &r->eq->fid, 0));
	CK(fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV));
	CK(fi_enable(r->ep));
}

/*
 * MSG: the server listens on 127.0.0.1 (any port) and passes its passive
 * endpoint's name through the pipe; the client connects to it.
 */
static void setup_msg(struct res *r, int server, int rfd, int wfd, size_t maxsize)
{
	struct fi_info *hints = bench_hints(FI_EP_MSG);
	struct fi_eq_attr ea = {.wait_obj = FI_WAIT_UNSPEC};
	char name[256];
	size_t len = sizeof name;
	memset(r, 0, sizeof *r);
	if (server) {
		struct fi_info *pinfo;
		CK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints, &pinfo));
		CK(fi_fabric(pinfo->fabric_attr, &r->fabric, NULL));
		CK(fi_eq_open(r->fabric, &ea, &r->eq, NULL));
		CK(fi_passive_ep(r->fabric, pinfo, &r->pep, NULL));
		CK(fi_pep_bind(r->pep, &r->eq->fid, 0));
		CK(fi_listen(r->pep));
		CK(fi_getname(&r->pep->fid, name, &len));
		fi_freeinfo(pinfo);
		if (write(wfd, &len, sizeof len) != sizeof len || write(wfd, name, len) != (ssize_t)len)
			DIE("pipe write");
		struct fi_eq_cm_entry e = cm_wait(r->eq, FI_CONNREQ);
		r->info = e.info;
		open_msg_ep(r, r->info);
		CK(fi_accept(r->ep, NULL, 0));
		cm_wait(r->eq, FI_CONNECTED);
	} else {
		if (read(rfd, &len, sizeof len) != sizeof len || len > sizeof name || read(rfd, name, len) != (ssize_t)len)
			DIE("pipe read");
		hints->addr_format = len == sizeof(struct sockaddr_in6) ? FI_SOCKADDR_IN6 : FI_SOCKADDR_IN;
		hints->dest_addr = malloc(len);
		memcpy(hints->dest_addr, name, len);
		hints->dest_addrlen = len;
		CK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &r->info));
		CK(fi_fabric(r->info->fabric_attr, &r->fabric, NULL));
		CK(fi_eq_open(r->fabric, &ea, &r->eq, NULL));
		open_msg_ep(r, r->info);
		CK(fi_connect(r->ep, r->info->dest_addr, NULL, 0));
		cm_wait(r->eq, FI_CONNECTED);
	}
	fi_freeinfo(hints);
	alloc_buf(r, maxsize);
}

static void setup(struct res *r, size_t maxsize)
{
	struct fi_info *hints = bench_hints(FI_EP_RDM);
	memset(r, 0, sizeof *r);
	CK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &r->info));
	fi_freeinfo(hints);
	if (buffered && !(r->info->mode & FI_BUFFERED_RECV))
		DIE("%s does not offer buffered receives (FI_BUFFERED_RECV)", prov);
	CK(fi_fabric(r->info->fabric_attr, &r->fabric, NULL));
	CK(fi_domain(r->fabric, r->info, &r->domain, NULL));
	struct fi_av_attr aa = {.type = FI_AV_MAP};
	CK(fi_av_open(r->domain, &aa, &r->av, NULL));
	struct fi_cq_attr ca = {.format = buffered ? FI_CQ_FORMAT_DATA : FI_CQ_FORMAT_CONTEXT, .size = 1024};
	CK(fi_cq_open(r->domain, &ca, &r->cq, NULL));
	CK(fi_endpoint(r->domain, r->info, &r->ep, NULL));
	CK(fi_ep_bind(r->ep, &r->av->fid, 0));
	CK(fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV));
	CK(fi_enable(r->ep));
	alloc_buf(r, maxsize);
}

static void teardown(struct res *r)
{
	if (r->eq)
		fi_shutdown(r->ep, 0);
	fi_close(&r->ep->fid);
	fi_close(&r->cq->fid);
	if (r->av)
		fi_close(&r->av->fid);
	if (r->pep)
		fi_close(&r->pep->fid);
	fi_close(&r->domain->fid);
	if (r->eq)
		fi_close(&r->eq->fid);
	fi_close(&r->fabric->fid);
	fi_freeinfo(r->info);
	free(r->buf);
}

/* Completions consumed while retrying a post (counted against later waits). */
static size_t banked;

/*
 * -B: what one completion means. An arrival is read in place and released
 * (counts as the receive), or, with FI_MORE, claimed into the receive buffer
 * (its FI_CLAIM completion counts). Returns the completions it counts for.
 */
static size_t buffered_entry(struct res *r, const struct fi_cq_data_entry *c)
{
	if (!(c->flags & FI_RECV) || (c->flags & FI_CLAIM))
		return 1;
	struct fi_recv_context *rc = c->op_context;
	ssize_t k;
	if (c->flags & FI_MORE) {
		struct iovec iov = {r->buf, c->len};
		struct fi_msg m = {.msg_iov = &iov, .iov_count = 1, .context = rc};
		while ((k = fi_recvmsg(r->ep, &m, FI_CLAIM)) == -FI_EAGAIN)
			;
		if (k)
			DIE("FI_CLAIM %zd", k);
		return 0;
	}
	if (c->len)
		sink = *(const unsigned char *)c->buf;
	struct fi_msg m = {.context = rc};
	if ((k = fi_recvmsg(r->ep, &m, FI_DISCARD)))
		DIE("FI_DISCARD %zd", k);
	return 1;
}

static void progress_once(struct res *r)
{
	struct fi_cq_data_entry e;
	ssize_t k = fi_cq_read(r->cq, &e, 1);
	if (k == 1)
		banked += buffered ? buffered_entry(r, &e) : 1;
	else if (k == -FI_EAVAIL)
		DIE("completion error while retrying a post");
}

/* Waits for `n` completions, spinning on fi_cq_read. */
static void wait_n(struct res *r, size_t n)
{
	struct fi_cq_data_entry e[64];
	while (n && banked) {
		banked--;
		n--;
	}
	while (n) {
		ssize_t k = fi_cq_read(r->cq, e, n < 64 ? n : 64);
		if (k > 0 && buffered) {
			for (ssize_t i = 0; i < k; i++) {
				size_t c = buffered_entry(r, &e[i]);
				if (c > n)
					banked += c - n, c = n;
				n -= c;
			}
		} else if (k > 0) {
			n -= (size_t)k;
		} else if (k == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(r->cq, &err, 0);
			DIE("completion error %d (%s)", err.err, fi_strerror(err.err));
		} else if (k != -FI_EAGAIN) {
			DIE("fi_cq_read %zd", k);
		}
	}
}

static void post_recv(struct res *r, void *buf, size_t len)
{
	ssize_t k;
	if (buffered)
		return; /* the provider's buffers take every message */
	while ((k = fi_recv(r->ep, buf, len, NULL, FI_ADDR_UNSPEC, NULL)) == -FI_EAGAIN)
		progress_once(r);
	if (k)
		DIE("fi_recv %zd", k);
}

static void post_send(struct res *r, void *buf, size_t len)
{
	ssize_t k;
	for (;;) {
		k = fi_send(r->ep, buf, len, NULL, r->peer, NULL);
		if (k != -FI_EAGAIN)
			break;
		progress_once(r);
	}
	if (k)
		DIE("fi_send %zd", k);
}

static void latency(struct res *r, int server, size_t size)
{
	size_t n = size >= (1 << 20) ? iters / 20 + 10 : iters;
	size_t warm = n / 10 + 1;
	double t0 = 0;
	for (size_t i = 0; i < n + warm; i++) {
		if (i == warm)
			t0 = bench_now();
		if (server) {
			post_recv(r, r->buf, size);
			wait_n(r, 1);
			post_send(r, r->buf + size, size);
			wait_n(r, 1);
		} else {
			post_recv(r, r->buf, size);
			post_send(r, r->buf + size, size);
			wait_n(r, 2);
		}
	}
	double t = bench_now() - t0;
	if (!server)
		printf("lat %s %zu %.3f\n", prov, size, t / n / 2 * 1e6);
}

static void bandwidth(struct res *r, int server, size_t size)
{
	size_t w = window, rounds = size >= (1 << 20) ? 20 : (size >= 65536 ? 100 : iters / w + 10);
	size_t warm = rounds / 10 + 1;
	double t0 = 0;
	for (size_t i = 0; i < rounds + warm; i++) {
		if (i == warm)
			t0 = bench_now();
		if (server) {
			for (size_t j = 0; j < w; j++)
				post_recv(r, r->buf + (j % 2) * size, size);
			post_send(r, r->buf, 0); /* ready */
			wait_n(r, w + 1);
			post_recv(r, r->buf, 4);
			wait_n(r, 1);
		} else {
			post_recv(r, r->buf, 4);
			wait_n(r, 1); /* server ready */
			for (size_t j = 0; j < w; j++)
				post_send(r, r->buf + size, size);
			wait_n(r, w);
			post_send(r, r->buf, 4); /* done */
			wait_n(r, 1);
		}
	}
	double t = bench_now() - t0;
	if (!server)
		printf("bw %s %zu %.1f\n", prov, size, (double)size * w * rounds / t / 1e6);
}

static void run(int server, int rfd, int wfd)
{
	struct res r;
	size_t maxsize = 0;
	for (int i = 0; i < nsizes; i++)
		if (sizes[i] > maxsize)
			maxsize = sizes[i];
	if (use_msg) {
		setup_msg(&r, server, rfd, wfd, maxsize);
	} else {
		setup(&r, maxsize);
		char addr[256], peer[256];
		size_t alen = sizeof addr;
		CK(fi_getname(&r.ep->fid, addr, &alen));
		if (write(wfd, &alen, sizeof alen) != sizeof alen || write(wfd, addr, alen) != (ssize_t)alen)
			DIE("pipe write");
		size_t plen;
		if (read(rfd, &plen, sizeof plen) != sizeof plen || plen > sizeof peer ||
		    read(rfd, peer, plen) != (ssize_t)plen)
			DIE("pipe read");
		if (fi_av_insert(r.av, peer, 1, &r.peer, 0, NULL) != 1)
			DIE("fi_av_insert");
	}
	for (int i = 0; i < nsizes; i++) {
		if (strcmp(mode, "bw"))
			latency(&r, server, sizes[i]);
		if (strcmp(mode, "lat"))
			bandwidth(&r, server, sizes[i]);
		fflush(stdout);
	}
	/* final handshake so neither side closes while the other still sends */
	post_recv(&r, r.buf, 4);
	post_send(&r, r.buf + 8, 4);
	wait_n(&r, 2);
	teardown(&r);
}

static void parse_sizes(char *s)
{
	nsizes = 0;
	for (char *t = strtok(s, ","); t && nsizes < 64; t = strtok(NULL, ",")) {
		char *end;
		size_t v = strtoull(t, &end, 10);
		if (*end == 'k' || *end == 'K')
			v <<= 10;
		else if (*end == 'm' || *end == 'M')
			v <<= 20;
		sizes[nsizes++] = v;
	}
}

int main(int argc, char **argv)
{
	char def[] = "1,64,1k,4k,64k,1m,4m";
	int c;
	parse_sizes(def);
	while ((c = getopt(argc, argv, "p:d:e:s:i:w:m:B")) != -1) {
		switch (c) {
		case 'p': prov = optarg; break;
		case 'd': domain_name = optarg; break;
		case 'e': use_msg = !strcmp(optarg, "msg"); break;
		case 's': parse_sizes(optarg); break;
		case 'i': iters = strtoull(optarg, NULL, 10); break;
		case 'w': window = strtoull(optarg, NULL, 10); break;
		case 'm': mode = optarg; break;
		case 'B': buffered = 1; break;
		default: DIE("usage: rf_bench -p prov [-d domain] [-e rdm|msg] [-s sizes] [-i iters] [-w window] [-m lat|bw|both] [-B]");
		}
	}
	if (buffered && use_msg)
		DIE("-B is measured on RDM endpoints only");
	int p2c[2], c2p[2];
	if (pipe(p2c) || pipe(c2p))
		DIE("pipe");
	pid_t pid = fork();
	if (pid < 0)
		DIE("fork");
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a killed server */
		bench_pin(1);
		run(0, p2c[0], c2p[1]);
		_exit(0);
	}
	bench_pin(0);
	run(1, c2p[0], p2c[1]);
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
