/* Event queues through the public API (fi_eq(3)): everything fabtests'
 * fi_eq_test checks, plus write/read rules, blocking reads woken by another
 * thread, FD and MUTEX_COND wait objects used by the application, invalid
 * arguments and -FI_EBUSY. */
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

static struct fid_fabric *fab;

static int open_fabric(void)
{
	struct fi_fabric_attr attr = {0};
	attr.name = "rustfab";
	attr.prov_name = "rustfab";
	attr.api_version = FI_VERSION(1, 17);
	return fi_fabric(&attr, &fab, NULL);
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static int open_eq(struct fid_eq **eq, size_t size, uint64_t flags, enum fi_wait_obj wait)
{
	struct fi_eq_attr attr = {0};
	attr.size = size;
	attr.flags = flags;
	attr.wait_obj = wait;
	return fi_eq_open(fab, &attr, eq, NULL);
}

static ssize_t write_notify(struct fid_eq *eq, void *ctx)
{
	struct fi_eq_entry e = {0};
	e.fid = &eq->fid;
	e.context = ctx;
	return fi_eq_write(eq, FI_NOTIFY, &e, sizeof(e), 0);
}

/* fabtests eq_open_close */
TEST(eq_open_close_sizes)
{
	for (int i = 0; i < 17; i++) {
		struct fid_eq *eq;
		CHECK_OK(open_eq(&eq, (size_t)1 << i, 0, FI_WAIT_UNSPEC));
		CHECK_EQ(eq->fid.fclass, FI_CLASS_EQ);
		CHECK_OK(fi_close(&eq->fid));
	}
}

TEST(eq_every_wait_object)
{
	static const enum fi_wait_obj waits[] = {FI_WAIT_NONE, FI_WAIT_UNSPEC, FI_WAIT_FD,
						 FI_WAIT_MUTEX_COND, FI_WAIT_YIELD, FI_WAIT_POLLFD};
	for (size_t w = 0; w < sizeof(waits) / sizeof(waits[0]); w++) {
		struct fid_eq *eq;
		enum fi_wait_obj kind = 99;
		int ctx;
		struct fi_eq_attr attr = {0};
		attr.wait_obj = waits[w];
		CHECK_OK(fi_eq_open(fab, &attr, &eq, &ctx));
		CHECK(eq->fid.context == &ctx);
		CHECK_OK(fi_control(&eq->fid, FI_GETWAITOBJ, &kind));
		CHECK_EQ(kind, waits[w]);
		CHECK_OK(fi_close(&eq->fid));
	}
}

/* fabtests eq_write_read_self */
TEST(eq_write_read_self)
{
	struct fid_eq *eq;
	struct fi_eq_entry entry;
	uint32_t event;
	CHECK_OK(open_eq(&eq, 32, FI_WRITE, FI_WAIT_NONE));
	for (int i = 0; i < 5; i++) {
		entry.fid = (i & 1) ? &fab->fid : &eq->fid;
		entry.context = (void *)(uintptr_t)i;
		entry.data = 0;
		CHECK_EQ(fi_eq_write(eq, FI_NOTIFY, &entry, sizeof(entry), 0), sizeof(entry));
	}
	for (int i = 0; i < 10; i++) {
		event = ~0u;
		memset(&entry, 0, sizeof(entry));
		CHECK_EQ(fi_eq_read(eq, &event, &entry, sizeof(entry), (i & 1) ? 0 : FI_PEEK), sizeof(entry));
		CHECK_EQ(event, FI_NOTIFY);
		CHECK_EQ((int)(uintptr_t)entry.context, i / 2);
		CHECK(entry.fid == ((i & 2) ? &fab->fid : &eq->fid));
	}
	CHECK_EQ(fi_eq_read(eq, &event, &entry, sizeof(entry), 0), -FI_EAGAIN);
	CHECK_OK(fi_close(&eq->fid));
}

/* fabtests eq_size_verify: `size` events fit; one more is -FI_EAGAIN. */
TEST(eq_size_verify)
{
	struct fid_eq *eq;
	struct fi_eq_entry e;
	uint32_t ev;
	CHECK_OK(open_eq(&eq, 32, FI_WRITE, FI_WAIT_NONE));
	for (int i = 0; i < 32; i++)
		CHECK_EQ(write_notify(eq, NULL), sizeof(struct fi_eq_entry));
	CHECK_EQ(write_notify(eq, NULL), -FI_EAGAIN);
	CHECK_EQ(fi_eq_read(eq, &ev, &e, sizeof(e), 0), sizeof(e));
	CHECK_EQ(write_notify(eq, NULL), sizeof(struct fi_eq_entry));
	CHECK_OK(fi_close(&eq->fid));
}

/* fabtests eq_wait_fd_poll, plus epoll and a second trywait. */
TEST(eq_wait_fd_poll_epoll)
{
	struct fid_eq *eq;
	struct fid *fids[1];
	struct pollfd pfd;
	struct epoll_event ev = {0}, out;
	struct fi_eq_entry e;
	uint32_t event;
	int fd = -1, ep;
	CHECK_OK(open_eq(&eq, 32, FI_WRITE, FI_WAIT_FD));
	CHECK_OK(fi_control(&eq->fid, FI_GETWAIT, &fd));
	fids[0] = &eq->fid;
	CHECK_OK(fi_trywait(fab, fids, 1));
	pfd.fd = fd;
	pfd.events = POLLIN;
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	ep = epoll_create1(0);
	ev.events = EPOLLIN;
	CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
	CHECK_EQ(epoll_wait(ep, &out, 1, 0), 0);
	CHECK_EQ(write_notify(eq, eq), sizeof(struct fi_eq_entry));
	CHECK_EQ(poll(&pfd, 1, 0), 1);
	CHECK_EQ(epoll_wait(ep, &out, 1, 0), 1);
	CHECK_EQ(fi_trywait(fab, fids, 1), -FI_EAGAIN);
	CHECK_EQ(fi_eq_read(eq, &event, &e, sizeof(e), 0), sizeof(e));
	CHECK_OK(fi_trywait(fab, fids, 1));
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	close(ep);
	CHECK_OK(fi_close(&eq->fid));
}

/* fabtests eq_wait_fd_sread: the timeout is honoured, a queued event is
 * returned at once. */
TEST(eq_wait_fd_sread)
{
	struct fid_eq *eq;
	struct fi_eq_entry entry;
	uint32_t event;
	long long t0, el;
	CHECK_OK(open_eq(&eq, 32, FI_WRITE, FI_WAIT_FD));
	t0 = now_ms();
	CHECK_EQ(fi_eq_sread(eq, &event, &entry, sizeof(entry), 300, 0), -FI_EAGAIN);
	el = now_ms() - t0;
	if (el < 300 || el > 3000)
		FAIL_AT("sread slept %lld ms for a 300 ms timeout", el);
	CHECK_EQ(write_notify(eq, eq), sizeof(entry));
	event = ~0u;
	memset(&entry, 0, sizeof(entry));
	t0 = now_ms();
	CHECK_EQ(fi_eq_sread(eq, &event, &entry, sizeof(entry), 2000, 0), sizeof(entry));
	/* "at once": well before the 2 s timeout (5 ms failed under valgrind on
	 * a loaded machine, make memcheck: a scheduler tick is not a wait) */
	el = now_ms() - t0;
	if (el > 1000)
		FAIL_AT("sread with an event queued took %lld ms (timeout 2000)", el);
	CHECK_EQ(event, FI_NOTIFY);
	CHECK(entry.fid == &eq->fid);
	CHECK(entry.context == eq);
	CHECK_OK(fi_close(&eq->fid));
}

/* fabtests eq_wait_read_peek / eq_wait_sread_peek */
TEST(eq_peek_does_not_consume)
{
	struct fid_eq *eq;
	struct fi_eq_entry e;
	uint32_t ev;
	CHECK_OK(open_eq(&eq, 32, FI_WRITE, FI_WAIT_FD));
	CHECK_EQ(write_notify(eq, NULL), sizeof(e));
	CHECK_EQ(fi_eq_sread(eq, &ev, &e, sizeof(e), 2000, 0), sizeof(e));
	CHECK_EQ(write_notify(eq, NULL), sizeof(e));
	CHECK_EQ(fi_eq_sread(eq, &ev, &e, sizeof(e), 2000, FI_PEEK), sizeof(e));
	CHECK_EQ(fi_eq_sread(eq, &ev, &e, sizeof(e), 2000, 0), sizeof(e));
	CHECK_EQ(fi_eq_read(eq, &ev, &e, sizeof(e), 0), -FI_EAGAIN);
	CHECK_OK(fi_close(&eq->fid));
}

/* fabtests eq_readerr_ret_eagain */
TEST(eq_readerr_eagain)
{
	struct fid_eq *eq;
	struct fi_eq_err_entry err;
	struct fi_eq_entry e;
	uint32_t ev;
	memset(&err, 0, sizeof(err));
	CHECK_OK(open_eq(&eq, 32, FI_WRITE, FI_WAIT_UNSPEC));
	for (int i = 0; i < 5; i++)
		CHECK_EQ(write_notify(eq, NULL), sizeof(e));
	for (int i = 0; i < 5; i++)
		CHECK_EQ(fi_eq_read(eq, &ev, &e, sizeof(e), 0), sizeof(e));
	CHECK_EQ(fi_eq_readerr(eq, &err, 0), -FI_EAGAIN);
	CHECK(fi_eq_strerror(eq, err.prov_errno, err.err_data, NULL, 0) != NULL);
	CHECK_OK(fi_close(&eq->fid));
}

TEST(eq_write_and_read_rules)
{
	struct fid_eq *eq;
	struct fi_eq_entry e = {0};
	unsigned char big[200], out[256];
	uint32_t ev;
	/* "If the FI_WRITE flag is not set, then the application may not
	 * invoke fi_eq_write." */
	CHECK_OK(open_eq(&eq, 8, 0, FI_WAIT_NONE));
	CHECK_EQ(fi_eq_write(eq, FI_NOTIFY, &e, sizeof(e), 0), -FI_EINVAL);
	CHECK_OK(fi_close(&eq->fid));
	CHECK_OK(open_eq(&eq, 8, FI_WRITE, FI_WAIT_NONE));
	CHECK_EQ(fi_eq_write(eq, FI_NOTIFY, &e, 8, 0), -FI_EINVAL);
	CHECK_EQ(fi_eq_write(eq, FI_NOTIFY, NULL, sizeof(e), 0), -FI_EINVAL);
	/* longer events (connection data) are kept whole ... */
	memset(big, 7, sizeof(big));
	CHECK_EQ(fi_eq_write(eq, FI_CONNECTED, big, sizeof(big), 0), sizeof(big));
	/* ... a buffer smaller than the header is refused, the event stays ... */
	CHECK_EQ(fi_eq_read(eq, &ev, out, 8, 0), -FI_ETOOSMALL);
	CHECK_EQ(fi_eq_read(eq, &ev, NULL, 0, 0), -FI_EINVAL);
	/* ... and the data may be cut to the buffer. */
	CHECK_EQ(fi_eq_read(eq, &ev, out, sizeof(out), FI_PEEK), sizeof(big));
	CHECK_EQ(fi_eq_read(eq, &ev, out, 100, 0), 100);
	CHECK_EQ(ev, FI_CONNECTED);
	CHECK_EQ(out[99], 7);
	CHECK_EQ(fi_eq_read(eq, NULL, out, sizeof(out), 0), -FI_EAGAIN);
	CHECK_OK(fi_close(&eq->fid));
}

TEST(eq_invalid_attributes)
{
	struct fid_eq *eq = NULL;
	struct fi_eq_attr attr = {0};
	attr.wait_obj = 77;
	CHECK_EQ(fi_eq_open(fab, &attr, &eq, NULL), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_SET; /* no set */
	CHECK_EQ(fi_eq_open(fab, &attr, &eq, NULL), -FI_EINVAL);
	attr.wait_set = (struct fid_wait *)&fab->fid;
	CHECK_EQ(fi_eq_open(fab, &attr, &eq, NULL), -FI_EINVAL);
	attr.wait_set = NULL;
	attr.wait_obj = FI_WAIT_NONE;
	attr.flags = FI_SEND;
	CHECK_EQ(fi_eq_open(fab, &attr, &eq, NULL), -FI_EINVAL);
	CHECK_EQ(fi_eq_open(fab, NULL, &eq, NULL), -FI_EINVAL);
	CHECK(eq == NULL);
}

TEST(eq_blocking_needs_a_wait_object)
{
	struct fid_eq *eq;
	struct fi_eq_entry e;
	struct fid *fids[1];
	uint32_t ev;
	int fd = -1;
	CHECK_OK(open_eq(&eq, 8, FI_WRITE, FI_WAIT_NONE));
	CHECK_EQ(fi_eq_sread(eq, &ev, &e, sizeof(e), 10, 0), -FI_ENOSYS);
	fids[0] = &eq->fid;
	CHECK_EQ(fi_trywait(fab, fids, 1), -FI_EINVAL);
	CHECK(fi_control(&eq->fid, FI_GETWAIT, &fd) < 0);
	CHECK_OK(fi_close(&eq->fid));
	CHECK_OK(open_eq(&eq, 8, FI_WRITE, FI_WAIT_UNSPEC));
	CHECK(fi_control(&eq->fid, FI_GETWAIT, &fd) < 0);
	CHECK_EQ(fd, -1);
	CHECK_OK(fi_close(&eq->fid));
}

struct writer {
	struct fid_eq *eq;
	int delay_ms;
	pthread_mutex_t *m;
	int *flag;
};

static void *write_later(void *p)
{
	struct writer *w = p;
	usleep(w->delay_ms * 1000);
	if (w->m) {
		pthread_mutex_lock(w->m);
		*w->flag = 1;
		pthread_mutex_unlock(w->m);
	}
	write_notify(w->eq, w->eq);
	return NULL;
}

/* A thread blocked in fi_eq_sread wakes for another thread's fi_eq_write,
 * for every blocking wait object. */
TEST(eq_sread_woken_by_a_writer)
{
	static const enum fi_wait_obj waits[] = {FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD,
						 FI_WAIT_POLLFD};
	for (size_t w = 0; w < sizeof(waits) / sizeof(waits[0]); w++) {
		struct writer wr = {0};
		struct fi_eq_entry e;
		uint32_t ev;
		pthread_t t;
		long long t0;
		CHECK_OK(open_eq(&wr.eq, 8, FI_WRITE, waits[w]));
		wr.delay_ms = 50;
		CHECK_OK(pthread_create(&t, NULL, write_later, &wr));
		t0 = now_ms();
		CHECK_EQ(fi_eq_sread(wr.eq, &ev, &e, sizeof(e), -1, 0), sizeof(e));
		CHECK(now_ms() - t0 >= 40);
		CHECK(e.context == wr.eq);
		pthread_join(t, NULL);
		CHECK_OK(fi_close(&wr.eq->fid));
	}
}

/* FI_WAIT_MUTEX_COND: the application waits on the returned pthread
 * objects itself and wakes after another thread's fi_eq_write. */
TEST(eq_mutex_cond_woken_by_eq_write)
{
	struct writer wr = {0};
	struct fi_mutex_cond mc = {0};
	struct fi_eq_entry e;
	struct timespec dl;
	pthread_t t;
	uint32_t ev;
	int rc = 0;
	CHECK_OK(open_eq(&wr.eq, 8, FI_WRITE, FI_WAIT_MUTEX_COND));
	CHECK_OK(fi_control(&wr.eq->fid, FI_GETWAIT, &mc));
	CHECK(mc.mutex && mc.cond);
	wr.delay_ms = 50;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 5;
	pthread_mutex_lock(mc.mutex);
	CHECK_OK(pthread_create(&t, NULL, write_later, &wr));
	/* The predicate is the EQ itself; fi_eq_read does not take the
	 * application-visible mutex. */
	while (fi_eq_read(wr.eq, &ev, &e, sizeof(e), FI_PEEK) == -FI_EAGAIN && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(mc.cond, mc.mutex, &dl);
	pthread_mutex_unlock(mc.mutex);
	pthread_join(t, NULL);
	CHECK(rc != ETIMEDOUT);
	CHECK_EQ(fi_eq_read(wr.eq, &ev, &e, sizeof(e), 0), sizeof(e));
	CHECK_OK(fi_close(&wr.eq->fid));
}

/* fi_eq(3): "The EQ must not be bound to any other objects prior to being
 * closed"; the fabric stays busy while an EQ is open. */
TEST(eq_ebusy_rules)
{
	struct fid_eq *eq;
	struct fid_domain *dom;
	struct fi_info *info = fi_allocinfo();
	CHECK(info != NULL);
	info->fabric_attr->name = strdup("rustfab");
	info->fabric_attr->prov_name = strdup("rustfab");
	info->domain_attr->name = strdup("shm");
	CHECK_OK(open_eq(&eq, 8, 0, FI_WAIT_FD));
	CHECK_EQ(fi_close(&fab->fid), -FI_EBUSY);
	CHECK_OK(fi_domain(fab, info, &dom, NULL));
	fi_freeinfo(info);
	CHECK_OK(fi_domain_bind(dom, &eq->fid, 0));
	CHECK_EQ(fi_close(&eq->fid), -FI_EBUSY);
	CHECK_OK(fi_close(&dom->fid));
	CHECK_OK(fi_close(&eq->fid));
	CHECK_OK(fi_close(&fab->fid));
	fab = NULL;
	CHECK_OK(open_fabric());
}

TEST(eq_strerror)
{
	struct fid_eq *eq;
	char buf[64];
	CHECK_OK(open_eq(&eq, 8, 0, FI_WAIT_NONE));
	CHECK(fi_eq_strerror(eq, FI_ECONNREFUSED, NULL, buf, sizeof(buf)) == buf);
	CHECK(strlen(buf) > 0);
	CHECK_OK(fi_close(&eq->fid));
}

TEST(eq_null_and_foreign_objects)
{
	struct fid_eq *eq;
	struct fid_eq *bad = (struct fid_eq *)&fab->fid;
	struct fi_eq_entry e = {0};
	struct fi_eq_err_entry err = {0};
	uint32_t ev;
	int fd;
	CHECK_OK(open_eq(&eq, 8, FI_WRITE, FI_WAIT_FD));
	struct fid_eq *objs[2] = {NULL, bad};
	for (int i = 0; i < 2; i++) {
		struct fid_eq *o = objs[i];
		CHECK_EQ(eq->ops->read(o, &ev, &e, sizeof(e), 0), -FI_EINVAL);
		CHECK_EQ(eq->ops->readerr(o, &err, 0), -FI_EINVAL);
		CHECK_EQ(eq->ops->write(o, FI_NOTIFY, &e, sizeof(e), 0), -FI_EINVAL);
		CHECK_EQ(eq->ops->sread(o, &ev, &e, sizeof(e), 0, 0), -FI_EINVAL);
		CHECK(eq->ops->strerror(o, FI_EIO, NULL, NULL, 0) == NULL);
		CHECK_EQ(eq->fid.ops->close(o ? &o->fid : NULL), -FI_EINVAL);
		CHECK_EQ(eq->fid.ops->control(o ? &o->fid : NULL, FI_GETWAIT, &fd), -FI_EINVAL);
	}
	CHECK_EQ(fi_eq_readerr(eq, NULL, 0), -FI_EINVAL);
	CHECK_EQ(fi_control(&eq->fid, FI_GETWAIT, NULL), -FI_EINVAL);
	CHECK_EQ(fi_control(&eq->fid, FI_ENABLE, NULL), -FI_ENOSYS);
	CHECK_OK(fi_close(&eq->fid));
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	if (open_fabric()) {
		printf("cannot open a rustfab fabric\n");
		return 1;
	}
	RUN(eq_open_close_sizes);
	RUN(eq_every_wait_object);
	RUN(eq_write_read_self);
	RUN(eq_size_verify);
	RUN(eq_wait_fd_poll_epoll);
	RUN(eq_wait_fd_sread);
	RUN(eq_peek_does_not_consume);
	RUN(eq_readerr_eagain);
	RUN(eq_write_and_read_rules);
	RUN(eq_invalid_attributes);
	RUN(eq_blocking_needs_a_wait_object);
	RUN(eq_sread_woken_by_a_writer);
	RUN(eq_mutex_cond_woken_by_eq_write);
	RUN(eq_ebusy_rules);
	RUN(eq_strerror);
	RUN(eq_null_and_foreign_objects);
	if (fab)
		fi_close(&fab->fid);
	return harness_done();
}
