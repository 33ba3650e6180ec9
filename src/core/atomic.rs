//! Atomic operations (`fi_atomic(3)`) as values: which `enum fi_op` ×
//! `enum fi_datatype` pairs rustfab offers for each kind of call, and the
//! computation a target performs on its memory (element by element, on
//! bytes gathered from the registered region: `core/engine/atomic.rs`
//! gathers, applies and scatters under one lock, docs/rma.md "Atomics").
//!
//! The table is the one libfabric 1.17's built-in sockets provider answers
//! `fi_query_atomic` with on this platform (util's handlers, built with the
//! compiler's atomic builtins): every integer type (8 to 128 bits), `float`
//! and `double` take every operation their kind allows; `float complex`
//! takes the arithmetic and logical ones, `FI_ATOMIC_READ/WRITE`, `FI_CSWAP`
//! and `FI_CSWAP_NE`; the bitwise ones and `FI_MSWAP` are integer only;
//! `double complex`, `long double` and `long double complex` are not
//! offered (-FI_EOPNOTSUPP), as there.
//!
//! Semantics (d = target element, s = operand, c = compare value):
//! `FI_MIN` d = s if d > s; `FI_MAX` d = s if d < s; `FI_SUM`/`FI_PROD`
//! (integers wrap); `FI_LOR`/`FI_LAND`/`FI_LXOR` d = 1 or 0 (a complex
//! value is true unless both parts are 0); `FI_BOR`/`FI_BAND`/`FI_BXOR`;
//! `FI_ATOMIC_READ` d unchanged; `FI_ATOMIC_WRITE` d = s; `FI_CSWAP` d = s
//! if c and d have the same bytes (as util's `__atomic_compare_exchange`);
//! `FI_CSWAP_NE` d = s if c != d; `FI_CSWAP_LE/LT/GE/GT` d = s if c <= / <
//! / >= / > d; `FI_MSWAP` d = (s & c) | (d & !c). Fetching calls return the
//! value d had before.

use crate::abi::*;
use crate::base::error::{Error, Result};
use core::ops::{Add, Mul};

/// Most bytes of operand data one atomic call may carry (the sockets
/// provider's limit too): `fi_atomicvalid` counts are this over the
/// datatype's size.
pub(crate) const ATOMIC_MAX: usize = 4096;

// enum fi_op
pub(crate) const FI_MIN: u32 = 0;
pub(crate) const FI_MAX: u32 = 1;
pub(crate) const FI_SUM: u32 = 2;
pub(crate) const FI_PROD: u32 = 3;
pub(crate) const FI_LOR: u32 = 4;
pub(crate) const FI_LAND: u32 = 5;
pub(crate) const FI_BOR: u32 = 6;
pub(crate) const FI_BAND: u32 = 7;
pub(crate) const FI_LXOR: u32 = 8;
pub(crate) const FI_BXOR: u32 = 9;
pub(crate) const FI_ATOMIC_READ: u32 = 10;
pub(crate) const FI_ATOMIC_WRITE: u32 = 11;
pub(crate) const FI_CSWAP: u32 = 12;
pub(crate) const FI_CSWAP_NE: u32 = 13;
pub(crate) const FI_CSWAP_LE: u32 = 14;
pub(crate) const FI_CSWAP_LT: u32 = 15;
pub(crate) const FI_CSWAP_GE: u32 = 16;
pub(crate) const FI_CSWAP_GT: u32 = 17;
pub(crate) const FI_MSWAP: u32 = 18;

// enum fi_datatype
pub(crate) const FI_FLOAT: u32 = 8;
pub(crate) const FI_DOUBLE: u32 = 9;
pub(crate) const FI_FLOAT_COMPLEX: u32 = 10;
pub(crate) const FI_DOUBLE_COMPLEX: u32 = 11;
pub(crate) const FI_LONG_DOUBLE: u32 = 12;
pub(crate) const FI_LONG_DOUBLE_COMPLEX: u32 = 13;
pub(crate) const FI_INT128: u32 = 14;
pub(crate) const FI_UINT128: u32 = 15;
/// One past the last datatype `fi_query_atomic` knows.
pub(crate) const DATATYPE_END: u32 = 16;

/// The three families of atomic calls (`fi_atomic`, `fi_fetch_atomic`,
/// `fi_compare_atomic`), as `fi_query_atomic`'s flags name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtomicKind {
    Write,
    Fetch,
    Compare,
}

impl AtomicKind {
    pub(crate) fn code(self) -> u8 {
        match self {
            AtomicKind::Write => 0,
            AtomicKind::Fetch => 1,
            AtomicKind::Compare => 2,
        }
    }
    pub(crate) fn from_code(c: u8) -> Option<AtomicKind> {
        Some(match c {
            0 => AtomicKind::Write,
            1 => AtomicKind::Fetch,
            2 => AtomicKind::Compare,
            _ => return None,
        })
    }
    /// `fi_query_atomic`'s flags: 0, `FI_FETCH_ATOMIC` or
    /// `FI_COMPARE_ATOMIC` (both, or any other bit: -FI_EBADFLAGS;
    /// `FI_TAGGED`, tagged atomics: not offered).
    pub(crate) fn from_query_flags(flags: u64) -> Result<AtomicKind> {
        if flags & FI_TAGGED != 0 {
            return Err(Error::OPNOTSUPP);
        }
        match flags {
            0 => Ok(AtomicKind::Write),
            FI_FETCH_ATOMIC => Ok(AtomicKind::Fetch),
            FI_COMPARE_ATOMIC => Ok(AtomicKind::Compare),
            _ => Err(Error::BADFLAGS),
        }
    }
    /// Whether the target's bytes come back to the initiator.
    pub(crate) fn fetches(self) -> bool {
        self != AtomicKind::Write
    }
}

/// Bytes of one element of `dt` (0: not a datatype).
pub(crate) fn datatype_size(dt: u32) -> usize {
    match dt {
        0 | 1 => 1,
        2 | 3 => 2,
        4 | 5 | FI_FLOAT => 4,
        6 | 7 | FI_DOUBLE | FI_FLOAT_COMPLEX => 8,
        FI_DOUBLE_COMPLEX | FI_LONG_DOUBLE | FI_INT128 | FI_UINT128 => 16,
        FI_LONG_DOUBLE_COMPLEX => 32,
        _ => 0,
    }
}

fn is_integer(dt: u32) -> bool {
    dt <= 7 || dt == FI_INT128 || dt == FI_UINT128
}

/// Whether `op` may be used with `kind` at all.
fn op_of_kind(op: u32, kind: AtomicKind) -> bool {
    match kind {
        AtomicKind::Write => op <= FI_BXOR || op == FI_ATOMIC_WRITE,
        AtomicKind::Fetch => op <= FI_ATOMIC_WRITE,
        AtomicKind::Compare => (FI_CSWAP..=FI_MSWAP).contains(&op),
    }
}

/// Whether `op` is defined on `dt` (whatever the call).
fn op_on_type(op: u32, dt: u32) -> bool {
    let ordered = is_integer(dt) || dt == FI_FLOAT || dt == FI_DOUBLE;
    match op {
        FI_BOR | FI_BAND | FI_BXOR | FI_MSWAP => is_integer(dt),
        FI_MIN | FI_MAX | FI_CSWAP_LE | FI_CSWAP_LT | FI_CSWAP_GE | FI_CSWAP_GT => ordered,
        FI_SUM | FI_PROD | FI_LOR | FI_LAND | FI_LXOR | FI_ATOMIC_READ | FI_ATOMIC_WRITE | FI_CSWAP | FI_CSWAP_NE => {
            ordered || dt == FI_FLOAT_COMPLEX
        }
        _ => false,
    }
}

/// `fi_query_atomic` / `fi_*atomicvalid`: the most elements one call may
/// carry, or -FI_EOPNOTSUPP (fi_atomic(3): "The requested atomic operation
/// is not supported").
pub(crate) fn valid(kind: AtomicKind, op: u32, dt: u32) -> Result<usize> {
    if dt >= DATATYPE_END || op >= FI_ATOMIC_OP_LAST || !op_of_kind(op, kind) || !op_on_type(op, dt) {
        return Err(Error::OPNOTSUPP);
    }
    Ok(ATOMIC_MAX / datatype_size(dt))
}

/// One element type.
trait Elem: Copy + PartialEq {
    const N: usize;
    fn get(b: &[u8]) -> Self;
    fn put(self, b: &mut [u8]);
    fn truth(self) -> bool;
    fn of_bool(v: bool) -> Self;
    fn sum(self, o: Self) -> Self;
    fn prod(self, o: Self) -> Self;
}

/// Element types with an order (`FI_MIN`, `FI_MAX`, `FI_CSWAP_LE` ...).
trait Ordered: Elem + PartialOrd {}

/// Integer element types (bitwise operations, `FI_MSWAP`).
trait Bits:
    Ordered
    + core::ops::BitOr<Output = Self>
    + core::ops::BitAnd<Output = Self>
    + core::ops::BitXor<Output = Self>
    + core::ops::Not<Output = Self>
{
}

/// [`Elem`] and [`Ordered`] for primitive numbers: native-order bytes,
/// `$zero`/`$one` for the logical operations, and the sum and product
/// (`wrapping_*` for integers: they wrap, as util's handlers).
macro_rules! num_elem {
    ($zero:literal, $one:literal, $sum:ident, $prod:ident; $($t:ty),*) => {$(
        impl Elem for $t {
            const N: usize = core::mem::size_of::<$t>();
            fn get(b: &[u8]) -> Self {
                let mut a = [0u8; core::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..Self::N]);
                <$t>::from_ne_bytes(a)
            }
            fn put(self, b: &mut [u8]) {
                b[..Self::N].copy_from_slice(&self.to_ne_bytes());
            }
            fn truth(self) -> bool {
                self != $zero
            }
            fn of_bool(v: bool) -> Self {
                if v {
                    $one
                } else {
                    $zero
                }
            }
            fn sum(self, o: Self) -> Self {
                <$t>::$sum(self, o)
            }
            fn prod(self, o: Self) -> Self {
                <$t>::$prod(self, o)
            }
        }
        impl Ordered for $t {}
    )*};
}
num_elem!(0, 1, wrapping_add, wrapping_mul; i8, u8, i16, u16, i32, u32, i64, u64, i128, u128);
num_elem!(0.0, 1.0, add, mul; f32, f64);

macro_rules! bits {
    ($($t:ty),*) => {$(impl Bits for $t {})*};
}
bits!(i8, u8, i16, u16, i32, u32, i64, u64, i128, u128);

/// `float complex`: real and imaginary parts.
#[derive(Clone, Copy, PartialEq)]
struct Complex32(f32, f32);

impl Elem for Complex32 {
    const N: usize = 8;
    fn get(b: &[u8]) -> Self {
        Complex32(f32::get(b), f32::get(&b[4..]))
    }
    fn put(self, b: &mut [u8]) {
        self.0.put(b);
        self.1.put(&mut b[4..]);
    }
    fn truth(self) -> bool {
        self.0 != 0.0 || self.1 != 0.0
    }
    fn of_bool(v: bool) -> Self {
        Complex32(f32::of_bool(v), 0.0)
    }
    fn sum(self, o: Self) -> Self {
        Complex32(self.0 + o.0, self.1 + o.1)
    }
    fn prod(self, o: Self) -> Self {
        Complex32(self.0 * o.0 - self.1 * o.1, self.0 * o.1 + self.1 * o.0)
    }
}

/// Applies `f(d, s, c)` to every element of `t` (`s`, `c`: same length as
/// `t`, or empty when the operation takes no operand / no compare value).
fn each<T: Elem>(t: &mut [u8], s: &[u8], c: &[u8], f: impl Fn(T, T, T) -> T) {
    for (i, d) in t.chunks_exact_mut(T::N).enumerate() {
        let dv = T::get(d);
        let sv = if s.is_empty() { dv } else { T::get(&s[i * T::N..]) };
        let cv = if c.is_empty() { dv } else { T::get(&c[i * T::N..]) };
        f(dv, sv, cv).put(d);
    }
}

/// The operations every element type has.
fn common<T: Elem>(op: u32, t: &mut [u8], s: &[u8], c: &[u8]) -> Result<()> {
    match op {
        FI_SUM => each::<T>(t, s, c, |d, s, _| d.sum(s)),
        FI_PROD => each::<T>(t, s, c, |d, s, _| d.prod(s)),
        FI_LOR => each::<T>(t, s, c, |d, s, _| T::of_bool(d.truth() || s.truth())),
        FI_LAND => each::<T>(t, s, c, |d, s, _| T::of_bool(d.truth() && s.truth())),
        FI_LXOR => each::<T>(t, s, c, |d, s, _| T::of_bool(d.truth() != s.truth())),
        FI_ATOMIC_READ => {}
        FI_ATOMIC_WRITE => t.copy_from_slice(s),
        FI_CSWAP => {
            // Same bytes (util compares with __atomic_compare_exchange).
            for ((d, s), c) in t
                .chunks_exact_mut(T::N)
                .zip(s.chunks_exact(T::N))
                .zip(c.chunks_exact(T::N))
            {
                if d == c {
                    d.copy_from_slice(s);
                }
            }
        }
        FI_CSWAP_NE => each::<T>(t, s, c, |d, s, c| if c != d { s } else { d }),
        _ => return Err(Error::OPNOTSUPP),
    }
    Ok(())
}

fn ordered<T: Ordered>(op: u32, t: &mut [u8], s: &[u8], c: &[u8]) -> Result<()> {
    let pick = |take: bool, d: T, s: T| if take { s } else { d };
    match op {
        FI_MIN => each::<T>(t, s, c, |d, s, _| pick(d > s, d, s)),
        FI_MAX => each::<T>(t, s, c, |d, s, _| pick(d < s, d, s)),
        FI_CSWAP_LE => each::<T>(t, s, c, |d, s, c| pick(c <= d, d, s)),
        FI_CSWAP_LT => each::<T>(t, s, c, |d, s, c| pick(c < d, d, s)),
        FI_CSWAP_GE => each::<T>(t, s, c, |d, s, c| pick(c >= d, d, s)),
        FI_CSWAP_GT => each::<T>(t, s, c, |d, s, c| pick(c > d, d, s)),
        _ => return common::<T>(op, t, s, c),
    }
    Ok(())
}

fn integer<T: Bits>(op: u32, t: &mut [u8], s: &[u8], c: &[u8]) -> Result<()> {
    match op {
        FI_BOR => each::<T>(t, s, c, |d, s, _| d | s),
        FI_BAND => each::<T>(t, s, c, |d, s, _| d & s),
        FI_BXOR => each::<T>(t, s, c, |d, s, _| d ^ s),
        FI_MSWAP => each::<T>(t, s, c, |d, s, c| (s & c) | (d & !c)),
        _ => return ordered::<T>(op, t, s, c),
    }
    Ok(())
}

/// Applies `op` on `dt` elements to `target` in place (the bytes the
/// target's memory held: the caller keeps a copy when it fetches).
/// `operand` is as long as `target` (empty for `FI_ATOMIC_READ`),
/// `compare` as long for compare operations and empty otherwise.
/// -FI_EOPNOTSUPP for a pair [`valid`] refuses; -FI_EINVAL for lengths
/// that do not fit.
pub(crate) fn apply(
    kind: AtomicKind,
    op: u32,
    dt: u32,
    target: &mut [u8],
    operand: &[u8],
    compare: &[u8],
) -> Result<()> {
    valid(kind, op, dt)?;
    let n = datatype_size(dt);
    let want_s = if op == FI_ATOMIC_READ { 0 } else { target.len() };
    let want_c = if kind == AtomicKind::Compare { target.len() } else { 0 };
    if !target.len().is_multiple_of(n) || operand.len() != want_s || compare.len() != want_c {
        return Err(Error::INVAL);
    }
    let (t, s, c) = (target, operand, compare);
    match dt {
        0 => integer::<i8>(op, t, s, c),
        1 => integer::<u8>(op, t, s, c),
        2 => integer::<i16>(op, t, s, c),
        3 => integer::<u16>(op, t, s, c),
        4 => integer::<i32>(op, t, s, c),
        5 => integer::<u32>(op, t, s, c),
        6 => integer::<i64>(op, t, s, c),
        7 => integer::<u64>(op, t, s, c),
        FI_FLOAT => ordered::<f32>(op, t, s, c),
        FI_DOUBLE => ordered::<f64>(op, t, s, c),
        FI_FLOAT_COMPLEX => common::<Complex32>(op, t, s, c),
        FI_INT128 => integer::<i128>(op, t, s, c),
        FI_UINT128 => integer::<u128>(op, t, s, c),
        _ => Err(Error::OPNOTSUPP),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KINDS: [AtomicKind; 3] = [AtomicKind::Write, AtomicKind::Fetch, AtomicKind::Compare];

    /// The table: what libfabric 1.17's sockets provider answers (probed
    /// with fi_query_atomic on this platform), pair by pair.
    #[test]
    fn table_is_the_sockets_one() {
        let ints: Vec<u32> = (0..8).chain([FI_INT128, FI_UINT128]).collect();
        let reals: Vec<u32> = ints.iter().copied().chain([FI_FLOAT, FI_DOUBLE]).collect();
        let all: Vec<u32> = reals.iter().copied().chain([FI_FLOAT_COMPLEX]).collect();
        for kind in KINDS {
            for op in 0..FI_ATOMIC_OP_LAST + 2 {
                for dt in 0..DATATYPE_END + 2 {
                    let types: &[u32] = match op {
                        FI_BOR | FI_BAND | FI_BXOR | FI_MSWAP => &ints,
                        FI_MIN | FI_MAX | FI_CSWAP_LE..=FI_CSWAP_GT => &reals,
                        _ => &all,
                    };
                    let kind_ok = match kind {
                        AtomicKind::Write => op <= FI_BXOR || op == FI_ATOMIC_WRITE,
                        AtomicKind::Fetch => op <= FI_ATOMIC_WRITE,
                        AtomicKind::Compare => (FI_CSWAP..=FI_MSWAP).contains(&op),
                    };
                    let want = (kind_ok && types.contains(&dt)).then(|| ATOMIC_MAX / datatype_size(dt));
                    assert_eq!(valid(kind, op, dt).ok(), want, "{kind:?} op {op} dt {dt}");
                    if want.is_none() {
                        assert_eq!(valid(kind, op, dt), Err(Error::OPNOTSUPP));
                    }
                }
            }
        }
        assert_eq!(valid(AtomicKind::Write, FI_SUM, 0), Ok(4096));
        assert_eq!(valid(AtomicKind::Write, FI_SUM, FI_UINT128), Ok(256));
        assert_eq!(valid(AtomicKind::Write, FI_SUM, FI_LONG_DOUBLE), Err(Error::OPNOTSUPP));
        assert_eq!(
            valid(AtomicKind::Fetch, FI_SUM, FI_DOUBLE_COMPLEX),
            Err(Error::OPNOTSUPP)
        );
        assert_eq!(
            valid(AtomicKind::Compare, FI_CSWAP, FI_LONG_DOUBLE_COMPLEX),
            Err(Error::OPNOTSUPP)
        );
    }

    #[test]
    fn query_flags() {
        assert_eq!(AtomicKind::from_query_flags(0), Ok(AtomicKind::Write));
        assert_eq!(AtomicKind::from_query_flags(FI_FETCH_ATOMIC), Ok(AtomicKind::Fetch));
        assert_eq!(AtomicKind::from_query_flags(FI_COMPARE_ATOMIC), Ok(AtomicKind::Compare));
        assert_eq!(
            AtomicKind::from_query_flags(FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC),
            Err(Error::BADFLAGS)
        );
        assert_eq!(AtomicKind::from_query_flags(FI_INJECT), Err(Error::BADFLAGS));
        assert_eq!(AtomicKind::from_query_flags(FI_TAGGED), Err(Error::OPNOTSUPP));
    }

    /// Every supported pair applies (and every refused one is refused by
    /// `apply` too), with operands of the right length.
    #[test]
    fn apply_agrees_with_the_table() {
        for kind in KINDS {
            for op in 0..FI_ATOMIC_OP_LAST {
                for dt in 0..DATATYPE_END {
                    let n = datatype_size(dt) * 3;
                    let mut t = vec![1u8; n];
                    let s = if op == FI_ATOMIC_READ { vec![] } else { vec![2u8; n] };
                    let c = if kind == AtomicKind::Compare {
                        vec![1u8; n]
                    } else {
                        vec![]
                    };
                    let r = apply(kind, op, dt, &mut t, &s, &c);
                    assert_eq!(r.is_ok(), valid(kind, op, dt).is_ok(), "{kind:?} {op} {dt}");
                }
            }
        }
        let mut t = [0u8; 4];
        assert_eq!(
            apply(AtomicKind::Write, FI_SUM, 4, &mut t, &[0; 3], &[]),
            Err(Error::INVAL)
        );
    }

    fn one<T: Elem>(kind: AtomicKind, op: u32, dt: u32, d: T, s: T, c: T) -> T {
        let mut t = vec![0u8; T::N];
        d.put(&mut t);
        let mut sb = vec![0u8; T::N];
        s.put(&mut sb);
        let mut cb = vec![0u8; T::N];
        c.put(&mut cb);
        let sb = if op == FI_ATOMIC_READ { vec![] } else { sb };
        let cb = if kind == AtomicKind::Compare { cb } else { vec![] };
        apply(kind, op, dt, &mut t, &sb, &cb).unwrap();
        T::get(&t)
    }

    #[test]
    fn results() {
        use AtomicKind::*;
        assert_eq!(one::<i8>(Write, FI_SUM, 0, 127, 1, 0), -128, "wraps");
        assert_eq!(one::<u32>(Write, FI_PROD, 5, 7, 6, 0), 42);
        assert_eq!(one::<i32>(Write, FI_MIN, 4, 5, -3, 0), -3);
        assert_eq!(one::<i32>(Write, FI_MAX, 4, 5, -3, 0), 5);
        assert_eq!(one::<u8>(Write, FI_LOR, 1, 0, 7, 0), 1);
        assert_eq!(one::<u8>(Write, FI_LAND, 1, 3, 7, 0), 1);
        assert_eq!(one::<u8>(Write, FI_LXOR, 1, 3, 7, 0), 0);
        assert_eq!(one::<u16>(Write, FI_BOR, 3, 0x0f0, 0x00f, 0), 0x0ff);
        assert_eq!(one::<u16>(Write, FI_BAND, 3, 0x0f0, 0x0ff, 0), 0x0f0);
        assert_eq!(one::<u16>(Write, FI_BXOR, 3, 0x0f0, 0x0ff, 0), 0x00f);
        assert_eq!(one::<u64>(Fetch, FI_ATOMIC_READ, 7, 9, 1, 0), 9);
        assert_eq!(one::<u64>(Write, FI_ATOMIC_WRITE, 7, 9, 1, 0), 1);
        assert_eq!(one::<i64>(Compare, FI_CSWAP, 6, 9, 1, 9), 1);
        assert_eq!(one::<i64>(Compare, FI_CSWAP, 6, 9, 1, 8), 9);
        assert_eq!(one::<i64>(Compare, FI_CSWAP_NE, 6, 9, 1, 8), 1);
        assert_eq!(one::<i64>(Compare, FI_CSWAP_LE, 6, 9, 1, 9), 1);
        assert_eq!(one::<i64>(Compare, FI_CSWAP_LT, 6, 9, 1, 9), 9);
        assert_eq!(one::<i64>(Compare, FI_CSWAP_GE, 6, 9, 1, 10), 1);
        assert_eq!(one::<i64>(Compare, FI_CSWAP_GT, 6, 9, 1, 9), 9);
        assert_eq!(one::<u8>(Compare, FI_MSWAP, 1, 0b1100, 0b1010, 0b0110), 0b1010);
        assert_eq!(one::<u128>(Write, FI_SUM, FI_UINT128, u128::MAX, 2, 0), 1);
        assert_eq!(one::<f64>(Write, FI_SUM, FI_DOUBLE, 1.5, 2.25, 0.0), 3.75);
        assert_eq!(one::<f32>(Write, FI_LOR, FI_FLOAT, 0.0, 0.5, 0.0), 1.0);
        let z = one::<Complex32>(
            Write,
            FI_PROD,
            FI_FLOAT_COMPLEX,
            Complex32(1.0, 2.0),
            Complex32(3.0, 4.0),
            Complex32(0.0, 0.0),
        );
        assert!(z == Complex32(-5.0, 10.0));
        let z = one::<Complex32>(
            Write,
            FI_LAND,
            FI_FLOAT_COMPLEX,
            Complex32(0.0, 2.0),
            Complex32(3.0, 0.0),
            Complex32(0.0, 0.0),
        );
        assert!(z == Complex32(1.0, 0.0));
        // FI_CSWAP compares bytes: -0.0 is not 0.0 there; FI_CSWAP_NE compares values.
        assert_eq!(one::<f64>(Compare, FI_CSWAP, FI_DOUBLE, -0.0, 5.0, 0.0), -0.0);
        assert_eq!(one::<f64>(Compare, FI_CSWAP_NE, FI_DOUBLE, -0.0, 5.0, 0.0), -0.0);
    }
}
