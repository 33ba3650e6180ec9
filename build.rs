fn main() {
    // libfabric may dlclose() the provider at fi_fini() while application
    // threads that called into it still exist; NODELETE keeps our code mapped
    // (ABI.md §1.5, RELIABILITY.md R5).
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    // Link libfabric so that fi_dupinfo/fi_freeinfo bind to the current
    // FABRIC_1.3 versions, not the 1.0 compat ones (ABI.md §2).
    println!("cargo:rustc-link-lib=fabric");
    println!("cargo:rerun-if-changed=build.rs");
}
