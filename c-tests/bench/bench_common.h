/*
 * What the benchmark programs share (rf_bench.c, rf_insns.c, rf_idle.c, rf_rma.c and
 * c-tests/scale/rf_scale.c): DIE prints "<program>: <message>" and exits
 * with status 2; CK(call) dies with the file, line, call and libfabric
 * error when a call returns non-zero; bench_two_domains() is the set-up of
 * the one-process programs (rf_insns, rf_idle): one RDM fi_info of the
 * provider, its fabric and two domains; bench_now() is CLOCK_MONOTONIC in
 * seconds; bench_pin(cpu) pins the caller to `cpu` (modulo the CPUs online;
 * best effort) for the two-process programs (rf_bench, rf_rma, rf_scale:
 * they define _GNU_SOURCE, which it needs). Define BENCH_PROG (the program's
 * name, a string literal) before including this file.
 */
#ifndef RUSTFAB_BENCH_COMMON_H
#define RUSTFAB_BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <time.h>
#include <rdma/fi_errno.h>

#ifndef BENCH_PROG
#error "define BENCH_PROG before including bench_common.h"
#endif

#define DIE(...)                                            \
	do {                                                \
		fprintf(stderr, BENCH_PROG ": " __VA_ARGS__); \
		fprintf(stderr, "\n");                      \
		exit(2);                                    \
	} while (0)
static inline double bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#ifdef _GNU_SOURCE
#include <sched.h>
#include <unistd.h>
static inline void bench_pin(int cpu)
{
	cpu_set_t set;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	CPU_ZERO(&set);
	CPU_SET(n > 1 ? cpu % n : 0, &set);
	sched_setaffinity(0, sizeof set, &set);
}
#endif

#define CK(call)                                                                                  \
	do {                                                                                      \
		long _r = (long)(call);                                                           \
		if (_r)                                                                           \
			DIE("%s:%d %s = %ld (%s)", __FILE__, __LINE__, #call, _r, fi_strerror((int)-_r)); \
	} while (0)

/* An RDM endpoint of `prov` with `caps`, FI_CONTEXT, no FI_MR_LOCAL (the
 * programs pass plain buffers), the threading model `threading` asked
 * (FI_THREAD_UNSPEC: none); its fabric and two domains (as if in two
 * processes). Dies on failure. */
static inline struct fi_info *bench_two_domains(const char *prov, uint64_t caps, enum fi_threading threading,
						struct fid_fabric **fab, struct fid_domain **d1,
						struct fid_domain **d2)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	if (!hints)
		DIE("fi_allocinfo failed");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = caps;
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->threading = threading;
	hints->fabric_attr->prov_name = strdup(prov);
	CK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	fi_freeinfo(hints);
	if (info->domain_attr->mr_mode & FI_MR_LOCAL)
		DIE("%s requires FI_MR_LOCAL; not supported by this program", prov);
	CK(fi_fabric(info->fabric_attr, fab, NULL));
	CK(fi_domain(*fab, info, d1, NULL));
	CK(fi_domain(*fab, info, d2, NULL));
	return info;
}

#endif
