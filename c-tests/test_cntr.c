/* Counters through the public API (fi_cntr(3)): fabtests' cntr_loop, waits
 * with thresholds, timeouts and error changes (on every wait object, and on
 * FI_WAIT_NONE counters, whose wait progresses and polls), FD and
 * MUTEX_COND wait objects driven by fi_cntr_add from another thread,
 * invalid arguments and -FI_EBUSY. */
#include "rdm_common.h"

#include <rdma/fi_rma.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

static struct fid_fabric *fab;
static struct fid_domain *dom;

static int open_domain(void)
{
	struct fi_info *info = fi_allocinfo();
	int ret;
	if (!info)
		return -FI_ENOMEM;
	info->fabric_attr->name = strdup("rustfab");
	info->fabric_attr->prov_name = strdup("rustfab");
	info->fabric_attr->api_version = FI_VERSION(1, 17);
	info->domain_attr->name = strdup("shm");
	ret = fi_fabric(info->fabric_attr, &fab, NULL);
	if (!ret)
		ret = fi_domain(fab, info, &dom, NULL);
	fi_freeinfo(info);
	return ret;
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static int open_cntr(struct fid_cntr **c, enum fi_wait_obj wait, void *ctx)
{
	struct fi_cntr_attr attr = {0};
	attr.events = FI_CNTR_EVENTS_COMP;
	attr.wait_obj = wait;
	return fi_cntr_open(dom, &attr, c, ctx);
}

/* fabtests cntr_loop, with 100 counters. */
TEST(cntr_loop)
{
	enum { N = 100 };
	struct fid_cntr *c[N];
	size_t i;
	for (i = 0; i < N; i++)
		CHECK_OK(open_cntr(&c[i], FI_WAIT_NONE, &c[i]));
	for (i = 0; i < N; i++) {
		CHECK_OK(fi_cntr_set(c[i], i));
		CHECK_OK(fi_cntr_seterr(c[i], i << 1));
	}
	for (i = 0; i < N; i++) {
		CHECK_OK(fi_cntr_add(c[i], i));
		CHECK_OK(fi_cntr_adderr(c[i], i));
	}
	for (i = 0; i < N; i++) {
		CHECK_EQ(fi_cntr_read(c[i]), i + i);
		CHECK_EQ(fi_cntr_readerr(c[i]), (i << 1) + i);
	}
	for (i = 0; i < N; i++)
		CHECK_OK(fi_close(&c[i]->fid));
}

struct adder {
	struct fid_cntr *c;
	int delay_ms, n, err;
	pthread_mutex_t *m;
	int *flag;
	/* When set: add every delay_ms until *until is set, whatever n says. */
	volatile int *until;
};

static void *add_later(void *p)
{
	struct adder *a = p;
	for (int i = 0; a->until ? !*a->until : i < a->n; i++) {
		usleep(a->delay_ms * 1000);
		if (a->err)
			fi_cntr_adderr(a->c, 1);
		else
			fi_cntr_add(a->c, 1);
	}
	if (a->m) {
		pthread_mutex_lock(a->m);
		*a->flag = 1;
		pthread_mutex_unlock(a->m);
	}
	return NULL;
}

TEST(cntr_wait_threshold_timeout_and_errors)
{
	/* FI_WAIT_NONE too: fi_cntr(3) calls it invalid, the sockets provider
	 * waits anyway and fabtests' fi_multi_mr relies on that. */
	static const enum fi_wait_obj waits[] = {FI_WAIT_UNSPEC, FI_WAIT_FD,    FI_WAIT_MUTEX_COND,
						 FI_WAIT_YIELD,  FI_WAIT_POLLFD, FI_WAIT_NONE};
	for (size_t w = 0; w < sizeof(waits) / sizeof(waits[0]); w++) {
		struct adder a = {0};
		pthread_t t;
		long long t0, el;
		CHECK_OK(open_cntr(&a.c, waits[w], NULL));
		/* "If the call returns due to timeout, -FI_ETIMEDOUT" */
		t0 = now_ms();
		CHECK_EQ(fi_cntr_wait(a.c, 1, 150), -FI_ETIMEDOUT);
		el = now_ms() - t0;
		if (el < 150 || el > 3000)
			FAIL_AT("wait %d: fi_cntr_wait took %lld ms for 150", waits[w], el);
		/* the threshold is reached by another thread's adds */
		a.delay_ms = 10;
		a.n = 5;
		CHECK_OK(pthread_create(&t, NULL, add_later, &a));
		CHECK_OK(fi_cntr_wait(a.c, 5, 10000));
		CHECK(fi_cntr_read(a.c) >= 5);
		pthread_join(t, NULL);
		CHECK_OK(fi_cntr_wait(a.c, 5, 0));
		/* "Any change in a counter's error value will unblock any thread
		 * inside fi_cntr_wait." The other thread changes it every 30 ms
		 * until the wait returns: one change made before the wait began
		 * (a loaded machine, valgrind) is no change during it, and the
		 * wait would rightly time out. */
		volatile int waited = 0;
		a.err = 1;
		a.delay_ms = 30;
		a.until = &waited;
		CHECK_OK(pthread_create(&t, NULL, add_later, &a));
		int w_err = fi_cntr_wait(a.c, 100, 10000);
		waited = 1;
		pthread_join(t, NULL);
		a.until = NULL;
		CHECK_EQ(w_err, -FI_EAVAIL);
		CHECK(fi_cntr_readerr(a.c) >= 1);
		CHECK_OK(fi_close(&a.c->fid));
	}
}

/* Without a wait object there is nothing to hand out or to block on
 * natively: fi_trywait is -FI_EINVAL and FI_GETWAIT fails (fi_cntr_wait
 * still works: cntr_wait_none_progresses_the_domain). */
TEST(cntr_no_wait_object_to_show)
{
	struct fid_cntr *c;
	struct fid *fids[1];
	int fd = -1;
	CHECK_OK(open_cntr(&c, FI_WAIT_NONE, NULL));
	fids[0] = &c->fid;
	CHECK_EQ(fi_trywait(fab, fids, 1), -FI_EINVAL);
	CHECK(fi_control(&c->fid, FI_GETWAIT, &fd) < 0);
	CHECK_OK(fi_close(&c->fid));
	CHECK_OK(open_cntr(&c, FI_WAIT_UNSPEC, NULL));
	CHECK(fi_control(&c->fid, FI_GETWAIT, &fd) < 0);
	CHECK_EQ(fd, -1);
	CHECK_OK(fi_close(&c->fid));
}

struct progressor {
	struct end *e;
	volatile int stop;
	int passes;
};

/* Progresses one end (reading its CQ) until told to stop. */
static void *progress_end(void *p)
{
	struct progressor *pr = p;
	while (!pr->stop) {
		poke1(pr->e);
		pr->passes++;
	}
	return NULL;
}

static int open_cntr_in(struct fid_domain *d, struct fid_cntr **c, enum fi_wait_obj wait)
{
	struct fi_cntr_attr attr = {0};
	attr.events = FI_CNTR_EVENTS_COMP;
	attr.wait_obj = wait;
	return fi_cntr_open(d, &attr, c, NULL);
}

static struct fid_cntr *wc; /* the initiator's FI_WAIT_NONE write counter */

static int bind_write_cntr(struct end *e, const void *arg)
{
	int ret = open_cntr_in(e->domain, &wc, FI_WAIT_NONE);
	if (!ret)
		ret = fi_ep_bind(e->ep, &wc->fid, FI_WRITE);
	e->tx_cntr = wc; /* end_close closes it */
	return ret;
}

/*
 * fi_cntr_wait on FI_WAIT_NONE counters, as fabtests' fi_multi_mr uses
 * them: the wait itself must progress the counter's domain (manual
 * progress; nothing else drives that end meanwhile) until the threshold,
 * an error count change or the timeout. The target waits on its region's
 * counter (fi_mr_bind FI_REMOTE_WRITE) for 1 MiB writes that only its own
 * progress places, while another thread progresses the initiator; then the
 * initiator waits on its FI_WRITE counter: a write with a bad key changes
 * the error count (-FI_EAVAIL), a good one reaches the threshold.
 */
TEST(cntr_wait_none_progresses_the_domain)
{
	enum { LEN = 1 << 20, KEY = 0x77 };
	struct end a, b;
	/* Delivery complete: the refused write below is an error at the
	 * initiator (at transmit complete a small shm write would have
	 * completed in the ring, its refusal only logged; docs/rma.md). */
	struct end_opts o = {.caps = FI_MSG | FI_RMA | FI_RMA_EVENT, .tx_op_flags = FI_DELIVERY_COMPLETE};
	struct progressor pr = {0};
	pthread_t t;
	struct fid_mr *mr;
	struct fid_cntr *rc;
	unsigned char *src = malloc(LEN), *dst = calloc(1, LEN);
	int timeout_ms = (int)(20000 * rf_time_scale());
	CHECK(src && dst);
	o.before_enable = bind_write_cntr;
	CHECK_OK(end_open(&a, &o));
	o.before_enable = NULL;
	CHECK_OK(end_open(&b, &o));
	CHECK_OK(ends_connect(&a, &b));
	CHECK_OK(open_cntr_in(b.domain, &rc, FI_WAIT_NONE));
	CHECK_OK(fi_mr_reg(b.domain, dst, LEN, FI_REMOTE_WRITE, 0, KEY, 0, &mr, NULL));
	CHECK_OK(fi_mr_bind(mr, &rc->fid, FI_REMOTE_WRITE));

	pr.e = &a;
	CHECK_OK(pthread_create(&t, NULL, progress_end, &pr));
	int ok = 1;
	for (int i = 1; i <= 3 && ok; i++) {
		fill(src, LEN, (unsigned)i);
		ssize_t r;
		while ((r = fi_write(a.ep, src, LEN, NULL, a.peer, 0, KEY, NULL)) == -FI_EAGAIN)
			;
		int w = fi_cntr_wait(rc, (uint64_t)i, timeout_ms);
		ok = r == 0 && w == 0 && fi_cntr_read(rc) == (uint64_t)i && check_fill(dst, LEN, (unsigned)i);
		if (!ok)
			printf("    write %d: post %zd, wait %d (%s), count %" PRIu64 "\n", i, r, w, fi_strerror(-w),
			       fi_cntr_read(rc));
	}
	/* Nothing more comes: the timeout. */
	int late = ok ? fi_cntr_wait(rc, 4, 100) : 0;
	pr.stop = 1;
	pthread_join(t, NULL);
	CHECK(ok);
	CHECK_EQ(late, -FI_ETIMEDOUT);
	CHECK_EQ(fi_cntr_readerr(rc), 0);
	/* 3 writes done: 3 completions were read by the progress thread. */
	CHECK_EQ(a.nstash, 3);
	a.nstash = 0;

	/* The initiator's side: now the other thread progresses the target. */
	struct progressor pb = {.e = &b};
	CHECK_OK(pthread_create(&t, NULL, progress_end, &pb));
	uint64_t done0 = fi_cntr_read(wc);
	ssize_t r1 = fi_write(a.ep, src, 64, NULL, a.peer, 0, KEY + 1, NULL);
	int w1 = r1 ? 0 : fi_cntr_wait(wc, done0 + 1, timeout_ms);
	uint64_t errs = fi_cntr_readerr(wc);
	ssize_t r2 = fi_write(a.ep, src, 64, NULL, a.peer, 0, KEY, NULL);
	int w2 = r2 ? 0 : fi_cntr_wait(wc, done0 + 1, timeout_ms);
	pb.stop = 1;
	pthread_join(t, NULL);
	CHECK_EQ(r1, 0);
	CHECK_EQ(w1, -FI_EAVAIL);
	CHECK_EQ(errs, 1);
	CHECK_EQ(r2, 0);
	CHECK_EQ(w2, 0);
	CHECK_EQ(fi_cntr_read(wc), done0 + 1);

	CHECK_OK(fi_close(&mr->fid));
	CHECK_OK(fi_close(&rc->fid));
	end_close(&a);
	end_close(&b);
	wc = NULL;
	free(src);
	free(dst);
}

/* FD: quiet after fi_trywait, readable after another thread's fi_cntr_add;
 * trywait says -FI_EAGAIN until the application has read the new value. */
TEST(cntr_fd_woken_by_cntr_add)
{
	struct adder a = {0};
	struct fid *fids[1];
	struct pollfd pfd;
	pthread_t t;
	int fd = -1;
	CHECK_OK(open_cntr(&a.c, FI_WAIT_FD, NULL));
	CHECK_OK(fi_control(&a.c->fid, FI_GETWAIT, &fd));
	fids[0] = &a.c->fid;
	CHECK_OK(fi_trywait(fab, fids, 1));
	pfd.fd = fd;
	pfd.events = POLLIN;
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	a.delay_ms = 50;
	a.n = 1;
	CHECK_OK(pthread_create(&t, NULL, add_later, &a));
	CHECK_EQ(poll(&pfd, 1, 5000), 1);
	pthread_join(t, NULL);
	CHECK_EQ(fi_trywait(fab, fids, 1), -FI_EAGAIN);
	CHECK_EQ(fi_cntr_read(a.c), 1);
	CHECK_OK(fi_trywait(fab, fids, 1));
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	CHECK_OK(fi_close(&a.c->fid));
}

/* MUTEX_COND: the application's pthread_cond_timedwait on the returned
 * objects wakes after fi_cntr_add from another thread. */
TEST(cntr_mutex_cond_woken_by_cntr_add)
{
	struct adder a = {0};
	struct fi_mutex_cond mc = {0};
	struct timespec dl;
	pthread_t t;
	int rc = 0;
	CHECK_OK(open_cntr(&a.c, FI_WAIT_MUTEX_COND, NULL));
	CHECK_OK(fi_control(&a.c->fid, FI_GETWAIT, &mc));
	CHECK(mc.mutex && mc.cond);
	a.delay_ms = 50;
	a.n = 1;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 5;
	pthread_mutex_lock(mc.mutex);
	CHECK_OK(pthread_create(&t, NULL, add_later, &a));
	while (fi_cntr_read(a.c) < 1 && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(mc.cond, mc.mutex, &dl);
	pthread_mutex_unlock(mc.mutex);
	pthread_join(t, NULL);
	CHECK(rc != ETIMEDOUT);
	CHECK_EQ(fi_cntr_read(a.c), 1);
	CHECK_OK(fi_close(&a.c->fid));
}

TEST(cntr_invalid_attributes_and_control)
{
	struct fid_cntr *c = NULL;
	struct fi_cntr_attr attr = {0};
	uint64_t flags = 7;
	enum fi_wait_obj kind = 99;
	attr.events = 1;
	CHECK_EQ(fi_cntr_open(dom, &attr, &c, NULL), -FI_EINVAL);
	attr.events = FI_CNTR_EVENTS_COMP;
	attr.flags = 1; /* "must be set to 0" */
	CHECK_EQ(fi_cntr_open(dom, &attr, &c, NULL), -FI_EINVAL);
	attr.flags = 0;
	attr.wait_obj = 99;
	CHECK_EQ(fi_cntr_open(dom, &attr, &c, NULL), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_SET;
	CHECK_EQ(fi_cntr_open(dom, &attr, &c, NULL), -FI_EINVAL);
	CHECK_EQ(fi_cntr_open(dom, NULL, &c, NULL), -FI_EINVAL);
	CHECK(c == NULL);
	CHECK_OK(open_cntr(&c, FI_WAIT_YIELD, NULL));
	CHECK_OK(fi_control(&c->fid, FI_GETWAITOBJ, &kind));
	CHECK_EQ(kind, FI_WAIT_YIELD);
	CHECK_OK(fi_control(&c->fid, FI_GETOPSFLAG, &flags));
	CHECK_EQ(flags, 0);
	CHECK_OK(fi_control(&c->fid, FI_SETOPSFLAG, &flags));
	CHECK_EQ(fi_control(&c->fid, FI_ENABLE, NULL), -FI_ENOSYS);
	CHECK_OK(fi_close(&c->fid));
}

TEST(cntr_keeps_its_domain_busy)
{
	struct fid_cntr *c;
	CHECK_OK(open_cntr(&c, FI_WAIT_FD, NULL));
	CHECK_EQ(fi_close(&dom->fid), -FI_EBUSY);
	CHECK_OK(fi_close(&c->fid));
	CHECK_OK(fi_close(&dom->fid));
	CHECK_OK(fi_close(&fab->fid));
	dom = NULL;
	fab = NULL;
	CHECK_OK(open_domain());
}

TEST(cntr_null_and_foreign_objects)
{
	struct fid_cntr *c;
	struct fid_cntr *bad = (struct fid_cntr *)&dom->fid;
	int fd;
	CHECK_OK(open_cntr(&c, FI_WAIT_FD, NULL));
	struct fid_cntr *objs[2] = {NULL, bad};
	for (int i = 0; i < 2; i++) {
		struct fid_cntr *o = objs[i];
		CHECK_EQ(c->ops->read(o), 0);
		CHECK_EQ(c->ops->readerr(o), 0);
		CHECK_EQ(c->ops->add(o, 1), -FI_EINVAL);
		CHECK_EQ(c->ops->set(o, 1), -FI_EINVAL);
		CHECK_EQ(c->ops->adderr(o, 1), -FI_EINVAL);
		CHECK_EQ(c->ops->seterr(o, 1), -FI_EINVAL);
		CHECK_EQ(c->ops->wait(o, 1, 0), -FI_EINVAL);
		CHECK_EQ(c->fid.ops->close(o ? &o->fid : NULL), -FI_EINVAL);
		CHECK_EQ(c->fid.ops->control(o ? &o->fid : NULL, FI_GETWAIT, &fd), -FI_EINVAL);
	}
	CHECK_EQ(fi_control(&c->fid, FI_GETWAIT, NULL), -FI_EINVAL);
	CHECK_EQ(fi_cntr_read(c), 0);
	CHECK_OK(fi_close(&c->fid));
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	if (open_domain()) {
		printf("cannot open a rustfab domain\n");
		return 1;
	}
	RUN(cntr_loop);
	RUN(cntr_wait_threshold_timeout_and_errors);
	RUN(cntr_no_wait_object_to_show);
	RUN(cntr_wait_none_progresses_the_domain);
	RUN(cntr_fd_woken_by_cntr_add);
	RUN(cntr_mutex_cond_woken_by_cntr_add);
	RUN(cntr_invalid_attributes_and_control);
	RUN(cntr_keeps_its_domain_busy);
	RUN(cntr_null_and_foreign_objects);
	if (dom)
		fi_close(&dom->fid);
	if (fab)
		fi_close(&fab->fid);
	return harness_done();
}
