/*
 * Shared setup for RDM data-path tests: an "end" is a fabric+domain+AV+CQ+EP
 * over one rustfab transport (RF_TRANSPORT=shm|tcp, default shm). Two ends in
 * one process talk through the real transport; progress is driven by reading
 * the CQs, as an application would.
 */
#ifndef RUSTFAB_RDM_COMMON_H
#define RUSTFAB_RDM_COMMON_H

#include "harness.h"
#include <errno.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct end {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_cntr *tx_cntr, *rx_cntr;
	struct fid_ep *ep;
	char addr[128];
	size_t addrlen;
	fi_addr_t peer; /* the other end, as inserted into this end's AV */
	fi_addr_t self;
	/* Completions read while only progressing (TAGGED format), in order. */
	struct fi_cq_tagged_entry stash[512];
	fi_addr_t stash_src[512];
	int nstash;
};

struct end_opts {
	uint64_t caps;           /* 0: FI_MSG|FI_TAGGED */
	enum fi_cq_format format; /* 0: TAGGED */
	int selective;
	uint64_t tx_op_flags;
	uint64_t rx_op_flags;
	enum fi_av_type av_type;
	int cntrs;
	size_t cq_size;
	enum fi_wait_obj wait_obj;
	int auto_progress; /* FI_PROGRESS_AUTO for data and control */
	uint64_t mode;       /* hints->mode (e.g. FI_BUFFERED_RECV) */
	size_t rx_size, tx_size; /* hints' queue sizes (0: provider default) */
	size_t max_msg_size; /* set in the info before fi_endpoint (0: as returned) */
	/* Called after the endpoint is bound, before fi_enable (fi_setopt). */
	int (*before_enable)(struct end *e, const void *arg);
	const void *arg;
	const char *auth_key; /* hints->domain_attr->auth_key (its bytes), or NULL */
	int mr_mode; /* set in the info before fi_domain (0: as returned) */
	enum fi_threading threading; /* hints->domain_attr->threading (0: unspecified) */
	enum fi_ep_type ep_type; /* 0: FI_EP_RDM */
};

static inline const char *rf_transport(void)
{
	const char *t = getenv("RF_TRANSPORT");
	return t && *t ? t : "shm";
}

/*
 * How much longer than usual a test may wait before it calls a wait a hang
 * (RF_TIMEOUT_SCALE, default 1): make memcheck runs the programs under
 * valgrind, 20-50 times slower. Only deadlines stretch; nothing asserts a
 * duration.
 */
static inline double rf_time_scale(void)
{
	const char *s = getenv("RF_TIMEOUT_SCALE");
	double v = s && *s ? atof(s) : 1;
	return v >= 1 ? v : 1;
}

static inline double now_sec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline int end_open(struct end *e, const struct end_opts *o)
{
	struct fi_info *hints = fi_allocinfo();
	int ret;
	memset(e, 0, sizeof(*e));
	if (!hints)
		return -FI_ENOMEM;
	hints->fabric_attr->prov_name = strdup("rustfab");
	hints->domain_attr->name = strdup(rf_transport());
	hints->ep_attr->type = o->ep_type ? o->ep_type : FI_EP_RDM;
	hints->caps = o->caps ? o->caps : (FI_MSG | FI_TAGGED);
	hints->mode = o->mode;
	hints->rx_attr->size = o->rx_size;
	hints->tx_attr->size = o->tx_size;
	hints->tx_attr->op_flags = o->tx_op_flags;
	hints->rx_attr->op_flags = o->rx_op_flags;
	hints->domain_attr->av_type = o->av_type ? o->av_type : FI_AV_MAP;
	hints->domain_attr->threading = o->threading;
	if (o->auth_key) {
		hints->domain_attr->auth_key = (uint8_t *)strdup(o->auth_key);
		hints->domain_attr->auth_key_size = strlen(o->auth_key);
	}
	if (o->auto_progress) {
		hints->domain_attr->data_progress = FI_PROGRESS_AUTO;
		hints->domain_attr->control_progress = FI_PROGRESS_AUTO;
	}
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &e->info);
	fi_freeinfo(hints);
	if (ret)
		return ret;
	if ((ret = fi_fabric(e->info->fabric_attr, &e->fabric, NULL)))
		return ret;
	if (o->mr_mode)
		e->info->domain_attr->mr_mode = o->mr_mode;
	if ((ret = fi_domain(e->fabric, e->info, &e->domain, NULL)))
		return ret;
	if (o->max_msg_size)
		e->info->ep_attr->max_msg_size = o->max_msg_size;
	struct fi_av_attr av_attr = {0};
	av_attr.type = e->info->domain_attr->av_type;
	if ((ret = fi_av_open(e->domain, &av_attr, &e->av, NULL)))
		return ret;
	struct fi_cq_attr cq_attr = {0};
	cq_attr.format = o->format ? o->format : FI_CQ_FORMAT_TAGGED;
	cq_attr.size = o->cq_size;
	cq_attr.wait_obj = o->wait_obj;
	if ((ret = fi_cq_open(e->domain, &cq_attr, &e->cq, NULL)))
		return ret;
	if ((ret = fi_endpoint(e->domain, e->info, &e->ep, NULL)))
		return ret;
	if ((ret = fi_ep_bind(e->ep, &e->av->fid, 0)))
		return ret;
	if ((ret = fi_ep_bind(e->ep, &e->cq->fid,
			      FI_TRANSMIT | FI_RECV | (o->selective ? FI_SELECTIVE_COMPLETION : 0))))
		return ret;
	if (o->cntrs) {
		struct fi_cntr_attr ca = {0};
		ca.events = FI_CNTR_EVENTS_COMP;
		if ((ret = fi_cntr_open(e->domain, &ca, &e->tx_cntr, NULL)))
			return ret;
		if ((ret = fi_cntr_open(e->domain, &ca, &e->rx_cntr, NULL)))
			return ret;
		if ((ret = fi_ep_bind(e->ep, &e->tx_cntr->fid, FI_SEND)))
			return ret;
		if ((ret = fi_ep_bind(e->ep, &e->rx_cntr->fid, FI_RECV)))
			return ret;
	}
	if (o->before_enable && (ret = o->before_enable(e, o->arg)))
		return ret;
	if ((ret = fi_enable(e->ep)))
		return ret;
	e->addrlen = sizeof(e->addr);
	if ((ret = fi_getname(&e->ep->fid, e->addr, &e->addrlen)))
		return ret;
	if (fi_av_insert(e->av, e->addr, 1, &e->self, 0, NULL) != 1)
		return -FI_EINVAL;
	return 0;
}

static inline void end_close(struct end *e)
{
	if (e->ep)
		fi_close(&e->ep->fid);
	if (e->tx_cntr)
		fi_close(&e->tx_cntr->fid);
	if (e->rx_cntr)
		fi_close(&e->rx_cntr->fid);
	if (e->cq)
		fi_close(&e->cq->fid);
	if (e->av)
		fi_close(&e->av->fid);
	if (e->domain)
		fi_close(&e->domain->fid);
	if (e->fabric)
		fi_close(&e->fabric->fid);
	if (e->info)
		fi_freeinfo(e->info);
	memset(e, 0, sizeof(*e));
}

/* Make each end know the other. */
static inline int ends_connect(struct end *a, struct end *b)
{
	if (fi_av_insert(a->av, b->addr, 1, &a->peer, 0, NULL) != 1)
		return -FI_EINVAL;
	if (fi_av_insert(b->av, a->addr, 1, &b->peer, 0, NULL) != 1)
		return -FI_EINVAL;
	return 0;
}

/* Progress one end: completions that arrive meanwhile are kept, in order. */
static inline void poke1(struct end *e)
{
	if (!e || !e->cq)
		return;
	int room = (int)(sizeof(e->stash) / sizeof(e->stash[0])) - e->nstash;
	if (room <= 0)
		return;
	ssize_t r = fi_cq_readfrom(e->cq, &e->stash[e->nstash], (size_t)room, &e->stash_src[e->nstash]);
	if (r > 0)
		e->nstash += (int)r;
}

/* Progress both ends so queued transfers move. */
static inline void poke(struct end *a, struct end *b)
{
	poke1(a);
	poke1(b);
}

/*
 * Reads one completion from `e` (driving `other` too so that data keeps
 * moving). Returns 1 on success, -FI_EAVAIL after storing the error entry in
 * *err, 0 on timeout.
 */
static inline int wait_comp(struct end *e, struct end *other, struct fi_cq_tagged_entry *out,
		     struct fi_cq_err_entry *err, fi_addr_t *src, double timeout)
{
	double deadline = now_sec() + timeout * rf_time_scale();
	if (e->nstash > 0) {
		*out = e->stash[0];
		if (src)
			*src = e->stash_src[0];
		memmove(&e->stash[0], &e->stash[1], (size_t)(e->nstash - 1) * sizeof(e->stash[0]));
		memmove(&e->stash_src[0], &e->stash_src[1], (size_t)(e->nstash - 1) * sizeof(e->stash_src[0]));
		e->nstash--;
		return 1;
	}
	while (now_sec() < deadline) {
		fi_addr_t tmp_src;
		ssize_t r = fi_cq_readfrom(e->cq, out, 1, src ? src : &tmp_src);
		if (r == 1)
			return 1;
		if (r == -FI_EAVAIL) {
			struct fi_cq_err_entry tmp;
			memset(&tmp, 0, sizeof(tmp));
			if (!err)
				err = &tmp;
			if (fi_cq_readerr(e->cq, err, 0) == 1)
				return -FI_EAVAIL;
			return -FI_EOTHER;
		}
		if (r != -FI_EAGAIN)
			return (int)r;
		poke1(other);
	}
	return 0;
}

/* Retries a post while it returns -FI_EAGAIN, progressing both ends. */
#define POST(expr, a, b)                                       \
	({                                                     \
		ssize_t _r;                                    \
		double _d = now_sec() + 10 * rf_time_scale();  \
		while ((_r = (expr)) == -FI_EAGAIN && now_sec() < _d) \
			poke((a), (b));                        \
		_r;                                            \
	})

static inline void fill(void *buf, size_t len, unsigned seed)
{
	unsigned char *p = buf;
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(seed * 31 + i * 7 + (i >> 8));
}

static inline int check_fill(const void *buf, size_t len, unsigned seed)
{
	const unsigned char *p = buf;
	for (size_t i = 0; i < len; i++)
		if (p[i] != (unsigned char)(seed * 31 + i * 7 + (i >> 8)))
			return 0;
	return 1;
}

/*
 * Two ends for RMA and atomics (test_rma.c, test_atomic.c): rma_pair_open
 * opens an initiator `a` and a target `b` with `caps`, `mr_mode` set in
 * the info before fi_domain (0: as returned) and, when `cntrs`, the
 * initiator's FI_WRITE/FI_READ counters (c_write, c_read) and the target's
 * FI_REMOTE_WRITE/FI_REMOTE_READ ones (c_rwrite, c_rread); end_close closes
 * them (after the endpoint, before the domain).
 */
#define RMA_COMP_TIMEOUT 20 /* seconds for one completion */

static struct fid_cntr *c_write __attribute__((unused)), *c_read __attribute__((unused)),
	*c_rwrite __attribute__((unused)), *c_rread __attribute__((unused));

/* The tx op_flags rma_pair_open asks (the endpoints' default completion
 * level): FI_DELIVERY_COMPLETE, so that a test may read the target's memory
 * as soon as the initiator's entry is read and get the target's refusals as
 * error completions. Without it a write or non-fetching atomic over shm
 * completes when it is in the target's ring (transmit complete, docs/rma.md):
 * the tests of the levels set it to 0 around their rma_pair_open. */
static uint64_t rma_tx_op_flags __attribute__((unused)) = FI_DELIVERY_COMPLETE;

/* before_enable hook: `arg` NULL binds the initiator's counters, else the target's. */
static inline int rma_bind_cntrs(struct end *e, const void *arg)
{
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fid_cntr **first = arg ? &c_rwrite : &c_write, **second = arg ? &c_rread : &c_read;
	int ret;
	if ((ret = fi_cntr_open(e->domain, &ca, first, NULL)) || (ret = fi_cntr_open(e->domain, &ca, second, NULL)) ||
	    (ret = fi_ep_bind(e->ep, &(*first)->fid, arg ? FI_REMOTE_WRITE : FI_WRITE)) ||
	    (ret = fi_ep_bind(e->ep, &(*second)->fid, arg ? FI_REMOTE_READ : FI_READ)))
		return ret;
	e->tx_cntr = *first;
	e->rx_cntr = *second;
	return 0;
}

static inline int rma_pair_open(struct end *a, struct end *b, uint64_t caps, int mr_mode, int cntrs)
{
	struct end_opts o = {0};
	int ret;
	o.caps = caps;
	o.mr_mode = mr_mode;
	o.tx_op_flags = rma_tx_op_flags;
	if (cntrs)
		o.before_enable = rma_bind_cntrs;
	if ((ret = end_open(a, &o)))
		return ret;
	o.arg = b; /* non-NULL: the target's counters */
	if ((ret = end_open(b, &o)))
		return ret;
	return ends_connect(a, b);
}

static inline void rma_pair_close(struct end *a, struct end *b)
{
	end_close(a);
	end_close(b);
	c_write = c_read = c_rwrite = c_rread = NULL;
}

/* A page-aligned buffer (its own mapping, so guard bytes are ours). */
static inline unsigned char *rma_region(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* Waits for one completion at `e`; 1 ok, -FI_EAVAIL error (in *err), 0 timeout. */
static inline int rma_comp(struct end *e, struct end *other, struct fi_cq_tagged_entry *c, struct fi_cq_err_entry *err)
{
	memset(c, 0, sizeof(*c));
	return wait_comp(e, other, c, err, NULL, RMA_COMP_TIMEOUT);
}

static inline int all_bytes(const unsigned char *p, size_t len, unsigned char v)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

#endif
