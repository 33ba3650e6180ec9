/*
 * The panic boundary (README "Panic policy"), against a test build of
 * rustfab (cargo feature panic-test) in which FI_RUSTFAB_TEST_PANIC names an
 * entry point that panics: the C caller gets -FI_EOTHER, the process lives
 * on, the object that panicked is poisoned (later calls fail cleanly), and
 * other objects keep working. Run by `make panic-test`.
 */
#include "../harness.h"

TEST(panic_becomes_eother_and_poisons)
{
	/* FI_RUSTFAB_TEST_PANIC=fi_cq_read is set by the Makefile. */
	struct fi_info *info = rf_getinfo("shm", FI_EP_RDM, 0);
	CHECK(info != NULL);
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_cq *cq1, *cq2;
	struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_CONTEXT};
	struct fi_cq_entry e;
	struct fi_cq_err_entry err = {0};
	CHECK_OK(fi_fabric(info->fabric_attr, &fab, NULL));
	CHECK_OK(fi_domain(fab, info, &dom, NULL));
	CHECK_OK(fi_cq_open(dom, &attr, &cq1, NULL));
	CHECK_OK(fi_cq_open(dom, &attr, &cq2, NULL));
	/* the injected panic: an error code, not an abort */
	CHECK_EQ(fi_cq_read(cq1, &e, 1), -FI_EOTHER);
	/* poisoned: another entry point on the same object fails cleanly */
	CHECK_EQ(fi_cq_readerr(cq1, &err, 0), -FI_EOTHER);
	/* an untouched object still works */
	CHECK_EQ(fi_cq_readerr(cq2, &err, 0), -FI_EAGAIN);
	CHECK_OK(fi_close(&cq2->fid));
	/* the poisoned object cannot be closed (it may be inconsistent); the
	 * domain therefore stays busy */
	CHECK_EQ(fi_close(&cq1->fid), -FI_EOTHER);
	CHECK_EQ(fi_close(&dom->fid), -FI_EBUSY);
	fi_freeinfo(info);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	RUN(panic_becomes_eother_and_poisons);
	return harness_done();
}
