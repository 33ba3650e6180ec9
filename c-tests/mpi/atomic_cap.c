/*
 * LD_PRELOAD library for c-tests/mpi/onesided.sh, used only while rustfab
 * does not offer FI_ATOMIC.
 *
 * Open MPI 4.1's btl ofi (the btl osc rdma puts one-sided traffic on) asks
 * fi_getinfo for FI_RMA | FI_ATOMIC and opens nothing else, so without
 * FI_ATOMIC it never opens rustfab and MPI one-sided communication cannot
 * reach rustfab's RMA at all. This wrapper of fi_getinfo answers a request
 * that names FI_ATOMIC with the entries the same request without FI_ATOMIC
 * gets, FI_ATOMIC added to rustfab's (only rustfab's) entries. Every other
 * request goes through unchanged. The test then skips the MPI calls that
 * need network atomics (accumulate, fetch-and-op, compare-and-swap): if btl
 * ofi called fi_atomic anyway, rustfab would answer it with an error and btl
 * ofi would abort the job, so the test cannot pass by accident.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <rdma/fabric.h>

typedef int (*getinfo_fn)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
			  struct fi_info **);

int fi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
	       const struct fi_info *hints, struct fi_info **info)
{
	static getinfo_fn real;
	if (!real)
		real = (getinfo_fn)dlvsym(RTLD_NEXT, "fi_getinfo", "FABRIC_1.3");
	if (!real) {
		fprintf(stderr, "atomic_cap: libfabric's fi_getinfo@FABRIC_1.3 not found\n");
		return -FI_ENOSYS;
	}
	if (!hints || !(hints->caps & FI_ATOMIC))
		return real(version, node, service, flags, hints, info);
	struct fi_info *h = fi_dupinfo(hints);
	if (!h)
		return -FI_ENOMEM;
	h->caps &= ~FI_ATOMIC;
	int ret = real(version, node, service, flags, h, info);
	fi_freeinfo(h);
	if (ret)
		return ret;
	for (struct fi_info *i = *info; i; i = i->next)
		if (i->fabric_attr && i->fabric_attr->prov_name && strcmp(i->fabric_attr->prov_name, "rustfab") == 0)
			i->caps |= FI_ATOMIC;
	return 0;
}
