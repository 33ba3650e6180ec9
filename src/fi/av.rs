//! The C face of address vectors: `fi_av_open`, the `fid_av` operations,
//! and what touches application memory: walking packed address arrays
//! (strings by their NUL, sockaddrs by the first entry's family), the
//! `fi_addr` outputs and `FI_SYNC_ERR` codes of the insert calls, the
//! asynchronous-insert events on the bound EQ (`fi_eq_entry`,
//! `fi_eq_err_entry`), `fi_av_lookup` and `fi_av_straddr`.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::av::{report_async, Av, AvAttr, AvEvents, AvFormat, MAX_STR_ADDR};
use crate::core::domain::Domain;
use crate::core::eq::{Eq, EqError};
use crate::fi::{self, noops, FiObject, Obj};
use crate::transport::addr::Addr;
use core::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

impl FiObject for Av {
    type Header = fid_av;
    const CLASS: usize = FI_CLASS_AV;
}

/// `fi_av_open`: the AV and, for a named AV, the `map_addr` to return
/// (fi_av(3): "If name is non-NULL and map_addr is 0, then the map_addr
/// used by the provider will be returned").
///
/// # Safety
/// `attr.name` must be NULL or a NUL-terminated string.
pub(crate) unsafe fn open(
    d: &Obj<Domain>,
    attr: &fi_av_attr,
    ctx: *mut c_void,
) -> Result<(*mut fid_av, Option<*mut c_void>)> {
    let core = Av::open(
        &d.core,
        &AvAttr {
            av_type: attr.r#type,
            count: attr.count,
            flags: attr.flags,
            rx_ctx_bits: attr.rx_ctx_bits,
            // SAFETY: NULL or a NUL-terminated string (the contract).
            name: unsafe { fi::cmem::opt_str(attr.name) }?.map(str::to_string),
        },
    )?;
    let hdr = fid_av {
        fid: fid {
            fclass: FI_CLASS_AV,
            context: ctx,
            ops: &AV_FI_OPS,
        },
        ops: &AV_OPS as *const crate::abi::v2::fi_ops_av as *const fi_ops_av,
    };
    let map_addr = core.shared.as_ref().map(|s| s.map_addr().cast());
    Ok((Obj::create(hdr, core), map_addr))
}

static AV_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(av_close),
    bind: Some(av_bind),
    control: Some(noops::no_control),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

/// The 2.x table (`insert_auth_key`, `lookup_auth_key`, `set_user_id`
/// after the 1.17 slots); `fid_av.ops` points at it as the 1.17 type, its
/// prefix, and `size` tells the inline wrappers how far it goes.
static AV_OPS: crate::abi::v2::fi_ops_av = crate::abi::v2::fi_ops_av {
    size: core::mem::size_of::<crate::abi::v2::fi_ops_av>(),
    insert: Some(av_insert),
    insertsvc: Some(av_insertsvc),
    insertsym: Some(av_insertsym),
    remove: Some(av_remove),
    lookup: Some(av_lookup),
    straddr: Some(av_straddr),
    av_set: Some(av_set),
    insert_auth_key: Some(av_insert_auth_key),
    lookup_auth_key: Some(av_lookup_auth_key),
    set_user_id: Some(av_set_user_id),
};

/// [`AvEvents`] on a real EQ: events name the AV's fid and the insert
/// call's context.
struct EqEvents<'a> {
    eq: &'a Eq,
    fid: *mut fid,
    context: *mut c_void,
}

impl AvEvents for EqEvents<'_> {
    fn error(&self, index: usize, err: i32) -> Result<()> {
        self.eq.push_error(EqError {
            fid: self.fid,
            context: self.context,
            data: index as u64,
            err,
            prov_errno: 0,
            err_data: Vec::new(),
        })
    }
    fn complete(&self, count: usize) -> Result<()> {
        let entry = fi_eq_entry {
            fid: self.fid,
            context: self.context,
            data: count as u64,
        };
        // SAFETY: fi_eq_entry is plain data (two pointers and an integer).
        self.eq
            .push_event(FI_AV_COMPLETE, unsafe { crate::transport::addr::as_bytes(&entry) })
    }
}

/// The core's flag checks, plus `FI_SYNC_ERR`'s error array (the insert
/// call's `context`) being present.
fn prepare_insert(o: &Obj<Av>, flags: u64, context: *mut c_void) -> Result<Option<Arc<Eq>>> {
    let eq = o.core.prepare_insert(flags)?;
    if flags & FI_SYNC_ERR != 0 && context.is_null() {
        return Err(Error::INVAL);
    }
    Ok(eq)
}

/// Inserts decoded addresses and reports the outcome the way the call
/// asked for: `fi_addr` outputs, `FI_SYNC_ERR` codes, EQ events.
///
/// # Safety
/// When non-NULL, `fi_addr` must be valid for `addrs.len()` elements and
/// (with `FI_SYNC_ERR`) `context` for `addrs.len()` ints.
unsafe fn finish_insert(
    o: &Obj<Av>,
    eq: Option<Arc<Eq>>,
    addrs: Vec<Result<Addr>>,
    fi_addr: *mut fi_addr_t,
    flags: u64,
    context: *mut c_void,
) -> Result<c_int> {
    let n = addrs.len();
    let user_ids = if flags & FI_AV_USER_ID != 0 && n > 0 {
        if fi_addr.is_null() {
            return Err(Error::INVAL);
        }
        // "The fi_addr parameter acts as input/output in this case."
        // SAFETY: non-NULL, n elements per the contract.
        Some(unsafe { core::slice::from_raw_parts(fi_addr, n) }.to_vec())
    } else {
        None
    };
    let results = o.core.insert(addrs, user_ids.as_deref())?;
    if !fi_addr.is_null() {
        for (i, r) in results.iter().enumerate() {
            // SAFETY: i < n, within the caller's array.
            unsafe { fi_addr.add(i).write(*r.as_ref().unwrap_or(&FI_ADDR_NOTAVAIL)) };
        }
    }
    match eq {
        Some(eq) => {
            let events = EqEvents {
                eq: &eq,
                fid: o.fid_ptr(),
                context,
            };
            report_async(&results, &events)?;
            Ok(0)
        }
        None => {
            if flags & FI_SYNC_ERR != 0 {
                let errs = context as *mut c_int;
                for (i, r) in results.iter().enumerate() {
                    // SAFETY: FI_SYNC_ERR: context holds n ints.
                    unsafe { errs.add(i).write(r.as_ref().map_or_else(|e| e.0, |_| 0)) };
                }
            }
            Ok(results.iter().filter(|r| r.is_ok()).count() as c_int)
        }
    }
}

/// Slot size of a sockaddr array whose first entry starts at `p`.
///
/// # Safety
/// `p` must be valid for reads of 2 bytes unless `format` is `Str`.
unsafe fn sockaddr_stride(format: AvFormat, p: *const u8) -> usize {
    let family = match format {
        AvFormat::Sockaddr => {
            // SAFETY: the caller guarantees 2 readable bytes.
            unsafe { core::ptr::read_unaligned(p as *const u16) }
        }
        _ => 0,
    };
    format.stride(family)
}

/// Decodes one address at `p`. Returns the address and the bytes it
/// occupies, or `Err((e, None))` when the walk cannot continue past it (an
/// unterminated string).
///
/// # Safety
/// `p` must point to one address of this format (for `Str`: a string, read
/// up to its NUL or [`MAX_STR_ADDR`] bytes; for sockaddr formats: `stride`
/// bytes).
unsafe fn read_one(
    format: AvFormat,
    p: *const u8,
    stride: usize,
) -> core::result::Result<(Addr, usize), (Error, Option<usize>)> {
    let len = match format {
        AvFormat::Str => {
            let mut n = 0;
            // SAFETY: reads byte by byte up to the NUL, like strlen.
            while n < MAX_STR_ADDR && unsafe { *p.add(n) } != 0 {
                n += 1;
            }
            if n == MAX_STR_ADDR {
                return Err((Error::INVAL, None));
            }
            n + 1
        }
        _ => stride,
    };
    // SAFETY: the string and its NUL were just read / the caller guarantees
    // `stride` readable bytes.
    let bytes = unsafe { core::slice::from_raw_parts(p, len) };
    match format.decode(bytes) {
        Ok(a) => Ok((a, len)),
        Err(e) => Err((e, Some(len))),
    }
}

/// Decodes `count` packed addresses. Entries after one the walk cannot step
/// over fail with `FI_ECANCELED` ("Addresses that are not inserted because
/// they were aborted will fail with an error code of FI_ECANCELED").
///
/// # Safety
/// `p` must be valid for `count` packed addresses of this format.
unsafe fn read_packed(format: AvFormat, p: *const u8, count: usize) -> Result<Vec<Result<Addr>>> {
    let mut out = Vec::new();
    out.try_reserve_exact(count).map_err(|_| Error::NOMEM)?;
    if count == 0 {
        return Ok(out);
    }
    // SAFETY: count > 0, so at least one address (≥ 2 bytes) is readable.
    let stride = unsafe { sockaddr_stride(format, p) };
    let mut off = 0usize;
    for _ in 0..count {
        // SAFETY: `off` is the start of the next packed entry.
        match unsafe { read_one(format, p.add(off), stride) } {
            Ok((a, used)) => {
                out.push(Ok(a));
                off += used;
            }
            Err((e, Some(used))) => {
                out.push(Err(e));
                off += used;
            }
            Err((e, None)) => {
                out.push(Err(e));
                break;
            }
        }
    }
    while out.len() < count {
        out.push(Err(Error::CANCELED));
    }
    Ok(out)
}

unsafe extern "C" fn av_close(f: *mut fid) -> c_int {
    // SAFETY: `f` comes from the application as this object's fid.
    unsafe {
        fi::call_close::<Av>("av close", f as *const c_void, |o| {
            o.core.close()?;
            Obj::destroy(o);
            Ok(0)
        })
    }
}

/// `fi_av_bind`: an EQ for asynchronous inserts. "Flags are reserved for
/// future use and must be 0."
unsafe extern "C" fn av_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    // SAFETY: arguments come from the application through fi_av_bind().
    unsafe {
        fi::call_obj::<Av, c_int>("fi_av_bind", f as *const c_void, |o| {
            if flags != 0 {
                return Err(Error::INVAL);
            }
            if fi::class_of(bfid)? != FI_CLASS_EQ {
                return Err(Error::INVAL);
            }
            o.core.bind_eq(fi::eq::from_fid(bfid)?, flags)?;
            Ok(0)
        })
    }
}

/// Rejects counts an `int` return value cannot report.
fn check_count(count: usize) -> Result<()> {
    if count > i32::MAX as usize {
        Err(Error::INVAL)
    } else {
        Ok(())
    }
}

unsafe extern "C" fn av_insert(
    av: *mut fid_av,
    addr: *const c_void,
    count: usize,
    fi_addr: *mut fi_addr_t,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    // SAFETY: arguments come from the application through fi_av_insert().
    unsafe {
        fi::call_obj::<Av, c_int>("fi_av_insert", av as *const c_void, |o| {
            let eq = prepare_insert(o, flags, context)?;
            check_count(count)?;
            if count > 0 && addr.is_null() {
                return Err(Error::INVAL);
            }
            let addrs = read_packed(o.core.state.format, addr as *const u8, count)?;
            finish_insert(o, eq, addrs, fi_addr, flags, context)
        })
    }
}

unsafe extern "C" fn av_insertsvc(
    av: *mut fid_av,
    node: *const c_char,
    service: *const c_char,
    fi_addr: *mut fi_addr_t,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    // SAFETY: arguments come from the application through fi_av_insertsvc().
    unsafe {
        fi::call_obj::<Av, c_int>("fi_av_insertsvc", av as *const c_void, |o| {
            let eq = prepare_insert(o, flags, context)?;
            let node = fi::cmem::opt_str(node)?.ok_or(Error::INVAL)?;
            let service = fi::cmem::opt_str(service)?;
            let addrs = o.core.state.resolve_sym(node, 1, service, 1)?;
            finish_insert(o, eq, addrs, fi_addr, flags, context)
        })
    }
}

unsafe extern "C" fn av_insertsym(
    av: *mut fid_av,
    node: *const c_char,
    nodecnt: usize,
    service: *const c_char,
    svccnt: usize,
    fi_addr: *mut fi_addr_t,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    // SAFETY: arguments come from the application through fi_av_insertsym().
    unsafe {
        fi::call_obj::<Av, c_int>("fi_av_insertsym", av as *const c_void, |o| {
            let eq = prepare_insert(o, flags, context)?;
            let node = fi::cmem::opt_str(node)?.ok_or(Error::INVAL)?;
            let service = fi::cmem::opt_str(service)?;
            let addrs = o.core.state.resolve_sym(node, nodecnt, service, svccnt)?;
            finish_insert(o, eq, addrs, fi_addr, flags, context)
        })
    }
}

/// `fi_av_remove`: all or nothing; an unknown or already removed `fi_addr`
/// is -FI_EINVAL. "Flags are reserved for future use and must be 0."
unsafe extern "C" fn av_remove(av: *mut fid_av, fi_addr: *mut fi_addr_t, count: usize, flags: u64) -> c_int {
    // SAFETY: arguments come from the application through fi_av_remove().
    unsafe {
        fi::call_obj::<Av, c_int>("fi_av_remove", av as *const c_void, |o| {
            if flags != 0 {
                return Err(Error::INVAL);
            }
            check_count(count)?;
            let list = fi::slice_in(fi_addr as *const fi_addr_t, count)?;
            o.core.remove(list)?;
            Ok(0)
        })
    }
}

/// `fi_av_set_user_id` (2.0; docs/libfabric2.md).
unsafe extern "C" fn av_set_user_id(av: *mut fid_av, fi_addr: fi_addr_t, user_id: fi_addr_t, flags: u64) -> c_int {
    // SAFETY: arguments come from the application through fi_av_set_user_id().
    unsafe {
        fi::call_obj::<Av, c_int>("fi_av_set_user_id", av as *const c_void, |o| {
            o.core.set_user_id(fi_addr, user_id, flags)?;
            Ok(0)
        })
    }
}

/// `fi_av_insert_auth_key` (1.20): no authorization keys are offered
/// (`max_ep_auth_key` 0).
unsafe extern "C" fn av_insert_auth_key(
    _av: *mut fid_av,
    _auth_key: *const c_void,
    _auth_key_size: usize,
    _fi_addr: *mut fi_addr_t,
    _flags: u64,
) -> c_int {
    -FI_ENOSYS
}

/// `fi_av_lookup_auth_key` (1.20): as above.
unsafe extern "C" fn av_lookup_auth_key(
    _av: *mut fid_av,
    _fi_addr: fi_addr_t,
    _auth_key: *mut c_void,
    _auth_key_size: *mut usize,
) -> c_int {
    -FI_ENOSYS
}

unsafe extern "C" fn av_lookup(av: *mut fid_av, fi_addr: fi_addr_t, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    // SAFETY: arguments come from the application through fi_av_lookup().
    unsafe {
        fi::call_obj::<Av, c_int>("fi_av_lookup", av as *const c_void, |o| {
            let cap = *fi::read_in(addrlen)?;
            if addr.is_null() && cap > 0 {
                return Err(Error::INVAL);
            }
            let (out, needed) = o.core.lookup(fi_addr, cap)?;
            if !out.is_empty() {
                // `addr` is non-NULL here (cap > 0) and holds `cap` ≥ out.len() bytes.
                core::ptr::copy_nonoverlapping(out.as_ptr(), addr as *mut u8, out.len());
            }
            // "On output, addrlen is set to the size of the buffer needed".
            addrlen.write(needed);
            Ok(0)
        })
    }
}

/// `fi_av_straddr`: "converts the provided address into a printable
/// string"; `*len` becomes the size needed (with the NUL).
unsafe extern "C" fn av_straddr(
    av: *mut fid_av,
    addr: *const c_void,
    buf: *mut c_char,
    len: *mut usize,
) -> *const c_char {
    // SAFETY: arguments come from the application through fi_av_straddr().
    unsafe {
        fi::call_obj::<Av, *const c_char>("fi_av_straddr", av as *const c_void, |o| {
            let cap = *fi::read_in(len)?;
            if addr.is_null() {
                return Err(Error::INVAL);
            }
            let format = o.core.state.format;
            let p = addr as *const u8;
            let stride = sockaddr_stride(format, p);
            let a = read_one(format, p, stride).map_err(|(e, _)| e)?.0;
            let s = a.to_string_form();
            fi::cmem::copy_cstr(&s, buf, cap);
            len.write(s.len() + 1);
            Ok(buf as *const c_char)
        })
    }
}

/// AV sets serve collectives, which rustfab does not offer.
unsafe extern "C" fn av_set(_: *mut fid_av, _: *mut fi_av_set_attr, _: *mut *mut fid_av_set, _: *mut c_void) -> c_int {
    -FI_ENOSYS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shm(t: u64) -> Addr {
        Addr::Shm(t)
    }
    fn inet(s: &str) -> Addr {
        Addr::Inet(s.parse().unwrap())
    }
    fn packed_shm(tokens: &[u64]) -> Vec<u8> {
        tokens.iter().flat_map(|&t| Addr::Shm(t).to_bytes()).collect()
    }

    #[test]
    fn packed_strings_walked_by_strlen() {
        let buf = packed_shm(&[1, 2, 0xabc]);
        // SAFETY: buf holds three packed names.
        let r = unsafe { read_packed(AvFormat::Str, buf.as_ptr(), 3) }.unwrap();
        assert_eq!(r, vec![Ok(shm(1)), Ok(shm(2)), Ok(shm(0xabc))]);
        // Shorter strings (not rustfab names) are stepped over correctly.
        let mut buf = b"garbage\0".to_vec();
        buf.extend(packed_shm(&[7]));
        // SAFETY: two NUL-terminated strings.
        let r = unsafe { read_packed(AvFormat::Str, buf.as_ptr(), 2) }.unwrap();
        assert_eq!(r[0], Err(Error::INVAL));
        assert_eq!(r[1], Ok(shm(7)));
    }

    #[test]
    fn unterminated_string_aborts_the_walk() {
        let mut buf = vec![b'x'; MAX_STR_ADDR + 10];
        buf.push(0);
        // SAFETY: the buffer is NUL-terminated after MAX_STR_ADDR+10 bytes.
        let r = unsafe { read_packed(AvFormat::Str, buf.as_ptr(), 3) }.unwrap();
        assert_eq!(r, vec![Err(Error::INVAL), Err(Error::CANCELED), Err(Error::CANCELED)]);
    }

    #[test]
    fn sockaddr_strides() {
        let v4 = inet("10.0.0.1:9").to_bytes();
        let v6 = inet("[fe80::1]:80").to_bytes();
        let mut buf = v4.clone();
        buf.extend(&v4);
        // SAFETY: two sockaddr_in.
        let r = unsafe { read_packed(AvFormat::SockaddrIn, buf.as_ptr(), 2) }.unwrap();
        assert_eq!(r, vec![Ok(inet("10.0.0.1:9")), Ok(inet("10.0.0.1:9"))]);
        // SAFETY: same buffer, FI_SOCKADDR: stride from the first family.
        let r = unsafe { read_packed(AvFormat::Sockaddr, buf.as_ptr(), 2) }.unwrap();
        assert_eq!(r.len(), 2);
        assert!(r.iter().all(|x| x.is_ok()));
        let mut buf6 = v6.clone();
        buf6.extend(&v6);
        // SAFETY: two sockaddr_in6.
        let r = unsafe { read_packed(AvFormat::Sockaddr, buf6.as_ptr(), 2) }.unwrap();
        assert_eq!(r, vec![Ok(inet("[fe80::1]:80")), Ok(inet("[fe80::1]:80"))]);
        // SAFETY: two 28-byte slots.
        let r = unsafe { read_packed(AvFormat::SockaddrIn6, buf6.as_ptr(), 2) }.unwrap();
        assert!(r.iter().all(|x| x.is_ok()));
        // A v6 address in a v4 array is garbage (family mismatch).
        // SAFETY: 28 bytes ≥ 16.
        let r = unsafe { read_packed(AvFormat::SockaddrIn, v6.as_ptr(), 1) }.unwrap();
        assert!(r[0].is_err());
        // All-zero sockaddr (fabtests' "bad address").
        let zero = [0u8; 16];
        // SAFETY: 16 bytes.
        let r = unsafe { read_packed(AvFormat::Sockaddr, zero.as_ptr(), 1) }.unwrap();
        assert!(r[0].is_err());
    }
}
