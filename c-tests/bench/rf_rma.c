/*
 * rf_rma: the rate of one-sided operations between two processes, posted as
 * fabtests' fi_rdm_atomic and fi_rma_bw post them, so that a change can be
 * measured without running fabtests (which c-tests/bench/peers.sh runs).
 *
 *   rf_rma [-p prov] [-o sum|fsum|cswap|write|read] [-s bytes] [-i iters]
 *          [-w window] [-D]
 *
 * Both processes (the parent and a forked child, pinned to CPUs 0 and 1)
 * run the same loop at once against each other's registered buffer: post
 * `window` operations (retrying on -FI_EAGAIN while reading the CQ), then
 * read the CQ until they completed; `iters` operations in all. -w 1 is
 * fi_rdm_atomic's loop (post one, wait for it), -w 64 fi_rma_bw's.
 * -o sum: fi_atomic FI_SUM on one uint64; fsum: fi_fetch_atomic FI_SUM;
 * cswap: fi_compare_atomic FI_CSWAP; write/read: fi_write/fi_read of -s
 * bytes (default 8). -D: the endpoints' tx op_flags ask
 * FI_DELIVERY_COMPLETE. After its loop each side keeps reading its CQ (its
 * progress serves the other's operations) until both are done; at the end
 * each checks the word the other's sums or writes targeted. Prints, per
 * side, one line: "<op> <bytes> w<window> <ops/s> <usec per op>".
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>

#define BENCH_PROG "rf_rma"
#include "bench_common.h"

/* The target area and the operand area: 64 KiB each, or room for -s. */
static size_t BUF = 65536;

static const char *prov = "rustfab", *opname = "sum";
static size_t size = 8, iters = 10000, window = 1;
static int delivery;

/* Shared between the two processes (MAP_SHARED before fork). */
struct shared {
	char name[2][256];
	size_t namelen[2];
	uint64_t addr[2], key[2];
	volatile int ready[2], done[2];
};

static void wait_flag(volatile int *f)
{
	while (!*f)
		sched_yield();
}

static int pump(struct fid_cq *cq)
{
	struct fi_cq_entry e[16];
	ssize_t n = fi_cq_read(cq, e, 16);
	if (n > 0)
		return (int)n;
	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = {0};
		fi_cq_readerr(cq, &err, 0);
		DIE("completion error %d (%s)", err.err, fi_strerror(err.err));
	}
	DIE("fi_cq_read = %zd", n);
}

static void run(int me, struct shared *sh)
{
	bench_pin(me);

	struct fi_info *hints = fi_allocinfo(), *info;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_RMA | FI_ATOMIC;
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup(prov);
	if (delivery)
		hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	CK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	fi_freeinfo(hints);
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr;
	CK(fi_fabric(info->fabric_attr, &fab, NULL));
	CK(fi_domain(fab, info, &dom, NULL));
	struct fi_av_attr aa = {.type = FI_AV_MAP};
	CK(fi_av_open(dom, &aa, &av, NULL));
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_CONTEXT, .size = 1024};
	CK(fi_cq_open(dom, &ca, &cq, NULL));
	CK(fi_endpoint(dom, info, &ep, NULL));
	CK(fi_ep_bind(ep, &av->fid, 0));
	CK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CK(fi_enable(ep));
	/* [0, BUF): the peer's target; [BUF, 2 BUF): operands, results. */
	uint8_t *buf = aligned_alloc(4096, 2 * BUF);
	memset(buf, 0, 2 * BUF);
	CK(fi_mr_reg(dom, buf, 2 * BUF, FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL));
	void *desc = fi_mr_desc(mr);
	sh->namelen[me] = sizeof sh->name[me];
	CK(fi_getname(&ep->fid, sh->name[me], &sh->namelen[me]));
	sh->addr[me] = info->domain_attr->mr_mode & FI_MR_VIRT_ADDR ? (uint64_t)(uintptr_t)buf : 0;
	sh->key[me] = fi_mr_key(mr);
	__sync_synchronize();
	sh->ready[me] = 1;
	wait_flag(&sh->ready[!me]);
	fi_addr_t peer;
	if (fi_av_insert(av, sh->name[!me], 1, &peer, 0, NULL) != 1)
		DIE("fi_av_insert failed");
	uint64_t raddr = sh->addr[!me], rkey = sh->key[!me];

	uint64_t *one = (uint64_t *)(buf + BUF), *cmp = one + 1, *res = one + 2;
	*one = 1;
	uint8_t *src = buf + BUF + 64;
	memset(src, 0x5a, size);
	struct fi_context ctx;
	int o = !strcmp(opname, "sum") ? 0 : !strcmp(opname, "fsum") ? 1 : !strcmp(opname, "cswap") ? 2
		: !strcmp(opname, "write") ? 3 : !strcmp(opname, "read") ? 4 : -1;
	if (o < 0)
		DIE("unknown -o %s", opname);

	double t0 = bench_now();
	size_t posted = 0, done = 0;
	while (done < iters) {
		size_t batch = iters - posted < window ? iters - posted : window;
		for (size_t k = 0; k < batch; k++) {
			ssize_t r;
			for (;;) {
				switch (o) {
				case 0:
					r = fi_atomic(ep, one, 1, desc, peer, raddr, rkey, FI_UINT64, FI_SUM, &ctx);
					break;
				case 1:
					r = fi_fetch_atomic(ep, one, 1, desc, res, desc, peer, raddr, rkey, FI_UINT64,
							    FI_SUM, &ctx);
					break;
				case 2:
					*cmp = *res;
					r = fi_compare_atomic(ep, one, 1, desc, cmp, desc, res, desc, peer, raddr, rkey,
							      FI_UINT64, FI_CSWAP, &ctx);
					break;
				case 3:
					r = fi_write(ep, src, size, desc, peer, raddr + 8, rkey, &ctx);
					break;
				default:
					r = fi_read(ep, src, size, desc, peer, raddr + 8, rkey, &ctx);
					break;
				}
				if (r != -FI_EAGAIN)
					break;
				done += pump(cq);
			}
			if (r)
				DIE("post: %zd (%s)", r, fi_strerror((int)-r));
			posted++;
		}
		while (done < posted)
			done += pump(cq);
	}
	double t = bench_now() - t0;
	sh->done[me] = 1;
	while (!sh->done[!me])
		pump(cq);
	/* The other side may still wait for answers this side's progress
	 * gives: a little more progress before closing. */
	double end = bench_now() + 0.2;
	while (bench_now() < end)
		pump(cq);
	uint64_t word = *(volatile uint64_t *)buf;
	if (o == 0 && word != iters)
		DIE("side %d: the target word is %" PRIu64 ", not %zu", me, word, iters);
	printf("%s %zu w%zu %.0f %.2f\n", opname, o >= 3 ? size : 8, window, iters / t, t * 1e6 / iters);
	fflush(stdout);
	fi_close(&ep->fid);
	fi_close(&mr->fid);
	fi_close(&cq->fid);
	fi_close(&av->fid);
	fi_close(&dom->fid);
	fi_close(&fab->fid);
	fi_freeinfo(info);
}

int main(int argc, char **argv)
{
	int c;
	while ((c = getopt(argc, argv, "p:o:s:i:w:D")) != -1) {
		switch (c) {
		case 'p': prov = optarg; break;
		case 'o': opname = optarg; break;
		case 's': size = strtoul(optarg, NULL, 0); break;
		case 'i': iters = strtoul(optarg, NULL, 0); break;
		case 'w': window = strtoul(optarg, NULL, 0); break;
		case 'D': delivery = 1; break;
		default: DIE("usage: rf_rma [-p prov] [-o sum|fsum|cswap|write|read] [-s bytes] [-i iters] [-w window] [-D]");
		}
	}
	if (window == 0)
		window = 1;
	if (size + 64 > BUF)
		BUF = (size + 64 + 4095) & ~(size_t)4095;
	struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		DIE("mmap failed");
	memset(sh, 0, sizeof *sh);
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		DIE("fork failed");
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		run(1, sh);
		_exit(0);
	}
	run(0, sh);
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
