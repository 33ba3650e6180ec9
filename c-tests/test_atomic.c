/* Atomics through the public API (fi_atomic(3)) on the transport RF_TRANSPORT
 * names (shm, tcp, auto): every enum fi_op x enum fi_datatype the table
 * offers (checked against this file's own copy of libfabric 1.17's sockets
 * table, through fi_query_atomic and the three *valid calls), each through
 * every call form of its family (fi_atomic, fi_atomicv, fi_atomicmsg,
 * fi_inject_atomic; fi_fetch_atomic/v/msg; fi_compare_atomic/v/msg), with
 * the target's memory, the fetched values and guard bytes compared against
 * a computation done here; completions and counters at both ends, remote
 * CQ data; refusals (bad key, out of range, rights not granted: an error
 * completion and no byte changed at either end; unsupported op or datatype
 * and oversize calls refused at post); and concurrency: two initiators
 * adding to one word, and two targets in one process (two domains, each
 * progressed by its own thread) updating the same word — the final value
 * exact. */
#include "rdm_common.h"

#include <complex.h>
#include <pthread.h>
#include <rdma/fi_atomic.h>

#define TO 20
#define KEY_RW 0x1234
#define KEY_RO 0x2345
#define KEY_WO 0x3456
#define N 5         /* elements per operation */
#define OFF 16      /* the elements' offset in the region */
#define REG 4096    /* region size */
#define MAXSZ 16    /* largest element */
#define GUARD 0x5a

typedef __int128 i128;
typedef unsigned __int128 u128;
typedef float _Complex cfloat;

enum kind { K_WRITE, K_FETCH, K_COMPARE };

/* ---- the table (libfabric 1.17 sockets, probed with fi_query_atomic) --- */

static size_t dt_size(int dt)
{
	static const size_t s[] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 8, 16, 16, 32, 16, 16};
	return dt >= 0 && dt < 16 ? s[dt] : 0;
}

static int is_int(int dt) { return dt <= FI_UINT64 || dt == FI_INT128 || dt == FI_UINT128; }

static int expect_valid(enum kind k, int op, int dt)
{
	if (dt < 0 || dt >= 16 || op < 0 || op >= FI_ATOMIC_OP_LAST)
		return 0;
	int kind_ok = k == K_WRITE ? (op <= FI_BXOR || op == FI_ATOMIC_WRITE)
		    : k == K_FETCH ? op <= FI_ATOMIC_WRITE
				   : (op >= FI_CSWAP && op <= FI_MSWAP);
	int real = is_int(dt) || dt == FI_FLOAT || dt == FI_DOUBLE;
	int type_ok;
	switch (op) {
	case FI_BOR: case FI_BAND: case FI_BXOR: case FI_MSWAP:
		type_ok = is_int(dt);
		break;
	case FI_MIN: case FI_MAX: case FI_CSWAP_LE: case FI_CSWAP_LT: case FI_CSWAP_GE: case FI_CSWAP_GT:
		type_ok = real;
		break;
	default:
		type_ok = real || dt == FI_FLOAT_COMPLEX;
	}
	return kind_ok && type_ok;
}

/* ---- the reference computation ---------------------------------------- */

/* Element i of the target, operand and compare arrays, as small integers
 * (every branch of the compare ops is taken: compare equal, below, above). */
static long tval(int i) { return (i * 7 + 3) % 11 - 3; }
static long sval(int i) { return (i * 5 + 1) % 9 - 2; }
static long cval(int i) { return i % 3 == 0 ? tval(i) : i % 3 == 1 ? tval(i) - 1 : tval(i) + 1; }

#define FILL(T, p, f)                                       \
	do {                                                \
		for (int _i = 0; _i < N; _i++)              \
			((T *)(p))[_i] = (T)f(_i);          \
	} while (0)

/* Complex values get an imaginary part too. */
static void fill_complex(void *p, long (*f)(int))
{
	for (int i = 0; i < N; i++)
		((cfloat *)p)[i] = (float)f(i) + (float)(i % 2) * I;
}

static void fill_all(int dt, void *t, void *s, void *c)
{
#define FILL3(T) do { FILL(T, t, tval); FILL(T, s, sval); FILL(T, c, cval); } while (0)
	switch (dt) {
	case FI_INT8: FILL3(int8_t); break;
	case FI_UINT8: FILL3(uint8_t); break;
	case FI_INT16: FILL3(int16_t); break;
	case FI_UINT16: FILL3(uint16_t); break;
	case FI_INT32: FILL3(int32_t); break;
	case FI_UINT32: FILL3(uint32_t); break;
	case FI_INT64: FILL3(int64_t); break;
	case FI_UINT64: FILL3(uint64_t); break;
	case FI_FLOAT: FILL3(float); break;
	case FI_DOUBLE: FILL3(double); break;
	case FI_INT128: FILL3(i128); break;
	case FI_UINT128: FILL3(u128); break;
	case FI_FLOAT_COMPLEX: fill_complex(t, tval); fill_complex(s, sval); fill_complex(c, cval); break;
	}
#undef FILL3
}

/* d = op(d, s, c) for N elements, as fi_atomic(3) defines it. */
#define REF_COMMON(T, d, s, c)                                                  \
	case FI_SUM: d = d + s; break;                                          \
	case FI_PROD: d = d * s; break;                                         \
	case FI_LOR: d = (T)((d) || (s)); break;                                \
	case FI_LAND: d = (T)((d) && (s)); break;                               \
	case FI_LXOR: d = (T)(((d) && !(s)) || (!(d) && (s))); break;           \
	case FI_ATOMIC_READ: break;                                             \
	case FI_ATOMIC_WRITE: d = s; break;                                     \
	case FI_CSWAP: if (c == d) d = s; break;                                \
	case FI_CSWAP_NE: if (c != d) d = s; break;
#define REF_ORDER(d, s, c)                                                      \
	case FI_MIN: if (d > s) d = s; break;                                   \
	case FI_MAX: if (d < s) d = s; break;                                   \
	case FI_CSWAP_LE: if (c <= d) d = s; break;                             \
	case FI_CSWAP_LT: if (c < d) d = s; break;                              \
	case FI_CSWAP_GE: if (c >= d) d = s; break;                             \
	case FI_CSWAP_GT: if (c > d) d = s; break;
#define REF_BITS(d, s, c)                                                       \
	case FI_BOR: d = d | s; break;                                          \
	case FI_BAND: d = d & s; break;                                         \
	case FI_BXOR: d = d ^ s; break;                                         \
	case FI_MSWAP: d = (s & c) | (d & ~c); break;
#define REF_INT(T)                                                              \
	static void ref_##T(int op, T *t, const T *s, const T *c)               \
	{                                                                       \
		for (int i = 0; i < N; i++) {                                   \
			switch (op) {                                           \
				REF_COMMON(T, t[i], s[i], c[i])                 \
				REF_ORDER(t[i], s[i], c[i])                     \
				REF_BITS(t[i], s[i], c[i])                      \
			}                                                       \
		}                                                               \
	}
#define REF_REAL(T)                                                             \
	static void ref_##T(int op, T *t, const T *s, const T *c)               \
	{                                                                       \
		for (int i = 0; i < N; i++) {                                   \
			switch (op) {                                           \
				REF_COMMON(T, t[i], s[i], c[i])                 \
				REF_ORDER(t[i], s[i], c[i])                     \
			}                                                       \
		}                                                               \
	}
REF_INT(int8_t)
REF_INT(uint8_t)
REF_INT(int16_t)
REF_INT(uint16_t)
REF_INT(int32_t)
REF_INT(uint32_t)
REF_INT(int64_t)
REF_INT(uint64_t)
REF_INT(i128)
REF_INT(u128)
REF_REAL(float)
REF_REAL(double)

static void ref_cfloat(int op, cfloat *t, const cfloat *s, const cfloat *c)
{
	for (int i = 0; i < N; i++) {
		switch (op) {
			REF_COMMON(cfloat, t[i], s[i], c[i])
		}
	}
}

static void reference(int op, int dt, void *t, const void *s, const void *c)
{
	switch (dt) {
	case FI_INT8: ref_int8_t(op, t, s, c); break;
	case FI_UINT8: ref_uint8_t(op, t, s, c); break;
	case FI_INT16: ref_int16_t(op, t, s, c); break;
	case FI_UINT16: ref_uint16_t(op, t, s, c); break;
	case FI_INT32: ref_int32_t(op, t, s, c); break;
	case FI_UINT32: ref_uint32_t(op, t, s, c); break;
	case FI_INT64: ref_int64_t(op, t, s, c); break;
	case FI_UINT64: ref_uint64_t(op, t, s, c); break;
	case FI_FLOAT: ref_float(op, t, s, c); break;
	case FI_DOUBLE: ref_double(op, t, s, c); break;
	case FI_FLOAT_COMPLEX: ref_cfloat(op, t, s, c); break;
	case FI_INT128: ref_i128(op, t, s, c); break;
	case FI_UINT128: ref_u128(op, t, s, c); break;
	}
}

/* ---- every op x datatype x form --------------------------------------- */

/* The forms of each family: 0 plain, 1 v (two iocs), 2 msg (two local
 * iocs, two target segments), 3 inject (fi_atomic family only). */
static ssize_t post_form(struct end *a, enum kind k, int form, int op, int dt, void *src, void *cmp, void *res,
			 void *ctx)
{
	size_t sz = dt_size(dt), n1 = 2, n2 = N - 2;
	unsigned char *s = src, *c = cmp, *r = res;
	struct fi_ioc iov[2] = {{s, n1}, {s + n1 * sz, n2}};
	struct fi_ioc cv[2] = {{c, n1}, {c + n1 * sz, n2}};
	struct fi_ioc rv[2] = {{r, n1}, {r + n1 * sz, n2}};
	struct fi_rma_ioc rma[2] = {{OFF, n1, KEY_RW}, {OFF + n1 * sz, n2, KEY_RW}};
	struct fi_msg_atomic m = {.msg_iov = iov, .iov_count = 2, .addr = a->peer, .rma_iov = rma,
				  .rma_iov_count = 2, .datatype = dt, .op = op, .context = ctx};
	switch (k) {
	case K_WRITE:
		switch (form) {
		case 0: return fi_atomic(a->ep, s, N, NULL, a->peer, OFF, KEY_RW, dt, op, ctx);
		case 1: return fi_atomicv(a->ep, iov, NULL, 2, a->peer, OFF, KEY_RW, dt, op, ctx);
		case 2: return fi_atomicmsg(a->ep, &m, FI_COMPLETION);
		default: return fi_inject_atomic(a->ep, s, N, a->peer, OFF, KEY_RW, dt, op);
		}
	case K_FETCH:
		switch (form) {
		case 0: return fi_fetch_atomic(a->ep, s, N, NULL, r, NULL, a->peer, OFF, KEY_RW, dt, op, ctx);
		case 1: return fi_fetch_atomicv(a->ep, iov, NULL, 2, rv, NULL, 2, a->peer, OFF, KEY_RW, dt, op, ctx);
		default: return fi_fetch_atomicmsg(a->ep, &m, rv, NULL, 2, FI_COMPLETION);
		}
	default:
		switch (form) {
		case 0:
			return fi_compare_atomic(a->ep, s, N, NULL, c, NULL, r, NULL, a->peer, OFF, KEY_RW, dt, op, ctx);
		case 1:
			return fi_compare_atomicv(a->ep, iov, NULL, 2, cv, NULL, 2, rv, NULL, 2, a->peer, OFF, KEY_RW,
						  dt, op, ctx);
		default: return fi_compare_atomicmsg(a->ep, &m, cv, NULL, 2, rv, NULL, 2, FI_COMPLETION);
		}
	}
}

static const char *form_name(enum kind k, int form)
{
	static const char *n[3][4] = {{"fi_atomic", "fi_atomicv", "fi_atomicmsg", "fi_inject_atomic"},
				      {"fi_fetch_atomic", "fi_fetch_atomicv", "fi_fetch_atomicmsg", ""},
				      {"fi_compare_atomic", "fi_compare_atomicv", "fi_compare_atomicmsg", ""}};
	return n[k][form];
}

/* One operation: target memory and fetched values against the reference. */
static void one(struct end *a, struct end *b, unsigned char *tgt, enum kind k, int form, int op, int dt)
{
	size_t sz = dt_size(dt), len = N * sz;
	unsigned char t0[N * MAXSZ], s[N * MAXSZ], c[N * MAXSZ], want[N * MAXSZ];
	unsigned char res[N * MAXSZ + 16];
	struct fi_cq_tagged_entry ce;
	struct fi_cq_err_entry err = {0};
	fill_all(dt, t0, s, c);
	memset(tgt, GUARD, REG);
	memcpy(tgt + OFF, t0, len);
	memset(res, 0xee, sizeof(res));
	memcpy(want, t0, len);
	reference(op, dt, want, s, c);
	uint64_t before = fi_cntr_read(k == K_WRITE ? c_write : c_read);
	ssize_t r = POST(post_form(a, k, form, op, dt, s, c, res, &ce), a, b);
	if (r)
		FAIL_AT("%s op %d dt %d: %zd", form_name(k, form), op, dt, r);
	if (form == 3) { /* inject: no completion; the counter says when */
		double deadline = now_sec() + TO * rf_time_scale();
		while (fi_cntr_read(c_write) == before && now_sec() < deadline)
			poke(a, b);
	} else {
		int got = rma_comp(a, b, &ce, &err);
		if (got != 1)
			FAIL_AT("%s op %d dt %d: completion %d err %d", form_name(k, form), op, dt, got, err.err);
		CHECK_EQ(ce.flags, FI_ATOMIC | (k == K_WRITE ? FI_WRITE : FI_READ));
		CHECK(ce.op_context == &ce);
	}
	CHECK_EQ(fi_cntr_read(k == K_WRITE ? c_write : c_read), before + 1);
	if (memcmp(tgt + OFF, want, len))
		FAIL_AT("%s op %d dt %d: target differs from the reference", form_name(k, form), op, dt);
	if (!all_bytes(tgt, OFF, GUARD) || !all_bytes(tgt + OFF + len, REG - OFF - len, GUARD))
		FAIL_AT("%s op %d dt %d: guard bytes changed", form_name(k, form), op, dt);
	if (k != K_WRITE && memcmp(res, t0, len))
		FAIL_AT("%s op %d dt %d: fetched values differ from the former target", form_name(k, form), op, dt);
	if (!all_bytes(res + (k == K_WRITE ? 0 : len), sizeof(res) - (k == K_WRITE ? 0 : len), 0xee))
		FAIL_AT("%s op %d dt %d: result buffer written beyond its values", form_name(k, form), op, dt);
}

TEST(every_op_every_type)
{
	struct end a, b;
	unsigned char *tgt = rma_region(REG);
	struct fid_mr *mr;
	int ran = 0;
	CHECK(tgt);
	CHECK_OK(rma_pair_open(&a, &b, FI_MSG | FI_ATOMIC, 0, 1));
	CHECK_OK(fi_mr_reg(b.domain, tgt, REG, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, KEY_RW, 0, &mr, NULL));
	for (int k = K_WRITE; k <= K_COMPARE; k++) {
		uint64_t qflags = k == K_WRITE ? 0 : k == K_FETCH ? FI_FETCH_ATOMIC : FI_COMPARE_ATOMIC;
		for (int op = 0; op <= FI_ATOMIC_OP_LAST; op++) {
			for (int dt = 0; dt <= FI_UINT128 + 1; dt++) {
				size_t count = 0;
				struct fi_atomic_attr attr = {0};
				int v = k == K_WRITE ? fi_atomicvalid(a.ep, dt, op, &count)
				      : k == K_FETCH ? fi_fetch_atomicvalid(a.ep, dt, op, &count)
						     : fi_compare_atomicvalid(a.ep, dt, op, &count);
				int q = fi_query_atomic(a.domain, dt, op, &attr, qflags);
				if (!expect_valid(k, op, dt)) {
					if (v != -FI_EOPNOTSUPP || q != -FI_EOPNOTSUPP)
						FAIL_AT("kind %d op %d dt %d: valid %d query %d", k, op, dt, v, q);
					continue;
				}
				if (v || q)
					FAIL_AT("kind %d op %d dt %d: valid %d query %d", k, op, dt, v, q);
				CHECK_EQ(count, 4096 / dt_size(dt));
				CHECK_EQ(attr.count, count);
				CHECK_EQ(attr.size, dt_size(dt));
				for (int form = 0; form < (k == K_WRITE ? 4 : 3); form++) {
					one(&a, &b, tgt, k, form, op, dt);
					if (h_cur_failed)
						return;
					ran++;
				}
			}
		}
	}
	/* Supported pairs: 132 for fi_atomic (4 forms), 145 for the fetch
	 * family, 84 for compare (3 forms each). */
	CHECK_EQ(ran, 4 * 132 + 3 * 145 + 3 * 84);
	/* The target counted every operation: reads (FI_ATOMIC_READ) apart. */
	CHECK_EQ(fi_cntr_read(c_rread), 3 * 13);
	CHECK_EQ(fi_cntr_read(c_rwrite), ran - 3 * 13);
	fi_close(&mr->fid);
	rma_pair_close(&a, &b);
	munmap(tgt, REG);
}

/* Remote CQ data with an atomic: an entry at the target after the update. */
TEST(remote_cq_data)
{
	struct end a, b;
	unsigned char *tgt = rma_region(REG);
	struct fid_mr *mr;
	CHECK(tgt);
	CHECK_OK(rma_pair_open(&a, &b, FI_MSG | FI_ATOMIC, 0, 0));
	CHECK_OK(fi_mr_reg(b.domain, tgt, REG, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, KEY_RW, 0, &mr, NULL));
	memset(tgt, 0, REG);
	uint32_t add[2] = {5, 7};
	struct fi_ioc iov = {add, 2};
	struct fi_rma_ioc rma = {8, 2, KEY_RW};
	struct fi_msg_atomic m = {.msg_iov = &iov, .iov_count = 1, .addr = a.peer, .rma_iov = &rma,
				  .rma_iov_count = 1, .datatype = FI_UINT32, .op = FI_SUM, .context = &m,
				  .data = 0xfeed};
	struct fi_cq_tagged_entry c;
	CHECK_EQ(POST(fi_atomicmsg(a.ep, &m, FI_REMOTE_CQ_DATA | FI_DELIVERY_COMPLETE), &a, &b), 0);
	CHECK_EQ(rma_comp(&b, &a, &c, NULL), 1);
	CHECK_EQ(c.flags, FI_ATOMIC | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
	CHECK_EQ(c.data, 0xfeed);
	CHECK_EQ(((uint32_t *)tgt)[2], 5);
	CHECK_EQ(((uint32_t *)tgt)[3], 7);
	CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
	CHECK(c.op_context == &m);
	fi_close(&mr->fid);
	rma_pair_close(&a, &b);
	munmap(tgt, REG);
}

/* One refused operation: its error completion, and nothing changed. */
static void refused(struct end *a, struct end *b, enum kind k, int op, uint64_t addr, uint64_t key, int want,
		    unsigned char *tgt)
{
	uint64_t s[4] = {1, 2, 3, 4}, cmpv[4] = {0}, res[4];
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err = {0};
	ssize_t r;
	memset(tgt, GUARD, REG);
	memset(res, 0xee, sizeof(res));
	if (k == K_WRITE)
		r = POST(fi_atomic(a->ep, s, 4, NULL, a->peer, addr, key, FI_UINT64, op, res), a, b);
	else if (k == K_FETCH)
		r = POST(fi_fetch_atomic(a->ep, s, 4, NULL, res, NULL, a->peer, addr, key, FI_UINT64, op, res), a, b);
	else
		r = POST(fi_compare_atomic(a->ep, s, 4, NULL, cmpv, NULL, res, NULL, a->peer, addr, key, FI_UINT64, op,
					   res),
			 a, b);
	CHECK_EQ(r, 0);
	CHECK_EQ(rma_comp(a, b, &c, &err), -FI_EAVAIL);
	CHECK_EQ(err.err, want);
	CHECK(err.op_context == res);
	CHECK_EQ(err.flags, FI_ATOMIC | (k == K_WRITE ? FI_WRITE : FI_READ));
	CHECK(all_bytes(tgt, REG, GUARD));
	CHECK(all_bytes((unsigned char *)res, sizeof(res), 0xee));
}

#define REFUSED(...)                                                  \
	do {                                                          \
		refused(__VA_ARGS__);                                 \
		if (h_cur_failed)                                     \
			FAIL_AT("refused(%s)", #__VA_ARGS__);         \
	} while (0)

TEST(refusals)
{
	struct end a, b;
	unsigned char *rw = rma_region(REG), *ro = rma_region(REG), *wo = rma_region(REG);
	struct fid_mr *mrw, *mro, *mwo;
	CHECK(rw && ro && wo);
	CHECK_OK(rma_pair_open(&a, &b, FI_MSG | FI_ATOMIC, 0, 1));
	CHECK_OK(fi_mr_reg(b.domain, rw, REG, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, KEY_RW, 0, &mrw, NULL));
	CHECK_OK(fi_mr_reg(b.domain, ro, REG, FI_REMOTE_READ, 0, KEY_RO, 0, &mro, NULL));
	CHECK_OK(fi_mr_reg(b.domain, wo, REG, FI_REMOTE_WRITE, 0, KEY_WO, 0, &mwo, NULL));
	/* Unknown key: -FI_EINVAL. */
	REFUSED(&a, &b, K_WRITE, FI_SUM, 0, 0x9999, FI_EINVAL, rw);
	REFUSED(&a, &b, K_FETCH, FI_SUM, 0, 0x9999, FI_EINVAL, rw);
	REFUSED(&a, &b, K_COMPARE, FI_CSWAP, 0, 0x9999, FI_EINVAL, rw);
	/* Out of the region: straddling its end, past it, huge addresses. */
	REFUSED(&a, &b, K_WRITE, FI_SUM, REG - 16, KEY_RW, FI_EACCES, rw);
	REFUSED(&a, &b, K_FETCH, FI_ATOMIC_READ, REG, KEY_RW, FI_EACCES, rw);
	REFUSED(&a, &b, K_COMPARE, FI_CSWAP, UINT64_MAX - 8, KEY_RW, FI_EACCES, rw);
	/* Rights: an update needs FI_REMOTE_WRITE, FI_ATOMIC_READ needs
	 * FI_REMOTE_READ, fetching updates and compares need both. */
	REFUSED(&a, &b, K_WRITE, FI_SUM, 0, KEY_RO, FI_EACCES, ro);
	REFUSED(&a, &b, K_FETCH, FI_ATOMIC_READ, 0, KEY_WO, FI_EACCES, wo);
	REFUSED(&a, &b, K_FETCH, FI_SUM, 0, KEY_RO, FI_EACCES, ro);
	REFUSED(&a, &b, K_FETCH, FI_SUM, 0, KEY_WO, FI_EACCES, wo);
	REFUSED(&a, &b, K_COMPARE, FI_CSWAP, 0, KEY_RO, FI_EACCES, ro);
	CHECK_EQ(fi_cntr_readerr(c_write), 3);
	CHECK_EQ(fi_cntr_readerr(c_read), 8);
	CHECK_EQ(fi_cntr_read(c_rwrite) + fi_cntr_read(c_rread), 0);
	/* Refused at post (fi_atomic(3) ERRORS): operations and datatypes the
	 * table does not have, the wrong family, an unknown value. */
	uint64_t v[2] = {1, 2}, res[2];
	long double ld = 1;
	CHECK_EQ(fi_atomic(a.ep, v, 1, NULL, a.peer, 0, KEY_RW, FI_UINT64, FI_ATOMIC_READ, NULL), -FI_EOPNOTSUPP);
	CHECK_EQ(fi_atomic(a.ep, v, 1, NULL, a.peer, 0, KEY_RW, FI_UINT64, FI_CSWAP, NULL), -FI_EOPNOTSUPP);
	CHECK_EQ(fi_atomic(a.ep, v, 1, NULL, a.peer, 0, KEY_RW, FI_DOUBLE, FI_BOR, NULL), -FI_EOPNOTSUPP);
	CHECK_EQ(fi_atomic(a.ep, &ld, 1, NULL, a.peer, 0, KEY_RW, FI_LONG_DOUBLE, FI_SUM, NULL), -FI_EOPNOTSUPP);
	CHECK_EQ(fi_atomic(a.ep, v, 1, NULL, a.peer, 0, KEY_RW, 99, FI_SUM, NULL), -FI_EOPNOTSUPP);
	CHECK_EQ(fi_atomic(a.ep, v, 1, NULL, a.peer, 0, KEY_RW, FI_UINT64, 99, NULL), -FI_EOPNOTSUPP);
	CHECK_EQ(fi_fetch_atomic(a.ep, v, 1, NULL, res, NULL, a.peer, 0, KEY_RW, FI_UINT64, FI_MSWAP, NULL),
		 -FI_EOPNOTSUPP);
	CHECK_EQ(fi_compare_atomic(a.ep, v, 1, NULL, v, NULL, res, NULL, a.peer, 0, KEY_RW, FI_UINT64, FI_SUM, NULL),
		 -FI_EOPNOTSUPP);
	CHECK_EQ(fi_compare_atomic(a.ep, v, 1, NULL, v, NULL, res, NULL, a.peer, 0, KEY_RW, FI_FLOAT_COMPLEX,
				   FI_CSWAP_LT, NULL),
		 -FI_EOPNOTSUPP);
	struct fi_atomic_attr attr;
	CHECK_EQ(fi_query_atomic(a.domain, FI_UINT64, FI_SUM, &attr, FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC),
		 -FI_EBADFLAGS);
	/* More than one call may carry (count = 4096 / size): -FI_EMSGSIZE. */
	uint64_t *big = calloc(513, sizeof(uint64_t));
	CHECK(big);
	CHECK_EQ(fi_atomic(a.ep, big, 513, NULL, a.peer, 0, KEY_RW, FI_UINT64, FI_SUM, NULL), -FI_EMSGSIZE);
	CHECK_EQ(fi_inject_atomic(a.ep, big, 513, a.peer, 0, KEY_RW, FI_UINT64, FI_SUM), -FI_EMSGSIZE);
	free(big);
	CHECK_EQ(fi_cntr_read(c_rwrite) + fi_cntr_read(c_rread), 0);
	fi_close(&mrw->fid);
	fi_close(&mro->fid);
	fi_close(&mwo->fid);
	rma_pair_close(&a, &b);
	munmap(rw, REG);
	munmap(ro, REG);
	munmap(wo, REG);
}

/* An endpoint opened without FI_ATOMIC neither initiates nor serves them. */
TEST(endpoint_without_atomics)
{
	struct end a, b;
	unsigned char *tgt = rma_region(REG);
	struct fid_mr *mr;
	uint64_t v = 1;
	CHECK(tgt);
	CHECK_OK(rma_pair_open(&a, &b, FI_MSG | FI_RMA, 0, 0));
	CHECK_EQ(a.info->caps & FI_ATOMIC, 0);
	CHECK_EQ(fi_atomic(a.ep, &v, 1, NULL, a.peer, 0, KEY_RW, FI_UINT64, FI_SUM, NULL), -FI_EOPNOTSUPP);
	rma_pair_close(&a, &b);
	/* A target without FI_ATOMIC refuses (FI_EACCES), memory untouched. */
	struct end_opts o = {.caps = FI_MSG | FI_ATOMIC, .tx_op_flags = FI_DELIVERY_COMPLETE};
	CHECK_OK(end_open(&a, &o));
	o.caps = FI_MSG | FI_RMA;
	CHECK_OK(end_open(&b, &o));
	CHECK_OK(ends_connect(&a, &b));
	CHECK_OK(fi_mr_reg(b.domain, tgt, REG, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, KEY_RW, 0, &mr, NULL));
	memset(tgt, GUARD, REG);
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err = {0};
	CHECK_EQ(POST(fi_atomic(a.ep, &v, 1, NULL, a.peer, 0, KEY_RW, FI_UINT64, FI_SUM, &v), &a, &b), 0);
	CHECK_EQ(rma_comp(&a, &b, &c, &err), -FI_EAVAIL);
	CHECK_EQ(err.err, FI_EACCES);
	CHECK(all_bytes(tgt, REG, GUARD));
	fi_close(&mr->fid);
	rma_pair_close(&a, &b);
	munmap(tgt, REG);
}

/*
 * Completion levels (fi_cq(3), fi_atomic(3) "Completions"; docs/rma.md): a
 * non-fetching atomic (FI_SUM) posted with no level, FI_INJECT_COMPLETE,
 * FI_TRANSMIT_COMPLETE or FI_DELIVERY_COMPLETE, the endpoints' default
 * level being none. With the initiator progressing alone: on shm (auto:
 * same host) every level but delivery complete has completed already (the
 * record is in the target's ring), on tcp no level and inject complete
 * (once written to the socket), the word changes once the target
 * progresses; delivery complete, and on tcp a named transmit complete,
 * has not, and the word holds the sum when the entry is read. A
 * fetch waits for its value at any level. A refused sum that completed at
 * transmit is a success at the initiator (nobody can tell it afterwards):
 * the target changes nothing.
 */
TEST(completion_levels)
{
	static const uint64_t levels[] = {0, FI_INJECT_COMPLETE, FI_TRANSMIT_COMPLETE, FI_DELIVERY_COMPLETE};
	struct end a, b;
	unsigned char *tgt = rma_region(REG);
	struct fid_mr *mr;
	int tcp = !strcmp(rf_transport(), "tcp");
	CHECK(tgt);
	rma_tx_op_flags = 0;
	int r = rma_pair_open(&a, &b, FI_MSG | FI_ATOMIC, 0, 0);
	rma_tx_op_flags = FI_DELIVERY_COMPLETE;
	CHECK_OK(r);
	CHECK_OK(fi_mr_reg(b.domain, tgt, REG, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, KEY_RW, 0, &mr, NULL));
	memset(tgt, 0, REG);
	volatile uint64_t *word = (volatile uint64_t *)(tgt + OFF);
	uint64_t one = 1, res = 0;
	struct fi_cq_tagged_entry c;
	/* Connected first (on tcp the first record waits for the handshake,
	 * which needs the target): a read of the word. */
	CHECK_EQ(POST(fi_fetch_atomic(a.ep, &one, 1, NULL, &res, NULL, a.peer, OFF, KEY_RW, FI_UINT64,
				      FI_ATOMIC_READ, &res),
		      &a, &b),
		 0);
	CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
	CHECK_EQ(res, 0);
	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		uint64_t level = levels[i];
		struct fi_ioc iov = {&one, 1};
		struct fi_rma_ioc rma = {OFF, 1, KEY_RW};
		struct fi_msg_atomic m = {.msg_iov = &iov, .iov_count = 1, .addr = a.peer, .rma_iov = &rma,
					  .rma_iov_count = 1, .datatype = FI_UINT64, .op = FI_SUM, .context = &m};
		CHECK_EQ(POST(fi_atomicmsg(a.ep, &m, FI_COMPLETION | level), &a, NULL), 0);
		for (int k = 0; k < 200; k++)
			poke1(&a);
		int early = a.nstash > 0;
		int must_wait = level == FI_DELIVERY_COMPLETE || (tcp && level == FI_TRANSMIT_COMPLETE);
		if (early && must_wait)
			FAIL_AT("sum at level 0x%" PRIx64 ": completed before the target took it", level);
		if (!early && !must_wait)
			FAIL_AT("sum at level 0x%" PRIx64 ": not complete once %s", level,
				tcp ? "written" : "in the target's ring");
		if (early && *word != i)
			FAIL_AT("sum at level 0x%" PRIx64 ": the target took it without progress", level);
		CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
		CHECK(c.op_context == &m);
		CHECK_EQ(c.flags, FI_ATOMIC | FI_WRITE);
		if (must_wait && *word != i + 1)
			FAIL_AT("sum at level 0x%" PRIx64 ": completed before the target did it", level);
		double deadline = now_sec() + TO * rf_time_scale();
		while (*word != i + 1 && now_sec() < deadline)
			poke(&a, &b);
		CHECK_EQ(*word, i + 1);
	}
	/* A fetch: its value is here when it completes, at any level. */
	struct fi_ioc iov = {&one, 1}, rv = {&res, 1};
	struct fi_rma_ioc rma = {OFF, 1, KEY_RW};
	struct fi_msg_atomic m = {.msg_iov = &iov, .iov_count = 1, .addr = a.peer, .rma_iov = &rma,
				  .rma_iov_count = 1, .datatype = FI_UINT64, .op = FI_SUM, .context = &m};
	CHECK_EQ(POST(fi_fetch_atomicmsg(a.ep, &m, &rv, NULL, 1, FI_COMPLETION | FI_INJECT_COMPLETE), &a, NULL), 0);
	for (int k = 0; k < 200; k++)
		poke1(&a);
	CHECK_EQ(a.nstash, 0);
	CHECK_EQ(rma_comp(&a, &b, &c, NULL), 1);
	CHECK_EQ(c.flags, FI_ATOMIC | FI_READ);
	CHECK_EQ(res, 4);
	CHECK_EQ(*word, 5);
	/* Refused (no such key) with no level named: complete at transmit (shm)
	 * or once written (tcp), before the refusal; the target changed
	 * nothing. */
	rma.key = 0x9999;
	CHECK_EQ(POST(fi_atomicmsg(a.ep, &m, FI_COMPLETION), &a, &b), 0);
	struct fi_cq_err_entry err = {0};
	r = rma_comp(&a, &b, &c, &err);
	CHECK_EQ(r, 1);
	for (int k = 0; k < 200; k++)
		poke(&a, &b);
	CHECK_EQ(*word, 5);
	CHECK(all_bytes(tgt, OFF, 0));
	CHECK(all_bytes(tgt + OFF + 8, REG - OFF - 8, 0));
	fi_close(&mr->fid);
	rma_pair_close(&a, &b);
	munmap(tgt, REG);
}

/* Two initiators add to one word of one target: every addition counts. */
TEST(two_initiators_one_word)
{
	struct end a, b, c;
	enum { K = 2000 };
	uint64_t *word = (uint64_t *)rma_region(REG);
	struct fid_mr *mr;
	struct end_opts o = {.caps = FI_MSG | FI_ATOMIC};
	CHECK(word);
	CHECK_OK(end_open(&a, &o));
	CHECK_OK(end_open(&b, &o));
	CHECK_OK(end_open(&c, &o));
	CHECK_OK(ends_connect(&a, &b));
	fi_addr_t c_to_b;
	CHECK_EQ(fi_av_insert(c.av, b.addr, 1, &c_to_b, 0, NULL), 1);
	CHECK_OK(fi_mr_reg(b.domain, word, REG, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, KEY_RW, 0, &mr, NULL));
	uint64_t one = 1, old[2 * K];
	int na = 0, nc = 0, done = 0;
	struct fi_cq_tagged_entry ce;
	double deadline = now_sec() + 60 * rf_time_scale();
	while (done < 2 * K && now_sec() < deadline) {
		/* a adds; c fetches and adds: interleaved, both in flight. */
		if (na < K && fi_atomic(a.ep, &one, 1, NULL, a.peer, 0, KEY_RW, FI_UINT64, FI_SUM, NULL) == 0)
			na++;
		if (nc < K && fi_fetch_atomic(c.ep, &one, 1, NULL, &old[nc], NULL, c_to_b, 0, KEY_RW, FI_UINT64,
					      FI_SUM, NULL) == 0)
			nc++;
		fi_cq_read(b.cq, &ce, 1);
		while (fi_cq_read(a.cq, &ce, 1) == 1)
			done++;
		while (fi_cq_read(c.cq, &ce, 1) == 1)
			done++;
	}
	CHECK_EQ(done, 2 * K);
	/* a's sums may have completed once written (tcp, no level named:
	 * docs/rma.md, Completions), before b took them all. */
	while (*(volatile uint64_t *)word != 2 * K && now_sec() < deadline)
		fi_cq_read(b.cq, &ce, 1);
	CHECK_EQ(*word, 2 * K);
	/* Every fetched value is distinct: no two additions saw the same word. */
	for (int i = 1; i < K; i++)
		CHECK(old[i] > old[i - 1]);
	fi_close(&mr->fid);
	end_close(&a);
	end_close(&b);
	end_close(&c);
	munmap(word, REG);
}

/* Two targets in one process (two domains) serve atomics on the same word,
 * each progressed by its own thread: the targets' executions exclude each
 * other (the process-wide lock), so no addition is lost. */
struct driver {
	struct end *a, *b;
	int k, done;
};

static void *drive(void *arg)
{
	struct driver *d = arg;
	uint64_t one = 1;
	int posted = 0;
	struct fi_cq_tagged_entry ce;
	double deadline = now_sec() + 60 * rf_time_scale();
	while (d->done < d->k && now_sec() < deadline) {
		while (posted < d->k && posted - d->done < 64 &&
		       fi_atomic(d->a->ep, &one, 1, NULL, d->a->peer, 0, KEY_RW, FI_UINT64, FI_SUM, NULL) == 0)
			posted++;
		fi_cq_read(d->b->cq, &ce, 1);
		while (fi_cq_read(d->a->cq, &ce, 1) == 1)
			d->done++;
	}
	return NULL;
}

TEST(two_targets_one_word)
{
	struct end a1, b1, a2, b2;
	enum { K = 20000 };
	uint64_t *word = (uint64_t *)rma_region(REG);
	struct fid_mr *m1, *m2;
	CHECK(word);
	CHECK_OK(rma_pair_open(&a1, &b1, FI_MSG | FI_ATOMIC, 0, 0));
	CHECK_OK(rma_pair_open(&a2, &b2, FI_MSG | FI_ATOMIC, 0, 0));
	CHECK_OK(fi_mr_reg(b1.domain, word, REG, FI_REMOTE_WRITE, 0, KEY_RW, 0, &m1, NULL));
	CHECK_OK(fi_mr_reg(b2.domain, word, REG, FI_REMOTE_WRITE, 0, KEY_RW, 0, &m2, NULL));
	int k = getenv("RF_TIMEOUT_SCALE") ? K / 20 : K; /* memcheck: fewer */
	struct driver d1 = {&a1, &b1, k, 0}, d2 = {&a2, &b2, k, 0};
	pthread_t t1, t2;
	CHECK_OK(pthread_create(&t1, NULL, drive, &d1));
	CHECK_OK(pthread_create(&t2, NULL, drive, &d2));
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	CHECK_EQ(d1.done, k);
	CHECK_EQ(d2.done, k);
	CHECK_EQ(*word, 2 * (uint64_t)k);
	fi_close(&m1->fid);
	fi_close(&m2->fid);
	end_close(&a1);
	end_close(&b1);
	end_close(&a2);
	end_close(&b2);
	munmap(word, REG);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	RUN(every_op_every_type);
	RUN(remote_cq_data);
	RUN(refusals);
	RUN(endpoint_without_atomics);
	RUN(completion_levels);
	RUN(two_initiators_one_word);
	RUN(two_targets_one_word);
	return harness_done();
}
