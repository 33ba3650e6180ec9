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
pub mod libfabric;
pub mod types;
pub mod v2;
pub mod vtables;

pub use consts::*;
pub use types::*;
pub use vtables::*;

/// Offset and size of one field of a mirrored struct.
#[derive(Debug, Clone)]
pub struct FieldLayout {
    pub name: &'static str,
    pub offset: usize,
    pub size: usize,
}

/// Size, alignment and fields of one mirrored struct.
#[derive(Debug, Clone)]
pub struct StructLayout {
    pub name: &'static str,
    pub size: usize,
    pub align: usize,
    pub fields: Vec<FieldLayout>,
}

/// Name and value of one mirrored constant, as C's `(unsigned long long)` cast
/// would print it.
#[derive(Debug, Clone)]
pub struct ConstValue {
    pub name: &'static str,
    pub value: u64,
}

/// Size of the field a projection closure points at.
pub fn field_size<T, F>(_project: impl Fn(&T) -> &F) -> usize {
    core::mem::size_of::<F>()
}

/// `stringify!(r#type)` is "r#type"; C calls the field "type".
pub fn strip_raw(name: &'static str) -> &'static str {
    name.strip_prefix("r#").unwrap_or(name)
}

/// Declares `#[repr(C)]` mirrors and a function `$table()` that lists their
/// layouts.
macro_rules! abi_structs {
    ($table:ident; $( $(#[$m:meta])* struct $name:ident { $( $f:ident : $t:ty ),* $(,)? } )*) => {
        $(
            $(#[$m])*
            #[repr(C)]
            #[derive(Clone, Copy)]
            pub struct $name { $( pub $f: $t ),* }
        )*
        /// Layouts of every struct declared in this module.
        pub fn $table() -> Vec<$crate::abi::StructLayout> {
            vec![ $(
                $crate::abi::StructLayout {
                    name: stringify!($name),
                    size: core::mem::size_of::<$name>(),
                    align: core::mem::align_of::<$name>(),
                    fields: vec![ $(
                        $crate::abi::FieldLayout {
                            name: $crate::abi::strip_raw(stringify!($f)),
                            offset: core::mem::offset_of!($name, $f),
                            size: $crate::abi::field_size(|s: &$name| &s.$f),
                        }
                    ),* ],
                }
            ),* ]
        }
    };
}
pub(crate) use abi_structs;

/// Declares constants and a function `$table()` that lists their values.
macro_rules! abi_consts {
    ($table:ident; $( $name:ident : $t:ty = $v:expr; )*) => {
        $( pub const $name: $t = $v; )*
        /// Values of every constant declared in this module.
        pub fn $table() -> Vec<$crate::abi::ConstValue> {
            vec![ $( $crate::abi::ConstValue { name: stringify!($name), value: $name as u64 } ),* ]
        }
    };
}
pub(crate) use abi_consts;

/// Every mirrored struct (data structures, fid objects and vtables).
pub fn all_structs() -> Vec<StructLayout> {
    let mut v = types::type_layouts();
    v.extend(vtables::vtable_layouts());
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

/// `FI_VERSION(major, minor)`.
pub const fn fi_version(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}
