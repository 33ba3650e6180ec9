//! The layout machinery of the C mirror: the tables `abi_structs!` and
//! `abi_consts!` emit (field offsets and sizes, constant values) for the
//! ABI checks (`make abi-check`), and `FI_VERSION`. A leaf: the mirror's
//! files use it, it uses none of them.

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
        pub fn $table() -> Vec<$crate::abi::layout::StructLayout> {
            vec![ $(
                $crate::abi::layout::StructLayout {
                    name: stringify!($name),
                    size: core::mem::size_of::<$name>(),
                    align: core::mem::align_of::<$name>(),
                    fields: vec![ $(
                        $crate::abi::layout::FieldLayout {
                            name: $crate::abi::layout::strip_raw(stringify!($f)),
                            offset: core::mem::offset_of!($name, $f),
                            size: $crate::abi::layout::field_size(|s: &$name| &s.$f),
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
        pub fn $table() -> Vec<$crate::abi::layout::ConstValue> {
            vec![ $( $crate::abi::layout::ConstValue { name: stringify!($name), value: $name as u64 } ),* ]
        }
    };
}
pub(crate) use abi_consts;

/// `FI_VERSION(major, minor)`.
pub const fn fi_version(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}
