# rustfab — build, install, demo and test a libfabric provider written in Rust.
# `make demo` shows it working; `make test` runs every test (see README).

CARGO    ?= cargo
CC       ?= cc
BUILD    := build
LIB      := $(BUILD)/librustfab-fi.so
LIBDIR   := $(shell pkg-config --variable=libdir libfabric 2>/dev/null || echo /usr/lib/x86_64-linux-gnu)
PROVDIR  ?= $(LIBDIR)/libfabric
CFLAGS   ?= -O2 -g -Wall -Wextra -Werror -Wno-unused-parameter
TIMEOUT  ?= timeout
export FI_PROVIDER_PATH := $(CURDIR)/$(BUILD)

.PHONY: all lib install uninstall demo test unit abi-check exports-check header header-check \
        c-tests c-tests-tcp examples netns fabtests mpi bench fmt lint clean panic-test

all: lib

# Cargo names the cdylib librustfab.so; libfabric loads only files ending in
# "fi.so" from FI_PROVIDER_PATH, so the build directory gets the conventional
# name lib<prov>-fi.so. The copy is renamed into place: processes that have
# the old library mapped (a test or benchmark still running) keep their
# file instead of seeing its code overwritten under them.
lib:
	$(CARGO) build --release --lib
	@mkdir -p $(BUILD)
	cp -f target/release/librustfab.so $(LIB).tmp && mv -f $(LIB).tmp $(LIB)

install: lib
	install -d $(DESTDIR)$(PROVDIR)
	install -m 0755 $(LIB) $(DESTDIR)$(PROVDIR)/librustfab-fi.so

uninstall:
	rm -f $(DESTDIR)$(PROVDIR)/librustfab-fi.so

demo: lib $(BUILD)/bench/rf_bench
	@echo "== fi_info -p rustfab (FI_PROVIDER_PATH=$(FI_PROVIDER_PATH))"
	$(TIMEOUT) 30 fi_info -p rustfab
	@echo "== ping-pong between two processes over rustfab shm (one-way latency, bandwidth)"
	$(TIMEOUT) 120 $(BUILD)/bench/rf_bench -p rustfab -d shm -s 64,4k,1m -i 2000

test: lint unit abi-check exports-check header-check c-tests netns panic-test mpi

unit:
	$(CARGO) test --release

# The ABI mirror proof: the same table, printed by Rust and by a C program
# compiled against the installed <rdma/*.h>, must be identical. The perturbed
# run proves the comparison can fail.
abi-check:
	@mkdir -p $(BUILD)
	$(CARGO) run --release -q --bin abi-dump -- c > $(BUILD)/abi_dump.c
	$(CC) $(CFLAGS) -o $(BUILD)/abi_dump $(BUILD)/abi_dump.c
	$(BUILD)/abi_dump > $(BUILD)/abi.c.txt
	$(CARGO) run --release -q --bin abi-dump -- rust > $(BUILD)/abi.rust.txt
	diff -u $(BUILD)/abi.c.txt $(BUILD)/abi.rust.txt
	$(CARGO) run --release -q --bin abi-dump -- rust --perturb > $(BUILD)/abi.perturbed.txt
	@if diff -q $(BUILD)/abi.c.txt $(BUILD)/abi.perturbed.txt >/dev/null; then \
	  echo "abi-check: a perturbed mirror was not detected"; exit 1; fi
	@echo "abi-check: $$(grep -c '^STRUCT' $(BUILD)/abi.c.txt) structs, $$(grep -c 'FIELD' $(BUILD)/abi.c.txt) fields, $$(grep -c '^CONST' $(BUILD)/abi.c.txt) constants match the installed headers"

# Only fi_prov_ini may be exported.
exports-check: lib
	@syms=$$(nm -D --defined-only $(LIB) | awk '{print $$3}' | sort -u); \
	if [ "$$syms" != "fi_prov_ini" ]; then echo "exports-check: unexpected exports:"; echo "$$syms"; exit 1; fi; \
	echo "exports-check: only fi_prov_ini is exported"

header:
	cbindgen --config cbindgen.toml src/capi.rs -o include/rustfab.h 2>/dev/null

header-check:
	@cbindgen --config cbindgen.toml src/capi.rs -o $(BUILD)/rustfab.h.new 2>/dev/null
	diff -u include/rustfab.h $(BUILD)/rustfab.h.new
	@echo "header-check: include/rustfab.h is up to date"

fmt:
	$(CARGO) fmt

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --release --all-targets -- -D warnings

clean:
	$(CARGO) clean
	rm -rf $(BUILD)

# ---- C tests: every c-tests/test_*.c is one program, linked only to libfabric.
C_TEST_SRCS := $(wildcard c-tests/test_*.c)
C_TEST_BINS := $(patsubst c-tests/%.c,$(BUILD)/c-tests/%,$(C_TEST_SRCS))

$(BUILD)/c-tests/%: c-tests/%.c c-tests/harness.h c-tests/rdm_common.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lfabric -lpthread

c-tests: lib $(C_TEST_BINS)
	c-tests/run.sh $(BUILD)/c-tests
	$(MAKE) --no-print-directory c-tests-tcp
	$(MAKE) --no-print-directory examples

# The transport-parametrized RDM suite again, over tcp (test_tcp always runs
# over tcp). Endpoints bound to a wildcard advertise loopback here, so the
# tests' traffic stays on 127.0.0.1 whatever interfaces the host has.
c-tests-tcp: lib $(BUILD)/c-tests/test_rdm $(BUILD)/c-tests/test_threads $(BUILD)/c-tests/test_buffered
	@mkdir -p $(BUILD)/c-tests-tcp
	ln -sf ../c-tests/test_rdm $(BUILD)/c-tests-tcp/test_rdm
	ln -sf ../c-tests/test_threads $(BUILD)/c-tests-tcp/test_threads
	ln -sf ../c-tests/test_buffered $(BUILD)/c-tests-tcp/test_buffered
	RF_TRANSPORT=tcp FI_RUSTFAB_IFACE=lo c-tests/run.sh $(BUILD)/c-tests-tcp
	RF_TRANSPORT=auto FI_RUSTFAB_IFACE=lo c-tests/run.sh $(BUILD)/c-tests-tcp

# ---- examples shown in the README (c-tests/examples/*.c): built and run
# over every transport by `make c-tests`; each exits 0 on success.
EXAMPLE_SRCS := $(wildcard c-tests/examples/*.c)
EXAMPLE_BINS := $(patsubst c-tests/examples/%.c,$(BUILD)/examples/%,$(EXAMPLE_SRCS))

$(BUILD)/examples/%: c-tests/examples/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lfabric

examples: lib $(EXAMPLE_BINS)
	@for e in $(EXAMPLE_BINS); do for t in shm tcp auto; do \
	  echo "== $$(basename $$e) ($$t)"; \
	  RF_TRANSPORT=$$t FI_RUSTFAB_IFACE=lo FI_PROVIDER=rustfab $(TIMEOUT) 60 $$e || exit 1; \
	done; done

# ---- between hosts: two network namespaces joined by a veth pair, one rustfab
# process in each (needs root; prints SKIP and succeeds without it).
$(BUILD)/netns/rdm_pair: c-tests/netns/rdm_pair.c c-tests/netns/oob.h c-tests/harness.h c-tests/rdm_common.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lfabric

$(BUILD)/netns/msg_pair: c-tests/netns/msg_pair.c c-tests/netns/oob.h c-tests/harness.h c-tests/rdm_common.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lfabric

netns: lib $(BUILD)/netns/rdm_pair $(BUILD)/netns/msg_pair
	c-tests/netns/run.sh $(BUILD)

# ---- upstream fabtests (installed separately; see fabtests-integration/run.sh)
FT_SETS ?= foundation cq
fabtests: lib
	fabtests-integration/run.sh shm $(FT_SETS); fabtests-integration/run.sh tcp $(FT_SETS)

# ---- benchmarks: rustfab vs the built-in providers in one run (not part of `test`)
$(BUILD)/bench/rf_bench: c-tests/bench/rf_bench.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -lfabric

bench: lib $(BUILD)/bench/rf_bench
	c-tests/bench/run.sh $(BUILD)/bench/rf_bench

# ---- Open MPI over rustfab (pml cm, mtl ofi)
$(BUILD)/mpi/mpi_test: c-tests/mpi/mpi_test.c
	@mkdir -p $(dir $@)
	mpicc -O2 -Wall -o $@ $<

# The default entry (auto: shm between the ranks of this host) and tcp.
mpi: lib $(BUILD)/mpi/mpi_test
	c-tests/mpi/run.sh $(BUILD)/mpi/mpi_test
	RF_TRANSPORT=tcp c-tests/mpi/run.sh $(BUILD)/mpi/mpi_test

# ---- the panic boundary, proven with a test build (cargo feature panic-test)
panic-test:
	$(CARGO) build --release --lib --features panic-test --target-dir target/panic
	@mkdir -p $(BUILD)/panic
	cp -f target/panic/release/librustfab.so $(BUILD)/panic/librustfab-fi.so.tmp && mv -f $(BUILD)/panic/librustfab-fi.so.tmp $(BUILD)/panic/librustfab-fi.so
	$(CC) $(CFLAGS) -o $(BUILD)/panic/test_panic c-tests/panic/test_panic.c -lfabric
	FI_PROVIDER_PATH=$(CURDIR)/$(BUILD)/panic FI_PROVIDER=rustfab FI_RUSTFAB_TEST_PANIC=fi_cq_read \
		$(TIMEOUT) 60 $(BUILD)/panic/test_panic
