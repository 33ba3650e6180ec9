/* Fabric and domain objects through the public API: open/close, bad
 * arguments, -FI_EBUSY while a child object is open. */
#include "harness.h"

static int open_fabric(struct fid_fabric **fab)
{
	struct fi_fabric_attr attr = {0};
	attr.name = "rustfab";
	attr.prov_name = "rustfab";
	attr.api_version = FI_VERSION(1, 17);
	return fi_fabric(&attr, fab, NULL);
}

TEST(fabric_open_close)
{
	struct fid_fabric *fab = NULL;
	CHECK_OK(open_fabric(&fab));
	CHECK(fab != NULL);
	CHECK_EQ(fab->fid.fclass, FI_CLASS_FABRIC);
	CHECK_EQ(fab->api_version, FI_VERSION(1, 17));
	CHECK_OK(fi_close(&fab->fid));
}

TEST(fabric_context_stored)
{
	struct fid_fabric *fab = NULL;
	struct fi_fabric_attr attr = {0};
	int ctx;
	attr.name = "rustfab";
	attr.prov_name = "rustfab";
	CHECK_OK(fi_fabric(&attr, &fab, &ctx));
	CHECK(fab->fid.context == &ctx);
	CHECK_OK(fi_close(&fab->fid));
}

TEST(fabric_wrong_name_rejected)
{
	struct fid_fabric *fab = NULL;
	struct fi_fabric_attr attr = {0};
	attr.name = "not-rustfab";
	attr.prov_name = "rustfab";
	CHECK(fi_fabric(&attr, &fab, NULL) < 0);
}

TEST(fabric_null_arguments)
{
	struct fid_fabric *fab = NULL;
	CHECK_OK(open_fabric(&fab));
	CHECK_EQ(fi_domain(fab, NULL, NULL, NULL), -FI_EINVAL);
	CHECK_EQ(fab->ops->eq_open(fab, NULL, NULL, NULL), -FI_EINVAL);
	CHECK_EQ(fab->ops->wait_open(fab, NULL, NULL), -FI_EINVAL);
	CHECK_EQ(fi_trywait(fab, NULL, 1), -FI_EINVAL);
	CHECK_OK(fi_trywait(fab, NULL, 0));
	CHECK_OK(fi_close(&fab->fid));
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	RUN(fabric_open_close);
	RUN(fabric_context_stored);
	RUN(fabric_wrong_name_rejected);
	RUN(fabric_null_arguments);
	return harness_done();
}
