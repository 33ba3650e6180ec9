//! The layering rule of `src/lib.rs`, checked: a module may use its own
//! layer and the layers below it, never one above; only `sys/` (and the ABI
//! mirror) calls libc functions or makes system calls through the standard
//! library (files, sockets, processes: [`STD_SYSCALLS`]; test code may);
//! only the ABI mirror declares functions of the libfabric core
//! (`extern "C" { .. }`).
//!
//! Layers, bottom to top: `sys` < `transport` < `core` < `fi` < `provider`
//! (with `capi.rs`, the entry point). `abi` and `base` are the foundation:
//! every layer may use them and they use only each other.
//!
//! The checker reads the source text (no compiler internals): every path
//! `crate::<top>` and every `super::` chain that climbs out of a file's own
//! top-level module is a use of that module. Comments are skipped.

use std::path::{Path, PathBuf};

/// Rank of a top-level module; `None` for the foundation (abi, base).
fn rank(top: &str) -> Option<Option<u8>> {
    Some(match top {
        "abi" | "base" => None,
        "sys" => Some(0),
        "transport" => Some(1),
        "core" => Some(2),
        "fi" => Some(3),
        "provider" | "capi" => Some(4),
        // Test harness bodies (cargo test, and fuzz/ through the cargo
        // feature `fuzzing`): they drive every layer, nothing uses them.
        "fuzzing" => Some(5),
        _ => return None,
    })
}

/// The module path of a source file, e.g. `src/core/engine/mod.rs` →
/// `["core", "engine"]`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

fn strip_comment(line: &str) -> &str {
    match line.find("//") {
        Some(i) => &line[..i],
        None => line,
    }
}

/// Top-level modules a line refers to, given the file's module path.
fn uses(line: &str, module: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let b = line.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        let at_word = i == 0 || !(ident(b[i - 1]) || b[i - 1] == b':');
        if at_word && line[i..].starts_with("crate::") {
            let rest = &line[i + 7..];
            if let Some(r) = rest.strip_prefix('{') {
                // `crate::{a, b::c}`: each item names a top-level module.
                let inner = r.split('}').next().unwrap_or("");
                for item in inner.split(',') {
                    let top: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !top.is_empty() {
                        out.push(top);
                    }
                }
            } else {
                let top: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                out.push(top);
            }
            i += 7;
            continue;
        }
        if at_word && line[i..].starts_with("super::") {
            let mut depth = 0;
            let mut j = i;
            while line[j..].starts_with("super::") {
                depth += 1;
                j += 7;
            }
            // Climbing to the crate root names a top-level module next.
            if depth >= module.len() {
                let top: String = line[j..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                out.push(top);
            }
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

/// System calls made through the standard library: files and
/// directories, sockets and name resolution, processes. (Clocks, threads
/// and their sleeps are not counted: they are the language's, not the
/// operating system's in the sense of this rule.)
const STD_SYSCALLS: &[&str] = &[
    "std::fs::",
    "File::open",
    "File::create",
    "UdpSocket::",
    "TcpStream::",
    "TcpListener::",
    "to_socket_addrs",
    "std::process::Command",
    "std::os::unix::net::",
];

/// Test code inside a file: test modules and files, the fuzz harness
/// bodies, separate programs.
fn test_file(rel: &Path) -> bool {
    let s = rel.to_string_lossy();
    s.contains("/tests/") || s.ends_with("tests.rs") || s == "fuzzing.rs" || s.starts_with("bin/")
}

/// For each line of `text`, whether it belongs to an item marked
/// `#[cfg(test)]` (the attribute's line through the item's closing brace,
/// or its `;` if it has no body).
fn test_lines(text: &str) -> Vec<bool> {
    let mut out = Vec::new();
    let (mut inside, mut depth, mut opened) = (false, 0i64, false);
    for raw in text.lines() {
        let line = strip_comment(raw);
        if !inside && line.trim() == "#[cfg(test)]" {
            (inside, depth, opened) = (true, 0, false);
            out.push(true);
            continue;
        }
        if inside {
            out.push(true);
            for c in line.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if (opened && depth <= 0) || (!opened && line.trim_end().ends_with(';')) {
                inside = false;
            }
        } else {
            out.push(false);
        }
    }
    out
}

/// Every violation in one file (`rel` is relative to `src/`).
fn check_file(rel: &Path, text: &str) -> Vec<String> {
    let module = module_path(rel);
    let Some(own_top) = module.first().cloned() else {
        return Vec::new(); // lib.rs: declares the layers
    };
    if own_top == "bin" {
        return Vec::new(); // separate programs, using the public rlib
    }
    let Some(own) = rank(&own_top) else {
        return vec![format!(
            "{}: not in any layer (add it to tests/layering.rs)",
            rel.display()
        )];
    };
    let mut out = Vec::new();
    let mut in_extern_block = false;
    let tests = test_lines(text);
    let test_file = test_file(rel);
    for (n, raw) in text.lines().enumerate() {
        let line = strip_comment(raw);
        let at = format!("{}:{}", rel.display(), n + 1);
        if own_top != "sys" && own_top != "abi" && !test_file && !tests[n] {
            if let Some(call) = STD_SYSCALLS.iter().find(|c| line.contains(*c)) {
                out.push(format!("{at}: a system call through std ({call}) outside sys/"));
            }
        }
        for top in uses(line, &module) {
            let Some(theirs) = rank(&top) else { continue };
            let ok = match (own, theirs) {
                (_, None) => true,        // everyone may use the foundation
                (None, Some(_)) => false, // the foundation uses no layer
                (Some(a), Some(b)) => b <= a,
            };
            if !ok {
                out.push(format!("{at}: `{own_top}` uses `{top}`, a layer above it"));
            }
        }
        let trimmed = line.trim_start();
        if own_top != "sys" && own_top != "abi" {
            // A libc function call: `libc::name(` with a lower-case name
            // (types and constants are data, not calls).
            let mut rest = line;
            while let Some(p) = rest.find("libc::") {
                let after = &rest[p + 6..];
                let name: String = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                let called = after[name.len()..].trim_start().starts_with('(');
                if called && name.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
                    out.push(format!("{at}: calls libc::{name} outside sys/"));
                }
                rest = &after[name.len()..];
            }
            if own_top != "abi"
                && (trimmed.starts_with("extern \"C\" {") || trimmed.starts_with("unsafe extern \"C\" {"))
            {
                in_extern_block = true;
                out.push(format!(
                    "{at}: declares foreign functions outside abi/ (libfabric) or sys/ (libc)"
                ));
            }
        }
        if in_extern_block && trimmed.starts_with('}') {
            in_extern_block = false;
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src/") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn layers_use_only_layers_below_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut found = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).expect("under src/");
        let text = std::fs::read_to_string(f).expect("read source");
        found.extend(check_file(rel, &text));
    }
    assert!(found.is_empty(), "layering violations:\n{}", found.join("\n"));
}

// ---- the checker itself, shown to fail on planted violations ----

#[test]
fn an_upward_use_is_caught() {
    let v = check_file(Path::new("transport/tcp/mod.rs"), "use crate::core::engine::Inner;\n");
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].contains("`transport` uses `core`"));
    let v = check_file(Path::new("core/cq.rs"), "fn f() { crate::fi::call(\"x\", || Ok(0)) }\n");
    assert_eq!(v.len(), 1, "{v:?}");
    let v = check_file(Path::new("base/log.rs"), "use crate::{abi, provider::init};\n");
    assert_eq!(v.len(), 1, "{v:?}");
}

#[test]
fn super_chains_out_of_a_layer_are_caught() {
    // core/engine/mod.rs is module core::engine: two supers reach the root.
    let v = check_file(Path::new("core/engine/mod.rs"), "use super::super::fi::ep::Ep;\n");
    assert_eq!(v.len(), 1, "{v:?}");
    // One super stays inside `core`.
    assert!(check_file(Path::new("core/engine/mod.rs"), "use super::cq::Cq;\n").is_empty());
}

#[test]
fn downward_and_foundation_uses_pass() {
    let ok = "use crate::transport::addr::Addr;\nuse crate::base::error::Result;\nuse crate::abi::*;\n// crate::provider in a comment\n";
    assert!(check_file(Path::new("core/av.rs"), ok).is_empty());
    assert!(check_file(Path::new("provider/getinfo.rs"), "use crate::fi::cmem;\n").is_empty());
}

#[test]
fn libc_calls_and_foreign_blocks_outside_sys_are_caught() {
    let v = check_file(
        Path::new("transport/shm/segment.rs"),
        "let r = unsafe { libc::mmap(p, n, 0, 0, -1, 0) };\n",
    );
    assert_eq!(v.len(), 1, "{v:?}");
    // Types and constants are fine.
    assert!(check_file(
        Path::new("transport/shm/segment.rs"),
        "let a: libc::iovec = x; let f = libc::AF_INET;\n"
    )
    .is_empty());
    assert!(check_file(Path::new("sys/mod.rs"), "unsafe { libc::close(fd) };\n").is_empty());
    let v = check_file(
        Path::new("core/cq.rs"),
        "extern \"C\" {\n    fn fi_strerror(e: i32) -> *const u8;\n}\n",
    );
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(check_file(Path::new("abi/libfabric.rs"), "extern \"C\" {\n}\n").is_empty());
}

#[test]
fn a_file_outside_the_layers_is_caught() {
    assert_eq!(check_file(Path::new("misc.rs"), "").len(), 1);
}

#[test]
fn std_system_calls_outside_sys_are_caught() {
    let v = check_file(
        Path::new("transport/addr.rs"),
        "let b = std::fs::read_to_string(\"/proc/x\").unwrap_or_default();\n",
    );
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].contains("std::fs::"));
    let v = check_file(
        Path::new("core/host.rs"),
        "use std::net::UdpSocket;\nfn f() -> bool { UdpSocket::bind(a).is_ok() }\n",
    );
    assert_eq!(v.len(), 1, "{v:?}");
    // sys/ may; test modules, test files and the fuzz bodies may.
    assert!(check_file(Path::new("sys/net.rs"), "std::net::UdpSocket::bind(a);\n").is_empty());
    let in_test_mod = "fn f() {}\n#[cfg(test)]\nmod tests {\n    fn g() { std::fs::read(p); }\n}\n";
    assert!(check_file(Path::new("transport/shm/segment.rs"), in_test_mod).is_empty());
    assert!(check_file(Path::new("transport/tcp/tests.rs"), "TcpStream::connect(a);\n").is_empty());
    // After a test module closes, production code is checked again.
    let after = format!("{in_test_mod}fn h() {{ std::fs::remove_file(p); }}\n");
    assert_eq!(check_file(Path::new("transport/shm/segment.rs"), &after).len(), 1);
    // A #[cfg(test)] item without a body ends at its semicolon.
    let use_then_call = "#[cfg(test)]\nuse std::fs;\nfn h() { std::fs::write(p, b); }\n";
    assert_eq!(check_file(Path::new("core/cq.rs"), use_then_call).len(), 1);
}
