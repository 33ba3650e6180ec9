/*
 * Minimal test harness for rustfab's C tests. Tests use ONLY the public
 * libfabric API (<rdma/...>), load rustfab through FI_PROVIDER_PATH, and
 * print one line per test plus a closing "N passed, N failed" line.
 *
 *   TEST(name) { CHECK(cond); CHECK_EQ(a, b); ... }
 *   int main(int argc, char **argv) { RUN(name); ...; return harness_done(); }
 *
 * A failing CHECK ends the current test (after printing file:line and the
 * values) and the program continues with the next one. Every test program
 * runs under `timeout` (c-tests/run.sh); a hang is a failure.
 */
#ifndef RUSTFAB_HARNESS_H
#define RUSTFAB_HARNESS_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

/*
 * fork() for tests: the child dies with the test program. A test that is
 * killed (its timeout) or fails before reaping a child must not leave it
 * running — an orphan holding the output pipe would hang the runner.
 */
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>
static inline pid_t rf_fork(void)
{
	pid_t parent = getpid();
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent) /* the parent died before prctl */
			_exit(99);
	}
	return pid;
}

static int h_passed, h_failed, h_cur_failed;
static const char *h_only; /* run a single test: argv[1] */

#define TEST(name) static void name(void)

#define FAIL_AT(fmt, ...)                                                          \
	do {                                                                       \
		printf("    %s:%d: " fmt "\n", __FILE__, __LINE__, ##__VA_ARGS__); \
		h_cur_failed = 1;                                                  \
		return;                                                            \
	} while (0)

#define CHECK(cond)                                          \
	do {                                                 \
		if (!(cond))                                 \
			FAIL_AT("CHECK(%s) failed", #cond); \
	} while (0)

#define CHECK_EQ(a, b)                                                            \
	do {                                                                      \
		long long _a = (long long)(a), _b = (long long)(b);               \
		if (_a != _b)                                                     \
			FAIL_AT("%s == %s failed: %lld != %lld", #a, #b, _a, _b); \
	} while (0)

/* A libfabric call that must succeed (returns 0). */
#define CHECK_OK(call)                                                                       \
	do {                                                                                 \
		long long _r = (long long)(call);                                            \
		if (_r != 0)                                                                 \
			FAIL_AT("%s returned %lld (%s)", #call, _r, fi_strerror((int)-_r)); \
	} while (0)

#define RUN(name)                                                              \
	do {                                                                   \
		if (h_only && strcmp(h_only, #name))                           \
			break;                                                 \
		h_cur_failed = 0;                                              \
		fflush(stdout);                                                \
		name();                                                        \
		if (h_cur_failed) {                                            \
			h_failed++;                                            \
			printf("FAIL %s\n", #name);                            \
		} else {                                                       \
			h_passed++;                                            \
			printf("ok   %s\n", #name);                            \
		}                                                              \
		fflush(stdout);                                                \
	} while (0)

static inline void harness_init(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	h_only = argc > 1 ? argv[1] : NULL;
}

static inline int harness_done(void)
{
	printf("%d passed, %d failed\n", h_passed, h_failed);
	return h_failed ? 1 : 0;
}

/* Hints selecting rustfab and one of its transports ("shm" or "tcp"). */
static inline struct fi_info *rf_hints(const char *domain_name, enum fi_ep_type type)
{
	struct fi_info *h = fi_allocinfo();
	if (!h)
		return NULL;
	h->fabric_attr->prov_name = strdup("rustfab");
	if (domain_name)
		h->domain_attr->name = strdup(domain_name);
	h->ep_attr->type = type;
	return h;
}

/* First rustfab info for a transport, or NULL. */
static inline struct fi_info *rf_getinfo(const char *domain_name, enum fi_ep_type type, uint64_t caps)
{
	struct fi_info *h = rf_hints(domain_name, type), *info = NULL;
	if (!h)
		return NULL;
	h->caps = caps;
	int ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info);
	fi_freeinfo(h);
	return ret ? NULL : info;
}

#endif
