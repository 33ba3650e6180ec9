/*
 * FI_THREAD_SAFE: several application threads post sends and receives on
 * the same endpoints and read the same CQs at once. Every message must
 * arrive exactly once, intact, with its tag; nothing may hang or crash.
 */
#include "rdm_common.h"
#include <pthread.h>

enum { THREADS = 4, MAX_PER_THREAD = 3000, SZ = 200 };
/* Messages per sender: MAX_PER_THREAD, or fewer with RF_THREADS_MESSAGES
 * (make memcheck: under valgrind the receivers fall far behind and every
 * post scans a long unexpected queue). */
static int PER_THREAD = MAX_PER_THREAD;

static struct end A, B;
static volatile int failures;
static int sent_done[THREADS], got[THREADS][MAX_PER_THREAD];
static int total_done;
/* a receive buffer may be reposted once the thread that read its
 * completion has finished checking it */
static int slot_free[THREADS][64];
/* Every thread starts once all exist: a thread that spins before the
 * others are created can starve their creation under valgrind's serializing
 * scheduler (make memcheck), and the test is about concurrency anyway. */
static pthread_barrier_t start;

struct arg {
	int id;
};

static void *sender(void *p)
{
	int id = ((struct arg *)p)->id;
	char buf[SZ];
	struct fi_cq_tagged_entry c[16];
	pthread_barrier_wait(&start);
	for (int i = 0; i < PER_THREAD; i++) {
		memset(buf, 0, sizeof buf);
		*(int *)buf = id;
		*(int *)(buf + 4) = i;
		fill(buf + 8, SZ - 8, (unsigned)(id * PER_THREAD + i));
		ssize_t r;
		double deadline = now_sec() + 20 * rf_time_scale();
		while ((r = fi_tsend(A.ep, buf, SZ, NULL, A.peer, (uint64_t)id << 32 | (uint64_t)i, NULL)) == -FI_EAGAIN) {
			fi_cq_read(A.cq, c, 16); /* send completions: just drain */
			if (now_sec() > deadline)
				break;
		}
		if (r) {
			__sync_fetch_and_add(&failures, 1);
			return NULL;
		}
		fi_cq_read(A.cq, c, 16);
	}
	sent_done[id] = 1;
	return NULL;
}

static void *receiver(void *p)
{
	int id = ((struct arg *)p)->id;
	static char bufs[THREADS][64][SZ];
	int posted = 0;
	pthread_barrier_wait(&start);
	double deadline = now_sec() + 60 * rf_time_scale();
	/* Each receiver posts for the messages of one sender (tag high word);
	 * completions land on the shared CQ and any thread may read them. */
	while (__atomic_load_n(&total_done, __ATOMIC_ACQUIRE) < THREADS * PER_THREAD && now_sec() < deadline) {
		while (posted < PER_THREAD && (posted < 64 || __atomic_load_n(&slot_free[id][posted % 64], __ATOMIC_ACQUIRE))) {
			if (posted >= 64)
				__atomic_store_n(&slot_free[id][posted % 64], 0, __ATOMIC_RELAXED);
			ssize_t r = fi_trecv(B.ep, bufs[id][posted % 64], SZ, NULL, FI_ADDR_UNSPEC, (uint64_t)id << 32,
					     0xffffffffULL, (void *)(uintptr_t)(id * 100000 + posted));
			if (r == -FI_EAGAIN) {
				if (posted >= 64)
					__atomic_store_n(&slot_free[id][posted % 64], 1, __ATOMIC_RELAXED);
				break;
			}
			if (r) {
				__sync_fetch_and_add(&failures, 1);
				return NULL;
			}
			posted++;
		}
		struct fi_cq_tagged_entry c;
		/* Manual progress: the senders may be done posting while records
		 * are still queued in A's transport; only A's progress sends
		 * them (its send completions are discarded, as the senders do). */
		struct fi_cq_tagged_entry drop[16];
		fi_cq_read(A.cq, drop, 16);
		ssize_t n = fi_cq_read(B.cq, &c, 1);
		if (n == 1) {
			uintptr_t ctx = (uintptr_t)c.op_context;
			int owner = (int)(ctx / 100000), slot = (int)(ctx % 100000);
			const char *b = bufs[owner][slot % 64];
			int from = *(const int *)b, idx = *(const int *)(b + 4);
			if (from != (int)(c.tag >> 32) || (uint32_t)c.tag != (uint32_t)idx || c.len != SZ ||
			    !check_fill(b + 8, SZ - 8, (unsigned)(from * PER_THREAD + idx)) || idx < 0 || idx >= PER_THREAD) {
				__sync_fetch_and_add(&failures, 1);
			} else if (__sync_fetch_and_add(&got[from][idx], 1) != 0) {
				__sync_fetch_and_add(&failures, 1); /* duplicate */
			}
			__atomic_store_n(&slot_free[owner][slot % 64], 1, __ATOMIC_RELEASE);
			__atomic_fetch_add(&total_done, 1, __ATOMIC_RELEASE);
		} else if (n == -FI_EAVAIL) {
			__sync_fetch_and_add(&failures, 1);
			return NULL;
		}
	}
	return NULL;
}

TEST(many_threads_one_endpoint)
{
	struct end_opts o = {0};
	CHECK_OK(end_open(&A, &o));
	CHECK_OK(end_open(&B, &o));
	CHECK_OK(ends_connect(&A, &B));
	CHECK_EQ(A.info->domain_attr->threading, FI_THREAD_SAFE);
	pthread_t s[THREADS], r[THREADS];
	struct arg args[THREADS];
	pthread_barrier_init(&start, NULL, 2 * THREADS);
	for (int i = 0; i < THREADS; i++) {
		args[i].id = i;
		pthread_create(&r[i], NULL, receiver, &args[i]);
		pthread_create(&s[i], NULL, sender, &args[i]);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(s[i], NULL);
		pthread_join(r[i], NULL);
	}
	pthread_barrier_destroy(&start);
	CHECK_EQ(failures, 0);
	int missing = 0;
	for (int t = 0; t < THREADS; t++) {
		CHECK(sent_done[t]);
		for (int i = 0; i < PER_THREAD; i++)
			missing += got[t][i] != 1;
	}
	CHECK_EQ(missing, 0);
	end_close(&A);
	end_close(&B);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	const char *m = getenv("RF_THREADS_MESSAGES");
	if (m && atoi(m) > 0 && atoi(m) < MAX_PER_THREAD)
		PER_THREAD = atoi(m);
	printf("# transport: %s\n", rf_transport());
	RUN(many_threads_one_endpoint);
	return harness_done();
}
