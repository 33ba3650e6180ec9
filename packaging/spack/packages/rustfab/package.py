# Spack recipe for rustfab, a libfabric provider written in Rust.
#
# This tree is a Spack package repository of its own: from a checkout,
#
#   spack repo add packaging/spack
#   spack env create -d build/spack && spack env activate build/spack
#   spack develop --path "$PWD" rustfab@main && spack add rustfab@main
#   spack install
#   spack load rustfab        # FI_PROVIDER_PATH now names the provider
#
# The provider goes to <prefix>/lib/libfabric (libfabric's provider
# directory layout), the header to <prefix>/include/rdma, the man page to
# <prefix>/share/man/man7; loading the package prepends the provider
# directory to FI_PROVIDER_PATH, which libfabric (and Open MPI, MPICH over
# it) search for external providers.

from spack.package import *


class Rustfab(MakefilePackage):
    """libfabric provider written in Rust: shared memory between the
    processes of a host, TCP between hosts, and "auto", both behind one
    address; reliable-datagram and connected endpoints, tagged messages,
    RMA, atomics and buffered receives."""

    maintainers("rustfab")
    license("BSD-2-Clause OR GPL-2.0-only")

    # No release is published: build from a checkout with `spack develop`.
    version("main")

    depends_on("rust@1.87:", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("libfabric@1.17:")

    def build(self, spec, prefix):
        make("lib")

    def install(self, spec, prefix):
        make(
            "install",
            f"PROVDIR={prefix.lib.libfabric}",
            f"INCDIR={prefix.include}",
            f"MANDIR={prefix.share.man}",
        )

    def setup_run_environment(self, env):
        env.prepend_path("FI_PROVIDER_PATH", self.prefix.lib.libfabric)
