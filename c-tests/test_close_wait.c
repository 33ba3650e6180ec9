/* Closing a waitable object while another thread waits on it, over one
 * rustfab transport (RF_TRANSPORT=shm|tcp|auto, default shm): a thread
 * blocked in fi_cq_sread, fi_cq_sreadfrom, fi_cntr_wait, fi_eq_sread or
 * fi_wait (5 s timeout) while another thread calls fi_close on the object.
 * fi_close returns 0, and the waiter returns -FI_ECANCELED well before its
 * timeout (fi_rustfab(7), "Closing under a waiter"); nothing crashes. Every
 * wait object kind the call takes, at FI_THREAD_SAFE and at FI_THREAD_DOMAIN
 * (where the application promised not to do this, defended all the same).
 * Then several waiters on one CQ, and plain calls (fi_cq_read, fi_cntr_read,
 * fi_poll) racing with the close of their object at FI_THREAD_SAFE: each
 * returns what the object had or -FI_EINVAL once it is gone. */
#include "rdm_common.h"

#include <pthread.h>

static struct fi_info *info;
static struct fid_fabric *fab;
static struct fid_domain *dom;

static int open_domain(enum fi_threading threading)
{
	struct fi_info *hints = fi_allocinfo();
	int ret;
	if (!hints)
		return -FI_ENOMEM;
	hints->fabric_attr->prov_name = strdup("rustfab");
	hints->domain_attr->name = strdup(rf_transport());
	hints->domain_attr->threading = threading;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	if (ret)
		return ret;
	if ((ret = fi_fabric(info->fabric_attr, &fab, NULL)))
		return ret;
	return fi_domain(fab, info, &dom, NULL);
}

static void close_domain(void)
{
	if (dom)
		fi_close(&dom->fid);
	if (fab)
		fi_close(&fab->fid);
	if (info)
		fi_freeinfo(info);
	dom = NULL;
	fab = NULL;
	info = NULL;
}

enum call { CQ_SREAD, CQ_SREADFROM, CNTR_WAIT, EQ_SREAD, WAIT_SET_WAIT };

static const char *call_name[] = {"fi_cq_sread", "fi_cq_sreadfrom", "fi_cntr_wait", "fi_eq_sread", "fi_wait"};

struct waiter {
	enum call call;
	void *obj;
	int entering;
	long long ret;
	double returned; /* now_sec() when the call returned */
};

static void *wait_in_call(void *p)
{
	struct waiter *w = p;
	int timeout = (int)(5000 * rf_time_scale());
	struct fi_cq_entry ce;
	fi_addr_t src;
	struct fi_eq_entry ee;
	uint32_t ev;
	__atomic_store_n(&w->entering, 1, __ATOMIC_SEQ_CST);
	switch (w->call) {
	case CQ_SREAD:
		w->ret = fi_cq_sread(w->obj, &ce, 1, NULL, timeout);
		break;
	case CQ_SREADFROM:
		w->ret = fi_cq_sreadfrom(w->obj, &ce, 1, &src, NULL, timeout);
		break;
	case CNTR_WAIT:
		w->ret = fi_cntr_wait(w->obj, 1, timeout);
		break;
	case EQ_SREAD:
		w->ret = fi_eq_sread(w->obj, &ev, &ee, sizeof(ee), timeout, 0);
		break;
	case WAIT_SET_WAIT:
		w->ret = fi_wait(w->obj, timeout);
		break;
	}
	w->returned = now_sec();
	return NULL;
}

/* Starts `n` waiters in `call` on `obj`, lets them fall asleep, closes
 * `fid` and checks the outcome; NULL if all is well, else what went wrong. */
static const char *close_under(enum call call, void *obj, struct fid *fid, int n)
{
	static char why[256];
	struct waiter w[4];
	pthread_t t[4];
	double closed_at, bound = 2 * rf_time_scale();
	int ret, i;
	if (n > 4)
		n = 4;
	for (i = 0; i < n; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].call = call;
		w[i].obj = obj;
		if (pthread_create(&t[i], NULL, wait_in_call, &w[i]))
			return "pthread_create failed";
	}
	for (i = 0; i < n; i++)
		while (!__atomic_load_n(&w[i].entering, __ATOMIC_SEQ_CST))
			usleep(1000);
	/* Long enough for every waiter to be asleep inside its call. */
	usleep((useconds_t)(100 * 1000 * rf_time_scale()));
	closed_at = now_sec();
	ret = fi_close(fid);
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	if (ret) {
		snprintf(why, sizeof(why), "fi_close returned %d (%s)", ret, fi_strerror(-ret));
		return why;
	}
	for (i = 0; i < n; i++) {
		if (w[i].ret != -FI_ECANCELED) {
			snprintf(why, sizeof(why), "waiter %d: %s returned %lld (%s), not -FI_ECANCELED", i,
				 call_name[call], w[i].ret, fi_strerror((int)-w[i].ret));
			return why;
		}
		if (w[i].returned < closed_at || w[i].returned - closed_at > bound) {
			snprintf(why, sizeof(why), "waiter %d: %s returned %.3f s after the close began (bound %.1f s)",
				 i, call_name[call], w[i].returned - closed_at, bound);
			return why;
		}
	}
	return NULL;
}

static const enum fi_threading levels[] = {FI_THREAD_SAFE, FI_THREAD_DOMAIN};
#define NLEVELS (sizeof(levels) / sizeof(levels[0]))

static const enum fi_wait_obj kinds[] = {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

static void cq_case(enum call call)
{
	for (size_t l = 0; l < NLEVELS; l++) {
		CHECK_OK(open_domain(levels[l]));
		for (size_t k = 0; k < NKINDS; k++) {
			struct fi_cq_attr attr = {0};
			struct fid_cq *cq;
			const char *why;
			attr.format = FI_CQ_FORMAT_CONTEXT;
			attr.wait_obj = kinds[k];
			CHECK_OK(fi_cq_open(dom, &attr, &cq, NULL));
			why = close_under(call, cq, &cq->fid, 1);
			if (why)
				FAIL_AT("threading %d, wait kind %d: %s", levels[l], kinds[k], why);
		}
		close_domain();
	}
}

TEST(close_cq_under_sread)
{
	cq_case(CQ_SREAD);
}

TEST(close_cq_under_sreadfrom)
{
	cq_case(CQ_SREADFROM);
}

/* Counters wait on every kind, FI_WAIT_NONE and a wait set's member too. */
TEST(close_cntr_under_wait)
{
	static const enum fi_wait_obj ckinds[] = {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND,
						  FI_WAIT_YIELD, FI_WAIT_NONE, FI_WAIT_SET};
	for (size_t l = 0; l < NLEVELS; l++) {
		CHECK_OK(open_domain(levels[l]));
		for (size_t k = 0; k < sizeof(ckinds) / sizeof(ckinds[0]); k++) {
			struct fi_cntr_attr attr = {0};
			struct fi_wait_attr wattr = {0};
			struct fid_wait *set = NULL;
			struct fid_cntr *c;
			const char *why;
			attr.events = FI_CNTR_EVENTS_COMP;
			attr.wait_obj = ckinds[k];
			if (ckinds[k] == FI_WAIT_SET) {
				wattr.wait_obj = FI_WAIT_FD;
				CHECK_OK(fi_wait_open(fab, &wattr, &set));
				attr.wait_set = set;
			}
			CHECK_OK(fi_cntr_open(dom, &attr, &c, NULL));
			why = close_under(CNTR_WAIT, c, &c->fid, 1);
			if (set)
				CHECK_OK(fi_close(&set->fid));
			if (why)
				FAIL_AT("threading %d, wait kind %d: %s", levels[l], ckinds[k], why);
		}
		close_domain();
	}
}

TEST(close_eq_under_sread)
{
	CHECK_OK(open_domain(FI_THREAD_SAFE));
	for (size_t k = 0; k < NKINDS; k++) {
		struct fi_eq_attr attr = {0};
		struct fid_eq *eq;
		const char *why;
		attr.wait_obj = kinds[k];
		CHECK_OK(fi_eq_open(fab, &attr, &eq, NULL));
		why = close_under(EQ_SREAD, eq, &eq->fid, 1);
		if (why)
			FAIL_AT("wait kind %d: %s", kinds[k], why);
	}
	close_domain();
}

/* A wait set can be closed only without members (-FI_EBUSY otherwise,
 * fi_poll(3)); one closed under fi_wait wakes its waiter. */
TEST(close_wait_set_under_wait)
{
	CHECK_OK(open_domain(FI_THREAD_SAFE));
	for (size_t k = 0; k < NKINDS; k++) {
		struct fi_wait_attr attr = {0};
		struct fid_wait *set;
		const char *why;
		attr.wait_obj = kinds[k];
		CHECK_OK(fi_wait_open(fab, &attr, &set));
		why = close_under(WAIT_SET_WAIT, set, &set->fid, 1);
		if (why)
			FAIL_AT("wait kind %d: %s", kinds[k], why);
	}
	close_domain();
}

/* Every waiter inside wakes, not only one. Three application threads in
 * calls on one CQ at once: only FI_THREAD_SAFE allows it (at
 * FI_THREAD_DOMAIN the application serialises its calls on the domain, and
 * rustfab's serial mode refuses overlapping ones with -FI_EOTHER, so the
 * waiters' codes there say nothing about the close). */
TEST(close_cq_under_three_waiters)
{
	struct fi_cq_attr attr = {0};
	struct fid_cq *cq;
	const char *why;
	CHECK_OK(open_domain(FI_THREAD_SAFE));
	attr.format = FI_CQ_FORMAT_CONTEXT;
	attr.wait_obj = FI_WAIT_FD;
	CHECK_OK(fi_cq_open(dom, &attr, &cq, NULL));
	why = close_under(CQ_SREAD, cq, &cq->fid, 3);
	if (why)
		FAIL_AT("%s", why);
	close_domain();
}

/* Plain calls racing with the close of their object (FI_THREAD_SAFE: any
 * thread may call at any time): each call returns what the object had
 * (-FI_EAGAIN, a count, 0 contexts) or, once the close took the handle,
 * -FI_EINVAL; nothing crashes and the close returns 0. */
enum plain { P_CQ_READ, P_CNTR_READ, P_POLL };

struct racer {
	enum plain what;
	void *obj;
	int started;
	long long bad; /* an unexpected return value, or 0 */
	long calls;
};

static void *race_calls(void *p)
{
	struct racer *r = p;
	struct fi_cq_entry ce;
	void *ctx[4];
	__atomic_store_n(&r->started, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		long long ret = 0;
		r->calls++;
		switch (r->what) {
		case P_CQ_READ:
			ret = fi_cq_read(r->obj, &ce, 1);
			if (ret == -FI_EAGAIN)
				continue;
			break;
		case P_CNTR_READ:
			/* fi_cntr_read has no error channel (0 for a closed
			 * counter); fi_cntr_add has one */
			(void)fi_cntr_read(r->obj);
			ret = fi_cntr_add(r->obj, 0);
			if (ret == 0)
				continue;
			break;
		case P_POLL:
			ret = fi_poll(r->obj, ctx, 4);
			if (ret == 0)
				continue;
			break;
		}
		if (ret != -FI_EINVAL)
			r->bad = ret ? ret : -1;
		return NULL;
	}
}

TEST(plain_calls_race_with_close)
{
	int rounds = 20;
	CHECK_OK(open_domain(FI_THREAD_SAFE));
	for (int i = 0; i < rounds * 3; i++) {
		struct racer r[2];
		pthread_t t[2];
		struct fi_cq_attr cattr = {0};
		struct fi_cntr_attr nattr = {0};
		struct fi_poll_attr pattr = {0};
		struct fid_cq *cq = NULL;
		struct fid_cntr *c = NULL;
		struct fid_poll *ps = NULL;
		struct fid *fid;
		void *obj;
		enum plain what = (enum plain)(i % 3);
		cattr.format = FI_CQ_FORMAT_CONTEXT;
		switch (what) {
		case P_CQ_READ:
			CHECK_OK(fi_cq_open(dom, &cattr, &cq, NULL));
			obj = cq;
			fid = &cq->fid;
			break;
		case P_CNTR_READ:
			CHECK_OK(fi_cntr_open(dom, &nattr, &c, NULL));
			obj = c;
			fid = &c->fid;
			break;
		default:
			CHECK_OK(fi_cq_open(dom, &cattr, &cq, NULL));
			CHECK_OK(fi_poll_open(dom, &pattr, &ps));
			CHECK_OK(fi_poll_add(ps, &cq->fid, 0));
			obj = ps;
			fid = &ps->fid;
			break;
		}
		for (int j = 0; j < 2; j++) {
			memset(&r[j], 0, sizeof(r[j]));
			r[j].what = what;
			r[j].obj = obj;
			CHECK_OK(pthread_create(&t[j], NULL, race_calls, &r[j]));
		}
		for (int j = 0; j < 2; j++)
			while (!__atomic_load_n(&r[j].started, __ATOMIC_SEQ_CST))
				usleep(100);
		usleep(1000 * (i % 5));
		CHECK_OK(fi_close(fid));
		for (int j = 0; j < 2; j++)
			pthread_join(t[j], NULL);
		if (ps)
			CHECK_OK(fi_close(&cq->fid));
		for (int j = 0; j < 2; j++)
			if (r[j].bad)
				FAIL_AT("round %d (%d): a call returned %lld", i, what, r[j].bad);
	}
	close_domain();
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	RUN(close_cq_under_sread);
	RUN(close_cq_under_sreadfrom);
	RUN(close_cntr_under_wait);
	RUN(close_eq_under_sread);
	RUN(close_wait_set_under_wait);
	RUN(close_cq_under_three_waiters);
	RUN(plain_calls_race_with_close);
	return harness_done();
}
