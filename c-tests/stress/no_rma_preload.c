/*
 * LD_PRELOAD shim for fabtests 1.17's fi_rdm_stress (make stress only).
 *
 * fi_rdm_stress asks fi_getinfo for FI_MSG | FI_TAGGED | FI_RMA whatever its
 * job file holds, and rustfab offers no RMA, so it would never run. This
 * shim clears FI_RMA (and the RMA access bits) from the hints of every
 * fi_getinfo call and passes the call on to libfabric unchanged otherwise.
 * The job files make stress writes use only the message and tagged
 * operations (msg_req, msg_inject_req, tag_req and their responses), which
 * need nothing of RMA; an RMA call would reach rustfab's -FI_ENOSYS and
 * fail the run, never pass silently.
 *
 * Built as build/stress/no_rma_preload.so; not linked into anything else.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <rdma/fabric.h>

typedef int (*getinfo_fn)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
			  struct fi_info **);

int fi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
	       const struct fi_info *hints, struct fi_info **info)
{
	static getinfo_fn real;
	if (!real)
		real = (getinfo_fn)dlvsym(RTLD_NEXT, "fi_getinfo", "FABRIC_1.3");
	if (!real)
		return -FI_ENOSYS;
	if (!hints || !(hints->caps & FI_RMA))
		return real(version, node, service, flags, hints, info);
	struct fi_info *h = fi_dupinfo(hints);
	if (!h)
		return -FI_ENOMEM;
	h->caps &= ~(FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
	int ret = real(version, node, service, flags, h, info);
	fi_freeinfo(h);
	return ret;
}
