/* Wait sets and poll sets through the public API (fi_poll(3)): fi_wait_open
 * kinds and invalid attributes, fi_wait over two CQs and an EQ (wakes for the
 * EQ write, times out otherwise), the set's FD with fi_trywait, a member's
 * fi_cq_signal, -FI_EBUSY while members exist, fi_trywait argument rules,
 * and poll sets reporting the right member. */
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

static struct fid_fabric *fab;
static struct fid_domain *dom;

static int open_domain(struct fid_fabric **f, struct fid_domain **d)
{
	struct fi_info *info = fi_allocinfo();
	int ret;
	if (!info)
		return -FI_ENOMEM;
	info->fabric_attr->name = strdup("rustfab");
	info->fabric_attr->prov_name = strdup("rustfab");
	info->fabric_attr->api_version = FI_VERSION(1, 17);
	info->domain_attr->name = strdup("shm");
	ret = fi_fabric(info->fabric_attr, f, NULL);
	if (!ret)
		ret = fi_domain(*f, info, d, NULL);
	fi_freeinfo(info);
	return ret;
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static int open_set(struct fid_wait **w, enum fi_wait_obj kind)
{
	struct fi_wait_attr attr = {0};
	attr.wait_obj = kind;
	return fi_wait_open(fab, &attr, w);
}

static int open_cq_in(struct fid_cq **cq, struct fid_wait *set, void *ctx)
{
	struct fi_cq_attr attr = {0};
	attr.format = FI_CQ_FORMAT_CONTEXT;
	attr.wait_obj = set ? FI_WAIT_SET : FI_WAIT_NONE;
	attr.wait_set = set;
	return fi_cq_open(dom, &attr, cq, ctx);
}

static int open_eq_in(struct fid_eq **eq, struct fid_wait *set)
{
	struct fi_eq_attr attr = {0};
	attr.flags = FI_WRITE;
	attr.wait_obj = FI_WAIT_SET;
	attr.wait_set = set;
	return fi_eq_open(fab, &attr, eq, NULL);
}

static int open_cntr_in(struct fid_cntr **c, struct fid_wait *set, void *ctx)
{
	struct fi_cntr_attr attr = {0};
	attr.wait_obj = set ? FI_WAIT_SET : FI_WAIT_NONE;
	attr.wait_set = set;
	return fi_cntr_open(dom, &attr, c, ctx);
}

static ssize_t write_notify(struct fid_eq *eq)
{
	struct fi_eq_entry e = {0};
	e.context = eq;
	return fi_eq_write(eq, FI_NOTIFY, &e, sizeof(e), 0);
}

TEST(wait_open_kinds_and_invalid_attributes)
{
	static const enum fi_wait_obj ok[] = {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD,
					      FI_WAIT_POLLFD};
	static const enum fi_wait_obj bad[] = {FI_WAIT_NONE, FI_WAIT_SET, 99};
	struct fi_wait_attr attr = {0};
	struct fid_wait *w = NULL;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		enum fi_wait_obj kind = 99;
		CHECK_OK(open_set(&w, ok[i]));
		CHECK_EQ(w->fid.fclass, FI_CLASS_WAIT);
		CHECK_OK(fi_control(&w->fid, FI_GETWAITOBJ, &kind));
		/* UNSPEC sets are FD sets */
		CHECK_EQ(kind, ok[i] == FI_WAIT_UNSPEC ? FI_WAIT_FD : ok[i]);
		CHECK_OK(fi_close(&w->fid));
	}
	w = NULL;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_EQ(open_set(&w, bad[i]), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_FD;
	attr.flags = 1; /* "reserved and must be set to 0" */
	CHECK_EQ(fi_wait_open(fab, &attr, &w), -FI_EINVAL);
	CHECK_EQ(fi_wait_open(fab, NULL, &w), -FI_EINVAL);
	CHECK(w == NULL);
}

struct writer {
	struct fid_eq *eq;
	int delay_ms;
};

static void *write_later(void *p)
{
	struct writer *w = p;
	usleep(w->delay_ms * 1000);
	write_notify(w->eq);
	return NULL;
}

/* A wait set with two CQs and one EQ: times out while nothing happens,
 * wakes for the EQ write; the set stays busy while members exist. */
TEST(wait_set_two_cqs_and_an_eq)
{
	static const enum fi_wait_obj kinds[] = {FI_WAIT_FD, FI_WAIT_UNSPEC, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD};
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		struct fid_wait *set;
		struct fid_cq *cq1, *cq2;
		struct writer wr = {0};
		struct fi_eq_entry e;
		struct fi_cq_entry ce;
		uint32_t ev;
		pthread_t t;
		long long t0, el;
		CHECK_OK(open_set(&set, kinds[k]));
		CHECK_OK(open_cq_in(&cq1, set, NULL));
		CHECK_OK(open_cq_in(&cq2, set, NULL));
		CHECK_OK(open_eq_in(&wr.eq, set));
		t0 = now_ms();
		CHECK_EQ(fi_wait(set, 100), -FI_ETIMEDOUT);
		el = now_ms() - t0;
		if (el < 100 || el > 3000)
			FAIL_AT("kind %d: fi_wait took %lld ms for 100", kinds[k], el);
		wr.delay_ms = 50;
		CHECK_OK(pthread_create(&t, NULL, write_later, &wr));
		t0 = now_ms();
		CHECK_OK(fi_wait(set, 10000));
		el = now_ms() - t0;
		pthread_join(t, NULL);
		CHECK(el >= 40 && el < 5000);
		CHECK_EQ(fi_eq_read(wr.eq, &ev, &e, sizeof(e), 0), sizeof(e));
		/* members of a set cannot block by themselves */
		CHECK_EQ(fi_cq_sread(cq1, &ce, 1, NULL, 0), -FI_ENOSYS);
		CHECK_EQ(fi_eq_sread(wr.eq, &ev, &e, sizeof(e), 0, 0), -FI_ENOSYS);
		/* fi_poll(3): "The wait set must not be bound to any other opened
		 * resources prior to being closed" */
		CHECK_EQ(fi_close(&set->fid), -FI_EBUSY);
		CHECK_OK(fi_close(&cq1->fid));
		CHECK_OK(fi_close(&cq2->fid));
		CHECK_EQ(fi_close(&set->fid), -FI_EBUSY);
		CHECK_OK(fi_close(&wr.eq->fid));
		CHECK_OK(fi_close(&set->fid));
	}
}

/* The set's FD: fi_trywait on the set, quiet poll, readable after a
 * member's event; a member's FI_GETWAIT returns the set's fd. */
TEST(wait_set_fd_and_trywait)
{
	struct fid_wait *set;
	struct fid_cq *cq;
	struct fid_eq *eq;
	struct fid *fids[1];
	struct pollfd pfd;
	struct fi_eq_entry e;
	uint32_t ev;
	int fd = -1, cqfd = -1;
	CHECK_OK(open_set(&set, FI_WAIT_FD));
	CHECK_OK(open_cq_in(&cq, set, NULL));
	CHECK_OK(open_eq_in(&eq, set));
	CHECK_OK(fi_control(&set->fid, FI_GETWAIT, &fd));
	CHECK_OK(fi_control(&cq->fid, FI_GETWAIT, &cqfd));
	CHECK_EQ(cqfd, fd);
	fids[0] = &set->fid;
	CHECK_OK(fi_trywait(fab, fids, 1));
	pfd.fd = fd;
	pfd.events = POLLIN;
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	CHECK_EQ(write_notify(eq), sizeof(e));
	CHECK_EQ(poll(&pfd, 1, 1000), 1);
	CHECK_EQ(fi_trywait(fab, fids, 1), -FI_EAGAIN);
	/* a member defers to its set */
	fids[0] = &eq->fid;
	CHECK_EQ(fi_trywait(fab, fids, 1), -FI_EAGAIN);
	CHECK_EQ(fi_eq_read(eq, &ev, &e, sizeof(e), 0), sizeof(e));
	CHECK_OK(fi_trywait(fab, fids, 1));
	CHECK_OK(fi_close(&cq->fid));
	CHECK_OK(fi_close(&eq->fid));
	CHECK_OK(fi_close(&set->fid));
}

static void *signal_later(void *p)
{
	usleep(50 * 1000);
	fi_cq_signal((struct fid_cq *)p);
	return NULL;
}

TEST(wait_set_woken_by_a_members_signal)
{
	struct fid_wait *set;
	struct fid_cq *cq;
	pthread_t t;
	long long t0;
	CHECK_OK(open_set(&set, FI_WAIT_FD));
	CHECK_OK(open_cq_in(&cq, set, NULL));
	CHECK_OK(pthread_create(&t, NULL, signal_later, cq));
	t0 = now_ms();
	CHECK_OK(fi_wait(set, 10000));
	CHECK(now_ms() - t0 < 5000);
	pthread_join(t, NULL);
	CHECK_OK(fi_close(&cq->fid));
	CHECK_OK(fi_close(&set->fid));
}

static void *add_later(void *p)
{
	usleep(50 * 1000);
	fi_cntr_add((struct fid_cntr *)p, 1);
	return NULL;
}

TEST(wait_set_with_a_counter)
{
	struct fid_wait *set;
	struct fid_cntr *c;
	pthread_t t;
	CHECK_OK(open_set(&set, FI_WAIT_MUTEX_COND));
	CHECK_OK(open_cntr_in(&c, set, NULL));
	CHECK_EQ(fi_wait(set, 20), -FI_ETIMEDOUT);
	/* fi_cntr_wait on a member polls (as on FI_WAIT_NONE counters, see
	 * test_cntr.c): a timeout, then the threshold another thread reaches. */
	CHECK_EQ(fi_cntr_wait(c, 1, 0), -FI_ETIMEDOUT);
	CHECK_OK(pthread_create(&t, NULL, add_later, c));
	CHECK_OK(fi_wait(set, 10000));
	pthread_join(t, NULL);
	CHECK_EQ(fi_cntr_read(c), 1);
	CHECK_OK(fi_cntr_wait(c, 1, 1000));
	CHECK_OK(pthread_create(&t, NULL, add_later, c));
	CHECK_OK(fi_cntr_wait(c, 2, 10000));
	pthread_join(t, NULL);
	CHECK_EQ(fi_cntr_read(c), 2);
	CHECK_EQ(fi_wait(set, 20), -FI_ETIMEDOUT);
	CHECK_OK(fi_close(&c->fid));
	CHECK_OK(fi_close(&set->fid));
}

/* A wait set belongs to its fabric. */
TEST(wait_set_of_another_fabric_is_refused)
{
	struct fid_fabric *f2;
	struct fid_domain *d2;
	struct fid_wait *set;
	struct fid_cq *cq = NULL;
	struct fi_cq_attr attr = {0};
	CHECK_OK(open_domain(&f2, &d2));
	CHECK_OK(open_set(&set, FI_WAIT_FD));
	attr.wait_obj = FI_WAIT_SET;
	attr.wait_set = set;
	CHECK_EQ(fi_cq_open(d2, &attr, &cq, NULL), -FI_EINVAL);
	CHECK_OK(fi_close(&set->fid));
	CHECK_OK(fi_close(&d2->fid));
	CHECK_OK(fi_close(&f2->fid));
}

TEST(trywait_argument_rules)
{
	struct fid_cq *cq;
	struct fid *fids[2];
	CHECK_OK(fi_trywait(fab, NULL, 0));
	CHECK_EQ(fi_trywait(fab, NULL, 1), -FI_EINVAL);
	fids[0] = &dom->fid;
	CHECK_EQ(fi_trywait(fab, fids, 1), -FI_EINVAL);
	fids[0] = NULL;
	CHECK_EQ(fi_trywait(fab, fids, 1), -FI_EINVAL);
	CHECK_OK(open_cq_in(&cq, NULL, NULL)); /* FI_WAIT_NONE */
	fids[0] = &cq->fid;
	CHECK_EQ(fi_trywait(fab, fids, 1), -FI_EINVAL);
	CHECK_OK(fi_close(&cq->fid));
}

TEST(wait_set_null_and_foreign_objects)
{
	struct fid_wait *set;
	struct fid_wait *bad = (struct fid_wait *)&fab->fid;
	int fd;
	CHECK_OK(open_set(&set, FI_WAIT_FD));
	CHECK_EQ(set->ops->wait(NULL, 0), -FI_EINVAL);
	CHECK_EQ(set->ops->wait(bad, 0), -FI_EINVAL);
	CHECK_EQ(set->fid.ops->close(NULL), -FI_EINVAL);
	CHECK_EQ(set->fid.ops->close(&bad->fid), -FI_EINVAL);
	CHECK_EQ(set->fid.ops->control(&bad->fid, FI_GETWAIT, &fd), -FI_EINVAL);
	CHECK_EQ(fi_control(&set->fid, FI_GETWAIT, NULL), -FI_EINVAL);
	CHECK_EQ(fi_control(&set->fid, FI_ENABLE, NULL), -FI_ENOSYS);
	CHECK_OK(fi_close(&set->fid));
}

/* fi_poll reports the member with events: a CQ while not empty (errors
 * included), a counter once per change. */
TEST(poll_set_reports_the_right_member)
{
	struct fid_poll *ps;
	struct fi_poll_attr attr = {0};
	struct fid_cq *cq;
	struct fid_cntr *c1, *c2;
	struct fid_eq *eq;
	struct fi_eq_attr eq_attr = {0};
	void *ctx[4];
	int cq_ctx, c1_ctx, c2_ctx;
	CHECK_OK(fi_poll_open(dom, &attr, &ps));
	CHECK_EQ(ps->fid.fclass, FI_CLASS_POLL);
	CHECK_OK(open_cq_in(&cq, NULL, &cq_ctx));
	CHECK_OK(open_cntr_in(&c1, NULL, &c1_ctx));
	CHECK_OK(open_cntr_in(&c2, NULL, &c2_ctx));
	CHECK_OK(fi_eq_open(fab, &eq_attr, &eq, NULL));
	CHECK_OK(fi_poll_add(ps, &cq->fid, 0));
	CHECK_OK(fi_poll_add(ps, &c1->fid, 0));
	CHECK_OK(fi_poll_add(ps, &c2->fid, 0));
	/* "Associates a completion queue or counter with a poll set." */
	CHECK_EQ(fi_poll_add(ps, &eq->fid, 0), -FI_EINVAL);
	CHECK_EQ(fi_poll_add(ps, NULL, 0), -FI_EINVAL);
	CHECK_EQ(fi_poll(ps, ctx, 4), 0);
	CHECK_OK(fi_cntr_add(c2, 3));
	CHECK_EQ(fi_poll(ps, ctx, 4), 1);
	CHECK(ctx[0] == &c2_ctx);
	CHECK_EQ(fi_poll(ps, ctx, 4), 0);
	CHECK_OK(fi_cntr_adderr(c1, 1));
	CHECK_OK(fi_cntr_add(c2, 1));
	CHECK_EQ(fi_poll(ps, ctx, 1), 1);
	CHECK(ctx[0] == &c1_ctx);
	CHECK_EQ(fi_poll(ps, ctx, 4), 1);
	CHECK(ctx[0] == &c2_ctx);
	CHECK_EQ(fi_poll(ps, NULL, 4), -FI_EINVAL);
	CHECK_EQ(fi_poll(ps, ctx, 0), -FI_EINVAL);
	CHECK_OK(fi_poll_del(ps, &c2->fid, 0));
	CHECK_EQ(fi_poll_del(ps, &c2->fid, 0), -FI_EINVAL);
	CHECK_OK(fi_cntr_add(c2, 1));
	CHECK_EQ(fi_poll(ps, ctx, 4), 0);
	/* the poll set holds its domain */
	CHECK_EQ(fi_close(&dom->fid), -FI_EBUSY);
	/* a member may be closed while in the set; it simply goes away */
	CHECK_OK(fi_close(&c1->fid));
	CHECK_EQ(fi_poll(ps, ctx, 4), 0);
	CHECK_OK(fi_close(&ps->fid));
	CHECK_OK(fi_close(&cq->fid));
	CHECK_OK(fi_close(&c2->fid));
	CHECK_OK(fi_close(&eq->fid));
}

TEST(poll_set_invalid_arguments)
{
	struct fid_poll *ps = NULL;
	struct fi_poll_attr attr = {0};
	void *ctx[1];
	attr.flags = 1; /* "reserved and must be set to 0" */
	CHECK_EQ(fi_poll_open(dom, &attr, &ps), -FI_EINVAL);
	CHECK_EQ(fi_poll_open(dom, NULL, &ps), -FI_EINVAL);
	CHECK(ps == NULL);
	attr.flags = 0;
	CHECK_OK(fi_poll_open(dom, &attr, &ps));
	CHECK_EQ(ps->ops->poll(NULL, ctx, 1), -FI_EINVAL);
	CHECK_EQ(ps->ops->poll((struct fid_poll *)&dom->fid, ctx, 1), -FI_EINVAL);
	CHECK_EQ(ps->ops->poll_add(NULL, &dom->fid, 0), -FI_EINVAL);
	CHECK_EQ(ps->ops->poll_del(NULL, &dom->fid, 0), -FI_EINVAL);
	CHECK_EQ(fi_poll_add(ps, &dom->fid, 0), -FI_EINVAL);
	CHECK_EQ(ps->fid.ops->close(NULL), -FI_EINVAL);
	CHECK(ps->fid.ops->control(&ps->fid, FI_GETWAIT, ctx) < 0);
	CHECK_OK(fi_close(&ps->fid));
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	if (open_domain(&fab, &dom)) {
		printf("cannot open a rustfab domain\n");
		return 1;
	}
	RUN(wait_open_kinds_and_invalid_attributes);
	RUN(wait_set_two_cqs_and_an_eq);
	RUN(wait_set_fd_and_trywait);
	RUN(wait_set_woken_by_a_members_signal);
	RUN(wait_set_with_a_counter);
	RUN(wait_set_of_another_fabric_is_refused);
	RUN(trywait_argument_rules);
	RUN(wait_set_null_and_foreign_objects);
	RUN(poll_set_reports_the_right_member);
	RUN(poll_set_invalid_arguments);
	fi_close(&dom->fid);
	fi_close(&fab->fid);
	return harness_done();
}
