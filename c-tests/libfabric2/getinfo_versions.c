/*
 * fi_getinfo at several API versions through whatever libfabric core is
 * loaded (LD_LIBRARY_PATH picks it: Debian's 1.17, or the 2.5.1 core the
 * Open MPI 5 and MPICH 5 wheels bundle). Built against the system's 1.17
 * headers: an API version is only a number to fi_getinfo.
 *
 * For each version up to the core's: rustfab's native entries come back
 * (auto, shm, tcp RDM, then tcp MSG) and no "rustfab;ofi_rxm" entry
 * appears unless asked for; asked for explicitly, it does. What an API
 * version removed is not offered at it (FI_BUFFERED_RECV after 1.22,
 * FI_VARIABLE_MSG after 1.20).
 */
#include "../harness.h"

static uint32_t core_version;
static uint32_t version;

static struct fi_info *query(const char *prov_name, uint64_t mode, uint64_t caps, int ep_type)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	hints->fabric_attr->prov_name = strdup(prov_name);
	hints->mode = mode;
	hints->caps = caps;
	hints->ep_attr->type = ep_type;
	int rc = fi_getinfo(version, NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	return rc ? NULL : info;
}

TEST(native_entries_first_and_no_rxm)
{
	struct fi_info *info = query("rustfab", 0, 0, FI_EP_UNSPEC), *i;
	CHECK(info != NULL);
	/* RDM auto, shm, tcp; then MSG auto, shm, tcp; then DGRAM auto, shm, tcp */
	const char *want[] = {"auto", "shm", "tcp", "auto", "shm", "tcp", "auto", "shm", "tcp"};
	int n = 0;
	for (i = info; i; i = i->next, n++) {
		CHECK(strcmp(i->fabric_attr->prov_name, "rustfab") == 0);
		if (n < 9)
			CHECK(strcmp(i->domain_attr->name, want[n]) == 0);
		CHECK_EQ(i->ep_attr->type, n < 3 ? FI_EP_RDM : n < 6 ? FI_EP_MSG : FI_EP_DGRAM);
		CHECK_EQ(i->fabric_attr->api_version, version);
	}
	CHECK_EQ(n, 9);
	fi_freeinfo(info);
	/* Nor through an unfiltered query (what MPI libraries do). */
	struct fi_info *all = NULL;
	CHECK_EQ(fi_getinfo(version, NULL, NULL, 0, NULL, &all), 0);
	for (i = all; i; i = i->next)
		CHECK(strcasecmp(i->fabric_attr->prov_name, "rustfab;ofi_rxm") != 0);
	fi_freeinfo(all);
}

TEST(rxm_when_asked_for)
{
	struct fi_info *info = query("rustfab;ofi_rxm", 0, 0, FI_EP_RDM);
	CHECK(info != NULL);
	CHECK(strcasecmp(info->fabric_attr->prov_name, "rustfab;ofi_rxm") == 0);
	fi_freeinfo(info);
}

TEST(removed_bits_only_where_they_exist)
{
	struct fi_info *info = query("rustfab", FI_CONTEXT | FI_BUFFERED_RECV, 0, FI_EP_RDM);
	CHECK(info != NULL);
	CHECK_EQ(!!(info->mode & FI_BUFFERED_RECV), version <= FI_VERSION(1, 22));
	fi_freeinfo(info);
	info = query("rustfab", 0, FI_MSG | FI_VARIABLE_MSG, FI_EP_MSG);
	CHECK_EQ(info != NULL, version <= FI_VERSION(1, 20));
	fi_freeinfo(info);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	core_version = fi_version();
	uint32_t versions[] = {FI_VERSION(1, 17), FI_VERSION(1, 18), FI_VERSION(1, 20), FI_VERSION(1, 22),
			       FI_VERSION(2, 0), FI_VERSION(2, 5), FI_VERSION(2, 6)};
	int tried = 0;
	for (size_t k = 0; k < sizeof versions / sizeof versions[0]; k++) {
		version = versions[k];
		if (version > core_version)
			continue;
		tried++;
		printf("-- API %u.%u (core %u.%u)\n", FI_MAJOR(version), FI_MINOR(version), FI_MAJOR(core_version),
		       FI_MINOR(core_version));
		RUN(native_entries_first_and_no_rxm);
		RUN(rxm_when_asked_for);
		RUN(removed_bits_only_where_they_exist);
	}
	if (!tried) {
		printf("no API version to try at or below the core's\n");
		return 1;
	}
	return harness_done();
}
