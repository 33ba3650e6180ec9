/*
 * rf_scale: what an RDM endpoint costs as its number of peers grows, over
 * any libfabric provider (rustfab and the built-in ones measured by the same
 * code). scale/run.sh drives it.
 *
 *   rf_scale -p <prov> [-d <domain>] -n <peers> [-r <steady rounds>]
 *
 * A forked child opens <peers> endpoints (one fabric, domain, AV and CQ) and
 * sends their names over a pipe; the parent (one endpoint) inserts them into
 * its AV and exchanges one 8-byte message with every peer, 1 + 5 times: the
 * first round includes whatever the provider does on first contact
 * (connections, shm segments mapped), the median of the other five is the
 * steady state. Parent and child are pinned to CPUs 0 and 1. Each child endpoint
 * answers from the endpoint the message reached. Printed (one line):
 *   scale <prov> <peers> setup_us=<first round> steady_us=<median later round>
 *         peer_rss_kb=<parent RSS growth per peer> peer_fds=<parent fds per peer>
 *         peer_shm_kb=<parent's mapped /dev/shm growth per peer>
 *         ep_rss_kb=<child RSS per endpoint> ep_fds=<child fds per endpoint>
 *         ep_shm_kb=<child /dev/shm mapped per endpoint> shm_files=<child's /dev/shm files>
 * (per-peer figures: (after all rounds - after the parent's endpoint
 * opened) / peers; per-endpoint: (after the endpoints and all rounds -
 * before the first endpoint) / peers). Exit status 0 when every message
 * arrived with the right contents, else 1 (2: set-up failed).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#define BENCH_PROG "rf_scale"
#include "../bench/bench_common.h"

#define NAMELEN 256
#define MAX_ROUNDS 64

static const char *prov = "rustfab", *domain_name;
static int npeers = 8;
/* -r 0 leaves only the first round (what first contact costs: make
 * scale-counts counts its system calls and instructions). */
static int steady_rounds = 5;

struct usage {
	long rss_kb, fds, shm_kb, shm_files;
};

/* RSS (statm), open descriptors, and /dev/shm files mapped by this process
 * (distinct files and the sum of their mappings). */
static struct usage usage_now(void)
{
	struct usage u = {0};
	long pages = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	u.rss_kb = res * (sysconf(_SC_PAGESIZE) / 1024);
	DIR *d = opendir("/proc/self/fd");
	if (d) {
		while (readdir(d))
			u.fds++;
		closedir(d);
		u.fds -= 3; /* ".", ".." and the directory itself */
	}
	f = fopen("/proc/self/maps", "r");
	char line[512], seen[4096][64];
	int nseen = 0;
	if (f) {
		while (fgets(line, sizeof line, f)) {
			unsigned long a, b;
			char *p = strstr(line, "/dev/shm/");
			if (!p || sscanf(line, "%lx-%lx", &a, &b) != 2)
				continue;
			u.shm_kb += (long)((b - a) / 1024);
			p[strcspn(p, "\n")] = 0;
			int dup = 0;
			for (int i = 0; i < nseen && !dup; i++)
				dup = strncmp(seen[i], p, 63) == 0;
			if (!dup && nseen < 4096) {
				snprintf(seen[nseen++], 64, "%s", p);
			}
		}
		fclose(f);
	}
	u.shm_files = nseen;
	return u;
}

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void xwrite(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w <= 0)
			DIE("pipe write: %s", strerror(errno));
		c += w;
		n -= (size_t)w;
	}
}

static void xread(int fd, void *p, size_t n)
{
	char *c = p;
	while (n) {
		ssize_t r = read(fd, c, n);
		if (r <= 0)
			DIE("pipe read: %s", r ? strerror(errno) : "closed");
		c += r;
		n -= (size_t)r;
	}
}

struct side {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
};

static void open_side(struct side *s)
{
	struct fi_info *hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->mode = FI_CONTEXT;
	hints->fabric_attr->prov_name = strdup(prov);
	if (domain_name)
		hints->domain_attr->name = strdup(domain_name);
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	CK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &s->info));
	fi_freeinfo(hints);
	CK(fi_fabric(s->info->fabric_attr, &s->fabric, NULL));
	CK(fi_domain(s->fabric, s->info, &s->domain, NULL));
	struct fi_av_attr aa = {.type = FI_AV_TABLE};
	CK(fi_av_open(s->domain, &aa, &s->av, NULL));
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_CONTEXT, .size = (size_t)npeers * 4 + 64};
	CK(fi_cq_open(s->domain, &ca, &s->cq, NULL));
}

static struct fid_ep *open_ep(struct side *s)
{
	struct fid_ep *ep;
	CK(fi_endpoint(s->domain, s->info, &ep, NULL));
	CK(fi_ep_bind(ep, &s->av->fid, 0));
	CK(fi_ep_bind(ep, &s->cq->fid, FI_SEND | FI_RECV));
	CK(fi_enable(ep));
	return ep;
}

/* Waits for one completion; returns its context. */
static void *next_completion(struct fid_cq *cq)
{
	struct fi_cq_entry e;
	for (;;) {
		ssize_t r = fi_cq_read(cq, &e, 1);
		if (r == 1)
			return e.op_context;
		if (r == -FI_EAGAIN)
			continue;
		struct fi_cq_err_entry err = {0};
		fi_cq_readerr(cq, &err, 0);
		DIE("completion error %d (%s)", err.err, fi_strerror(err.err));
	}
}

/* One slot per peer endpoint: receive buffer, send buffer and contexts. */
struct slot {
	struct fi_context rx_ctx, tx_ctx;
	uint64_t rx, tx;
	struct fid_ep *ep;
	int idx;
};

static void post_recv(struct slot *s)
{
	int r;
	while ((r = (int)fi_recv(s->ep, &s->rx, sizeof s->rx, NULL, FI_ADDR_UNSPEC, &s->rx_ctx)) == -FI_EAGAIN)
		;
	CK(r);
}

static void send_to(struct fid_ep *ep, struct fid_cq *cq, uint64_t *buf, fi_addr_t to, struct fi_context *ctx,
		    void (*on)(void *))
{
	int r;
	while ((r = (int)fi_send(ep, buf, sizeof *buf, NULL, to, ctx)) == -FI_EAGAIN) {
		struct fi_cq_entry e;
		ssize_t n = fi_cq_read(cq, &e, 1);
		if (n == 1)
			on(e.op_context);
	}
	CK(r);
}

/* ---- the child: npeers endpoints that answer the parent */
static struct slot *cslots;
static int child_rx_left, child_tx_left, child_bad;
static fi_addr_t parent_addr;
static struct side *cside;

static void child_on(void *ctx)
{
	for (int i = 0; i < npeers; i++) {
		struct slot *s = &cslots[i];
		if (ctx == &s->tx_ctx) {
			child_tx_left--;
			return;
		}
		if (ctx == &s->rx_ctx) {
			child_rx_left--;
			if (s->rx != (0x5ca1e000u | (uint64_t)i))
				child_bad = 1;
			s->tx = s->rx ^ 0xffff0000u;
			post_recv(s);
			send_to(s->ep, cside->cq, &s->tx, parent_addr, &s->tx_ctx, child_on);
			return;
		}
	}
	child_bad = 1;
}

static int child(int rfd, int wfd)
{
	struct side s;
	cside = &s;
	open_side(&s);
	struct usage u0 = usage_now();
	cslots = calloc((size_t)npeers, sizeof *cslots);
	for (int i = 0; i < npeers; i++) {
		cslots[i].ep = open_ep(&s);
		cslots[i].idx = i;
		char name[NAMELEN] = {0};
		size_t len = sizeof name;
		CK(fi_getname(&cslots[i].ep->fid, name, &len));
		xwrite(wfd, &len, sizeof len);
		xwrite(wfd, name, len);
	}
	char pname[NAMELEN];
	size_t plen;
	xread(rfd, &plen, sizeof plen);
	if (plen > sizeof pname)
		DIE("name too long");
	xread(rfd, pname, plen);
	if (fi_av_insert(s.av, pname, 1, &parent_addr, 0, NULL) != 1)
		DIE("fi_av_insert (parent) failed");
	for (int i = 0; i < npeers; i++)
		post_recv(&cslots[i]);
	char go = 1;
	xwrite(wfd, &go, 1);
	child_rx_left = child_tx_left = (1 + steady_rounds) * npeers;
	while (child_rx_left > 0 || child_tx_left > 0)
		child_on(next_completion(s.cq));
	struct usage u1 = usage_now();
	long out[5] = {u1.rss_kb - u0.rss_kb, u1.fds - u0.fds, u1.shm_kb - u0.shm_kb, u1.shm_files, child_bad};
	xwrite(wfd, out, sizeof out);
	xread(rfd, &go, 1); /* the parent is done: close */
	for (int i = 0; i < npeers; i++)
		fi_close(&cslots[i].ep->fid);
	fi_close(&s.cq->fid);
	fi_close(&s.av->fid);
	fi_close(&s.domain->fid);
	fi_close(&s.fabric->fid);
	fi_freeinfo(s.info);
	return 0;
}

/* ---- the parent: one endpoint, npeers peers */
static struct fi_context *prx_ctx, *ptx_ctx;
static uint64_t *prx, *ptx;
static int prx_left, ptx_left, pbad;

static void parent_on(void *ctx)
{
	struct fi_context *c = ctx;
	if (c >= ptx_ctx && c < ptx_ctx + npeers) {
		ptx_left--;
	} else if (c >= prx_ctx && c < prx_ctx + npeers) {
		prx_left--;
	} else {
		pbad = 1;
	}
}

static double parent_round(struct fid_ep *ep, struct side *s, fi_addr_t *addrs)
{
	double t0 = now_us();
	for (int i = 0; i < npeers; i++) {
		prx[i] = 0;
		int r;
		while ((r = (int)fi_recv(ep, &prx[i], sizeof prx[i], NULL, FI_ADDR_UNSPEC, &prx_ctx[i])) == -FI_EAGAIN)
			parent_on(next_completion(s->cq));
		CK(r);
	}
	prx_left = ptx_left = npeers;
	for (int i = 0; i < npeers; i++) {
		ptx[i] = 0x5ca1e000u | (uint64_t)i;
		send_to(ep, s->cq, &ptx[i], addrs[i], &ptx_ctx[i], parent_on);
	}
	while (prx_left > 0 || ptx_left > 0)
		parent_on(next_completion(s->cq));
	double dt = now_us() - t0;
	/* every answer arrived, each from its own peer: the set of values */
	for (int i = 0; i < npeers; i++) {
		uint64_t v = prx[i] ^ 0xffff0000u;
		if ((v & ~0xfffu) != 0x5ca1e000u || (int)(v & 0xfff) >= npeers)
			pbad = 1;
	}
	return dt;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int c;
	while ((c = getopt(argc, argv, "p:d:n:r:")) != -1) {
		switch (c) {
		case 'p': prov = optarg; break;
		case 'd': domain_name = optarg; break;
		case 'n': npeers = atoi(optarg); break;
		case 'r': steady_rounds = atoi(optarg); break;
		default: DIE("usage: rf_scale -p prov [-d domain] -n peers [-r steady rounds]");
		}
	}
	if (npeers < 1 || npeers > 4000)
		DIE("-n: 1 .. 4000");
	if (steady_rounds < 0 || steady_rounds > MAX_ROUNDS)
		DIE("-r: 0 .. %d", MAX_ROUNDS);
	/* many endpoints need many descriptors */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	int p2c[2], c2p[2];
	if (pipe(p2c) || pipe(c2p))
		DIE("pipe");
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		DIE("fork");
	if (pid == 0) {
		close(p2c[1]);
		close(c2p[0]);
		bench_pin(1);
		_exit(child(p2c[0], c2p[1]));
	}
	close(p2c[0]);
	close(c2p[1]);
	bench_pin(0);
	int rfd = c2p[0], wfd = p2c[1];

	struct side s;
	open_side(&s);
	struct fid_ep *ep = open_ep(&s);
	prx_ctx = calloc((size_t)npeers, sizeof *prx_ctx);
	ptx_ctx = calloc((size_t)npeers, sizeof *ptx_ctx);
	prx = calloc((size_t)npeers, sizeof *prx);
	ptx = calloc((size_t)npeers, sizeof *ptx);
	fi_addr_t *addrs = calloc((size_t)npeers, sizeof *addrs);
	char (*names)[NAMELEN] = calloc((size_t)npeers, NAMELEN);
	for (int i = 0; i < npeers; i++) {
		size_t len;
		xread(rfd, &len, sizeof len);
		if (len > NAMELEN)
			DIE("name too long");
		xread(rfd, names[i], len);
	}
	char pname[NAMELEN] = {0};
	size_t plen = sizeof pname;
	CK(fi_getname(&ep->fid, pname, &plen));
	xwrite(wfd, &plen, sizeof plen);
	xwrite(wfd, pname, plen);
	char go;
	xread(rfd, &go, 1);

	struct usage u0 = usage_now();
	for (int i = 0; i < npeers; i++)
		if (fi_av_insert(s.av, names[i], 1, &addrs[i], 0, NULL) != 1)
			DIE("fi_av_insert (peer %d) failed", i);
	double setup = parent_round(ep, &s, addrs);
	double rounds[MAX_ROUNDS] = {0};
	for (int r = 0; r < steady_rounds; r++)
		rounds[r] = parent_round(ep, &s, addrs);
	qsort(rounds, (size_t)steady_rounds, sizeof rounds[0], cmp_double);
	double steady = rounds[steady_rounds / 2];
	struct usage u1 = usage_now();

	long cu[5];
	xread(rfd, cu, sizeof cu);
	go = 1;
	xwrite(wfd, &go, 1);
	int st = 0;
	waitpid(pid, &st, 0);
	int ok = !pbad && !cu[4] && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	double n = npeers;
	printf("scale %s %d setup_us=%.0f steady_us=%.0f peer_rss_kb=%.1f peer_fds=%.2f peer_shm_kb=%.1f "
	       "ep_rss_kb=%.1f ep_fds=%.2f ep_shm_kb=%.1f shm_files=%ld%s\n",
	       prov, npeers, setup, steady, (u1.rss_kb - u0.rss_kb) / n, (u1.fds - u0.fds) / n,
	       (u1.shm_kb - u0.shm_kb) / n, cu[0] / n, cu[1] / n, cu[2] / n, cu[3], ok ? "" : " FAIL");
	fi_close(&ep->fid);
	fi_close(&s.cq->fid);
	fi_close(&s.av->fid);
	fi_close(&s.domain->fid);
	fi_close(&s.fabric->fid);
	fi_freeinfo(s.info);
	return ok ? 0 : 1;
}
