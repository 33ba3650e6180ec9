/* Completion queues through the public API (fi_cq(3)): open/close rules,
 * empty reads, blocking reads with timeouts and fi_cq_signal, wait objects
 * (FD with poll/epoll and fi_trywait, MUTEX_COND, POLLFD), invalid
 * combinations, -FI_EBUSY, and NULL/foreign arguments to every entry point.
 * Without endpoints no completion can be produced from C; the entry paths
 * are covered by the Rust unit tests in src/cq.rs. */
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
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

static void close_domain(void)
{
	if (dom)
		fi_close(&dom->fid);
	if (fab)
		fi_close(&fab->fid);
	dom = NULL;
	fab = NULL;
}

static int open_domain_again(void);

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static int open_cq(struct fid_cq **cq, enum fi_cq_format fmt, enum fi_wait_obj wait, void *ctx)
{
	struct fi_cq_attr attr = {0};
	attr.size = 16;
	attr.format = fmt;
	attr.wait_obj = wait;
	return fi_cq_open(dom, &attr, cq, ctx);
}

TEST(cq_open_close_every_format_and_wait_object)
{
	static const enum fi_cq_format fmts[] = {FI_CQ_FORMAT_UNSPEC, FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_MSG,
						 FI_CQ_FORMAT_DATA, FI_CQ_FORMAT_TAGGED};
	static const enum fi_wait_obj waits[] = {FI_WAIT_NONE, FI_WAIT_UNSPEC, FI_WAIT_FD,
						 FI_WAIT_MUTEX_COND, FI_WAIT_YIELD, FI_WAIT_POLLFD};
	for (size_t f = 0; f < sizeof(fmts) / sizeof(fmts[0]); f++) {
		for (size_t w = 0; w < sizeof(waits) / sizeof(waits[0]); w++) {
			struct fid_cq *cq = NULL;
			int ctx;
			CHECK_OK(open_cq(&cq, fmts[f], waits[w], &ctx));
			CHECK_EQ(cq->fid.fclass, FI_CLASS_CQ);
			CHECK(cq->fid.context == &ctx);
			CHECK_OK(fi_close(&cq->fid));
		}
	}
}

/* fabtests cq_open_close_sizes: 0 (provider default) and 1..65536. */
TEST(cq_open_close_sizes)
{
	for (int i = -1; i < 17; i++) {
		struct fi_cq_attr attr = {0};
		struct fid_cq *cq;
		attr.size = i < 0 ? 0 : (size_t)1 << i;
		attr.wait_obj = FI_WAIT_UNSPEC;
		CHECK_OK(fi_cq_open(dom, &attr, &cq, NULL));
		CHECK_OK(fi_close(&cq->fid));
	}
}

TEST(cq_invalid_attributes)
{
	struct fi_cq_attr attr = {0};
	struct fid_cq *cq = NULL;
	attr.format = 99;
	CHECK_EQ(fi_cq_open(dom, &attr, &cq, NULL), -FI_EINVAL);
	attr.format = FI_CQ_FORMAT_MSG;
	attr.wait_obj = 99;
	CHECK_EQ(fi_cq_open(dom, &attr, &cq, NULL), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_SET; /* no wait_set */
	CHECK_EQ(fi_cq_open(dom, &attr, &cq, NULL), -FI_EINVAL);
	attr.wait_set = (struct fid_wait *)&dom->fid; /* not a wait set */
	CHECK_EQ(fi_cq_open(dom, &attr, &cq, NULL), -FI_EINVAL);
	attr.wait_set = NULL;
	attr.wait_obj = FI_WAIT_UNSPEC;
	attr.wait_cond = 42;
	CHECK_EQ(fi_cq_open(dom, &attr, &cq, NULL), -FI_EINVAL);
	attr.wait_cond = FI_CQ_COND_NONE;
	attr.flags = FI_SEND;
	CHECK_EQ(fi_cq_open(dom, &attr, &cq, NULL), -FI_EINVAL);
	attr.flags = 0;
	attr.size = (size_t)1 << 40;
	CHECK_EQ(fi_cq_open(dom, &attr, &cq, NULL), -FI_EINVAL);
	attr.size = 0;
	CHECK_EQ(fi_cq_open(dom, NULL, &cq, NULL), -FI_EINVAL);
	CHECK(cq == NULL);
}

/* A NULL out-pointer is -FI_EINVAL. Known issue (outside this module): the
 * fi_cq_open thunk in domain.rs creates the CQ before it checks the
 * out-pointer, so the CQ leaks and its domain stays busy; this runs on a
 * throwaway domain for that reason. */
TEST(cq_open_null_out_pointer)
{
	struct fid_fabric *f2 = fab;
	struct fid_domain *d2 = dom;
	struct fi_cq_attr attr = {0};
	fab = NULL;
	dom = NULL;
	CHECK_OK(open_domain());
	CHECK_EQ(fi_cq_open(dom, &attr, NULL, NULL), -FI_EINVAL);
	fi_close(&dom->fid);
	fi_close(&fab->fid);
	fab = f2;
	dom = d2;
}

TEST(cq_empty_reads)
{
	struct fid_cq *cq;
	struct fi_cq_tagged_entry e[4];
	struct fi_cq_err_entry err = {0};
	fi_addr_t src[4];
	CHECK_OK(open_cq(&cq, FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, NULL));
	CHECK_EQ(fi_cq_read(cq, e, 4), -FI_EAGAIN);
	CHECK_EQ(fi_cq_readfrom(cq, e, 4, src), -FI_EAGAIN);
	CHECK_EQ(fi_cq_readerr(cq, &err, 0), -FI_EAGAIN);
	CHECK_EQ(fi_cq_read(cq, NULL, 0), -FI_EAGAIN);
	CHECK_EQ(fi_cq_read(cq, NULL, 1), -FI_EINVAL);
	CHECK_EQ(fi_cq_readerr(cq, NULL, 0), -FI_EINVAL);
	CHECK_OK(fi_close(&cq->fid));
}

/* "It is invalid for applications to call these functions if the CQ has
 * been configured with a wait object of FI_WAIT_NONE or FI_WAIT_SET." */
TEST(cq_sread_needs_a_wait_object)
{
	struct fid_cq *cq;
	struct fi_cq_attr attr = {0};
	struct fi_cq_entry e;
	fi_addr_t src;
	struct fid *fids[1];
	CHECK_OK(open_cq(&cq, FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, NULL));
	CHECK_EQ(fi_cq_sread(cq, &e, 1, NULL, 10), -FI_ENOSYS);
	CHECK_EQ(fi_cq_sreadfrom(cq, &e, 1, &src, NULL, 10), -FI_ENOSYS);
	CHECK_EQ(fi_cq_signal(cq), -FI_ENOSYS);
	fids[0] = &cq->fid;
	CHECK_EQ(fi_trywait(fab, fids, 1), -FI_EINVAL);
	CHECK_OK(fi_close(&cq->fid));
	/* A threshold without a wait object: the condition is ignored at open
	 * ("This field is ignored if wait_obj is set to FI_WAIT_NONE") and the
	 * blocking read is still refused. */
	attr.format = FI_CQ_FORMAT_CONTEXT;
	attr.wait_obj = FI_WAIT_NONE;
	attr.wait_cond = FI_CQ_COND_THRESHOLD;
	CHECK_OK(fi_cq_open(dom, &attr, &cq, NULL));
	CHECK_EQ(fi_cq_sread(cq, &e, 1, (void *)(uintptr_t)4, 10), -FI_ENOSYS);
	CHECK_OK(fi_close(&cq->fid));
}

TEST(cq_sread_timeout_is_honoured)
{
	static const enum fi_wait_obj waits[] = {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD,
						 FI_WAIT_POLLFD};
	for (size_t w = 0; w < sizeof(waits) / sizeof(waits[0]); w++) {
		struct fid_cq *cq;
		struct fi_cq_msg_entry e;
		fi_addr_t src;
		long long t0, el;
		CHECK_OK(open_cq(&cq, FI_CQ_FORMAT_MSG, waits[w], NULL));
		t0 = now_ms();
		CHECK_EQ(fi_cq_sread(cq, &e, 1, NULL, 150), -FI_EAGAIN);
		el = now_ms() - t0;
		if (el < 150 || el > 3000)
			FAIL_AT("wait %d: sread took %lld ms for a 150 ms timeout", waits[w], el);
		t0 = now_ms();
		CHECK_EQ(fi_cq_sreadfrom(cq, &e, 1, &src, NULL, 100), -FI_EAGAIN);
		CHECK(now_ms() - t0 >= 100);
		/* timeout 0: a poll */
		CHECK_EQ(fi_cq_sread(cq, &e, 1, NULL, 0), -FI_EAGAIN);
		CHECK_OK(fi_close(&cq->fid));
	}
}

struct sread_arg {
	struct fid_cq *cq;
	ssize_t ret;
	int started, done; /* set by the thread (atomically) */
};

static void *sread_forever(void *p)
{
	struct sread_arg *a = p;
	struct fi_cq_entry e;
	__atomic_store_n(&a->started, 1, __ATOMIC_RELEASE);
	a->ret = fi_cq_sread(a->cq, &e, 1, NULL, -1);
	__atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* fi_cq_signal "will unblock any thread waiting in fi_cq_sread": the
 * thread blocks (it has not returned when we signal, however long we let
 * it run first) and returns -FI_EAGAIN once signalled. No elapsed-time
 * bound: under valgrind on a loaded machine the thread may start late (a
 * signal that comes before the sread must make it return at once too,
 * cq_signal_before_sread); a wake-up that never comes is the runner's
 * timeout. */
TEST(cq_signal_wakes_a_blocked_thread)
{
	static const enum fi_wait_obj waits[] = {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD};
	for (size_t w = 0; w < sizeof(waits) / sizeof(waits[0]); w++) {
		struct sread_arg a = {0};
		pthread_t t;
		CHECK_OK(open_cq(&a.cq, FI_CQ_FORMAT_CONTEXT, waits[w], NULL));
		CHECK_OK(pthread_create(&t, NULL, sread_forever, &a));
		while (!__atomic_load_n(&a.started, __ATOMIC_ACQUIRE))
			usleep(1000);
		usleep(100 * 1000);
		CHECK(!__atomic_load_n(&a.done, __ATOMIC_ACQUIRE));
		CHECK_OK(fi_cq_signal(a.cq));
		CHECK_OK(pthread_join(t, NULL));
		CHECK_EQ(a.ret, -FI_EAGAIN);
		CHECK_OK(fi_close(&a.cq->fid));
	}
}

/* fabtests cq_signal: a signal before the sread makes it return at once. */
TEST(cq_signal_before_sread)
{
	struct fid_cq *cq;
	struct fi_cq_tagged_entry e;
	long long t0;
	CHECK_OK(open_cq(&cq, FI_CQ_FORMAT_UNSPEC, FI_WAIT_UNSPEC, NULL));
	CHECK_OK(fi_cq_signal(cq));
	t0 = now_ms();
	CHECK_EQ(fi_cq_sread(cq, &e, 1, NULL, 2000), -FI_EAGAIN);
	CHECK(now_ms() - t0 < 1000);
	CHECK_OK(fi_close(&cq->fid));
}

/* FD wait object: usable with poll() and epoll, quiet after a successful
 * fi_trywait on an empty CQ, readable after fi_cq_signal. */
TEST(cq_fd_poll_epoll_trywait)
{
	struct fid_cq *cq;
	struct fid *fids[1];
	struct pollfd pfd;
	struct epoll_event ev = {0}, out;
	enum fi_wait_obj kind = FI_WAIT_NONE;
	int fd = -1, ep;
	CHECK_OK(open_cq(&cq, FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD, NULL));
	CHECK_OK(fi_control(&cq->fid, FI_GETWAIT, &fd));
	CHECK(fd >= 0);
	CHECK_OK(fi_control(&cq->fid, FI_GETWAITOBJ, &kind));
	CHECK_EQ(kind, FI_WAIT_FD);
	fids[0] = &cq->fid;
	CHECK_OK(fi_trywait(fab, fids, 1));
	pfd.fd = fd;
	pfd.events = POLLIN;
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	ep = epoll_create1(0);
	CHECK(ep >= 0);
	ev.events = EPOLLIN;
	CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
	CHECK_EQ(epoll_wait(ep, &out, 1, 0), 0);
	CHECK_OK(fi_cq_signal(cq));
	CHECK_EQ(poll(&pfd, 1, 1000), 1);
	CHECK_EQ(epoll_wait(ep, &out, 1, 1000), 1);
	close(ep);
	CHECK_OK(fi_close(&cq->fid));
}

TEST(cq_pollfd_wait_object)
{
	struct fid_cq *cq;
	struct pollfd pfd[2];
	struct fi_wait_pollfd wp = {0};
	CHECK_OK(open_cq(&cq, FI_CQ_FORMAT_CONTEXT, FI_WAIT_POLLFD, NULL));
	wp.nfds = 0;
	wp.fd = NULL;
	CHECK_EQ(fi_control(&cq->fid, FI_GETWAIT, &wp), -FI_ETOOSMALL);
	CHECK_EQ(wp.nfds, 1);
	wp.nfds = 2;
	wp.fd = pfd;
	CHECK_OK(fi_control(&cq->fid, FI_GETWAIT, &wp));
	CHECK_EQ(wp.nfds, 1);
	CHECK(pfd[0].fd >= 0);
	CHECK_EQ(poll(pfd, 1, 0), 0);
	CHECK_OK(fi_cq_signal(cq));
	CHECK_EQ(poll(pfd, 1, 1000), 1);
	CHECK_OK(fi_close(&cq->fid));
}

TEST(cq_getwait_without_a_native_object)
{
	static const enum fi_wait_obj waits[] = {FI_WAIT_NONE, FI_WAIT_UNSPEC, FI_WAIT_YIELD};
	for (size_t w = 0; w < sizeof(waits) / sizeof(waits[0]); w++) {
		struct fid_cq *cq;
		enum fi_wait_obj kind = 99;
		int fd = -1;
		CHECK_OK(open_cq(&cq, FI_CQ_FORMAT_CONTEXT, waits[w], NULL));
		CHECK(fi_control(&cq->fid, FI_GETWAIT, &fd) < 0);
		CHECK_EQ(fd, -1);
		CHECK_OK(fi_control(&cq->fid, FI_GETWAITOBJ, &kind));
		CHECK_EQ(kind, waits[w]);
		CHECK_EQ(fi_control(&cq->fid, FI_GETWAITOBJ, NULL), -FI_EINVAL);
		CHECK_EQ(fi_control(&cq->fid, FI_ENABLE, NULL), -FI_ENOSYS);
		CHECK_OK(fi_close(&cq->fid));
	}
}

struct signal_later {
	struct fid_cq *cq;
	pthread_mutex_t *m;
	int *flag;
};

static void *signal_after_50ms(void *p)
{
	struct signal_later *s = p;
	usleep(50 * 1000);
	pthread_mutex_lock(s->m);
	*s->flag = 1;
	pthread_mutex_unlock(s->m);
	fi_cq_signal(s->cq);
	return NULL;
}

/* FI_WAIT_MUTEX_COND: real pthread objects the application can wait on. */
TEST(cq_mutex_cond_is_waitable_by_the_app)
{
	struct fid_cq *cq;
	struct fi_mutex_cond mc = {0};
	struct signal_later s;
	struct timespec dl;
	pthread_t t;
	int flag = 0, rc = 0;
	CHECK_OK(open_cq(&cq, FI_CQ_FORMAT_CONTEXT, FI_WAIT_MUTEX_COND, NULL));
	CHECK_OK(fi_control(&cq->fid, FI_GETWAIT, &mc));
	CHECK(mc.mutex && mc.cond);
	s.cq = cq;
	s.m = mc.mutex;
	s.flag = &flag;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 5;
	pthread_mutex_lock(mc.mutex);
	CHECK_OK(pthread_create(&t, NULL, signal_after_50ms, &s));
	while (!flag && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(mc.cond, mc.mutex, &dl);
	pthread_mutex_unlock(mc.mutex);
	pthread_join(t, NULL);
	CHECK(flag);
	CHECK(rc != ETIMEDOUT);
	CHECK_OK(fi_close(&cq->fid));
}

TEST(cq_strerror)
{
	struct fid_cq *cq;
	char buf[64];
	const char *s;
	CHECK_OK(open_cq(&cq, FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, NULL));
	s = fi_cq_strerror(cq, FI_EIO, NULL, buf, sizeof(buf));
	CHECK(s == buf);
	CHECK(strlen(buf) > 0);
	s = fi_cq_strerror(cq, FI_ETRUNC, NULL, NULL, 0);
	CHECK(s != NULL && strlen(s) > 0);
	s = fi_cq_strerror(cq, FI_EIO, NULL, buf, 4);
	CHECK_EQ(strlen(s), 3);
	CHECK_OK(fi_close(&cq->fid));
}

/* "If resources are still associated with the CQ ... -FI_EBUSY"; the
 * domain stays busy while a CQ is open. */
TEST(cq_keeps_its_domain_busy)
{
	struct fid_cq *cq;
	CHECK_OK(open_cq(&cq, FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD, NULL));
	CHECK_EQ(fi_close(&dom->fid), -FI_EBUSY);
	CHECK_OK(fi_close(&cq->fid));
	CHECK_OK(fi_close(&dom->fid));
	dom = NULL;
	CHECK_OK(open_domain_again());
}

/* Every slot with a NULL or foreign object: -FI_EINVAL (NULL string for
 * strerror), never a crash. */
TEST(cq_null_and_foreign_objects)
{
	struct fid_cq *cq;
	struct fid_cq *bad = (struct fid_cq *)&dom->fid; /* a domain, not a CQ */
	struct fi_cq_entry e;
	struct fi_cq_err_entry err = {0};
	fi_addr_t src;
	int fd;
	CHECK_OK(open_cq(&cq, FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD, NULL));
	struct fid_cq *objs[2] = {NULL, bad};
	for (int i = 0; i < 2; i++) {
		struct fid_cq *o = objs[i];
		CHECK_EQ(cq->ops->read(o, &e, 1), -FI_EINVAL);
		CHECK_EQ(cq->ops->readfrom(o, &e, 1, &src), -FI_EINVAL);
		CHECK_EQ(cq->ops->readerr(o, &err, 0), -FI_EINVAL);
		CHECK_EQ(cq->ops->sread(o, &e, 1, NULL, 0), -FI_EINVAL);
		CHECK_EQ(cq->ops->sreadfrom(o, &e, 1, &src, NULL, 0), -FI_EINVAL);
		CHECK_EQ(cq->ops->signal(o), -FI_EINVAL);
		CHECK(cq->ops->strerror(o, FI_EIO, NULL, NULL, 0) == NULL);
		CHECK_EQ(cq->fid.ops->close(o ? &o->fid : NULL), -FI_EINVAL);
		CHECK_EQ(cq->fid.ops->control(o ? &o->fid : NULL, FI_GETWAIT, &fd), -FI_EINVAL);
	}
	CHECK_EQ(fi_cq_sread(cq, NULL, 1, NULL, 0), -FI_EINVAL);
	CHECK(cq->fid.ops->bind(&cq->fid, &dom->fid, 0) < 0);
	CHECK_OK(fi_close(&cq->fid));
}

static int open_domain_again(void)
{
	if (fab)
		fi_close(&fab->fid);
	fab = NULL;
	return open_domain();
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	if (open_domain()) {
		printf("cannot open a rustfab domain\n");
		return 1;
	}
	RUN(cq_open_close_every_format_and_wait_object);
	RUN(cq_open_close_sizes);
	RUN(cq_invalid_attributes);
	RUN(cq_open_null_out_pointer);
	RUN(cq_empty_reads);
	RUN(cq_sread_needs_a_wait_object);
	RUN(cq_sread_timeout_is_honoured);
	RUN(cq_signal_wakes_a_blocked_thread);
	RUN(cq_signal_before_sread);
	RUN(cq_fd_poll_epoll_trywait);
	RUN(cq_pollfd_wait_object);
	RUN(cq_getwait_without_a_native_object);
	RUN(cq_mutex_cond_is_waitable_by_the_app);
	RUN(cq_strerror);
	RUN(cq_keeps_its_domain_busy);
	RUN(cq_null_and_foreign_objects);
	close_domain();
	return harness_done();
}
