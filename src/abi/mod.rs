//! `#[repr(C)]` mirror of the libfabric 1.17 ABI that rustfab uses.
//!
//! No logic lives here. Every struct is declared through [`abi_structs!`] and
//! every constant through [`abi_consts!`]; both macros also emit a layout /
//! value table, and [`all_structs`] / [`all_consts`] gather those tables. The
//! `abi-dump` tool prints the tables and generates a C program that prints the
//! same facts from the installed `<rdma/*.h>`; `make abi-check` diffs the two.
//! A struct cannot be mirrored without being checked, because the macro that
//! defines it is the macro that lists it.
//!
//! C enums are mirrored as plain integers (`u32`/`i32`), never Rust enums:
//! applications may pass values we do not know.

#![allow(non_camel_case_types, non_upper_case_globals, dead_code)]

pub mod consts;
pub mod layout;
pub mod libfabric;
pub mod types;
pub mod v2;

pub use consts::*;
pub use layout::{fi_version, ConstValue, FieldLayout, StructLayout};
pub use types::*;

/// Every mirrored struct (data structures, fid objects and vtables).
pub fn all_structs() -> Vec<StructLayout> {
    let mut v = types::type_layouts();
    v.extend(types::vtable_layouts());
    v
}

/// Every mirrored constant.
pub fn all_consts() -> Vec<ConstValue> {
    consts::const_values()
}

/// The structs and constants libfabric 1.18–2.6 changed (see [`v2`]).
pub fn v2_structs() -> Vec<StructLayout> {
    v2::v2_layouts()
}

/// See [`v2_structs`].
pub fn v2_consts() -> Vec<ConstValue> {
    v2::v2_const_values()
}
