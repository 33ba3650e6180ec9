//! The layering rule of `src/lib.rs`, checked: a module may use its own
//! layer and the layers below it, never one above; only `sys/` (and the ABI
//! mirror) calls libc functions or makes system calls through the standard
//! library (files, sockets, processes: [`STD_SYSCALLS`]; test code may);
//! only the ABI mirror declares functions of the libfabric core
//! (`extern "C" { .. }`); no files use each other in a loop (below).
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

/// Whether an attribute line compiles its item for tests only:
/// `#[cfg(test)]`, or `#[cfg(all(test, ..))]` (the loom models'
/// `#[cfg(all(test, loom))]`).
fn test_cfg(line: &str) -> bool {
    let Some(p) = line.trim().strip_prefix("#[cfg(").and_then(|r| r.strip_suffix(")]")) else {
        return false;
    };
    p == "test"
        || p.strip_prefix("all(")
            .and_then(|r| r.strip_suffix(')'))
            .is_some_and(|a| a.split(',').any(|x| x.trim() == "test"))
}

/// For each line of `text`, whether it belongs to an item compiled for
/// tests only ([`test_cfg`]): the attribute's line through the item's
/// closing brace, or its `;` if it has no body.
fn test_lines(text: &str) -> Vec<bool> {
    let mut out = Vec::new();
    let (mut inside, mut depth, mut opened) = (false, 0i64, false);
    for raw in text.lines() {
        let line = strip_comment(raw);
        if !inside && test_cfg(line) {
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

// ---- cycles between files ----
//
// A file uses another when its production code (test modules and test files
// are left out) names an item defined there: through a path (`crate::a::b::X`,
// `super::x::X`, `self::x::X`, `x::X` for a child module `x`, with `use`
// groups expanded) or a glob import (`use x::*` uses every file `x` hands
// names on from). A re-export (`pub use`, `pub(crate) use`) is no use of
// its own: a path through it is followed to the file that defines the item;
// nor is a module's `mod x;` declaration. Files that use each other in a
// loop, directly or through others, form a cycle, and the rule is that there
// is none: each file can then be read, tested and moved with only what it
// uses below it.

/// Identifiers and punctuation of a text (passed with comments removed).
fn path_tokens(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'"' {
            // A string literal: skipped whole.
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if ident(c) {
            let s = i;
            while i < b.len() && ident(b[i]) {
                i += 1;
            }
            out.push(&text[s..i]);
        } else if text[i..].starts_with("::") {
            out.push("::");
            i += 2;
        } else {
            if !c.is_ascii_whitespace() {
                out.push(&text[i..i + 1]);
            }
            i += 1;
        }
    }
    out
}

fn is_ident(t: &str) -> bool {
    t.as_bytes()[0].is_ascii_alphabetic() || t.starts_with('_')
}

/// One path of a path expression or `use` tree: its segments, whether it
/// ends in `::*`, and the name it is imported as (`as`), if another.
type PathTree = (Vec<String>, bool, Option<String>);

/// The paths of a path expression or `use` tree starting at `t[*i]` (an
/// identifier); `*i` ends past it.
fn path_trees(t: &[&str], i: &mut usize) -> Vec<PathTree> {
    let mut prefix = vec![t[*i].to_string()];
    *i += 1;
    let mut glob = false;
    while *i + 1 < t.len() && t[*i] == "::" {
        let next = t[*i + 1];
        if next == "{" {
            *i += 2;
            let mut out = Vec::new();
            while *i < t.len() && t[*i] != "}" {
                if is_ident(t[*i]) {
                    for (tail, g, alias) in path_trees(t, i) {
                        let mut p = prefix.clone();
                        if tail != ["self"] {
                            p.extend(tail);
                        }
                        out.push((p, g, alias));
                    }
                } else if t[*i] == "*" {
                    out.push((prefix.clone(), true, None));
                    *i += 1;
                } else {
                    *i += 1; // `,`
                }
            }
            *i += 1;
            return out;
        }
        if next == "*" {
            glob = true;
            *i += 2;
            break;
        }
        if !is_ident(next) {
            break; // `x::<T>`
        }
        prefix.push(next.to_string());
        *i += 2;
    }
    let mut alias = None;
    if *i + 1 < t.len() && t[*i] == "as" {
        alias = Some(t[*i + 1].to_string());
        *i += 2;
    }
    vec![(prefix, glob, alias)]
}

/// The production text of a file: comments removed, test items blanked.
fn production_text(text: &str) -> String {
    let tests = test_lines(text);
    let mut out = String::new();
    for (n, raw) in text.lines().enumerate() {
        if !tests[n] {
            out.push_str(strip_comment(raw));
        }
        out.push('\n');
    }
    out
}

/// What the cycle rule reads of one file.
#[derive(Default)]
struct FileUses {
    module: Vec<String>,
    /// Items it defines (functions, types, constants, modules, macros).
    defs: Vec<String>,
    /// Re-exports: the absolute path handed on, and whether it is a glob.
    reexports: Vec<(Vec<String>, bool)>,
    /// Uses: absolute paths named by imports and code, glob or not.
    uses: Vec<(Vec<String>, bool)>,
}

fn read_uses(rel: &Path, text: &str, modules: &[Vec<String>]) -> FileUses {
    let own = module_path(rel);
    let is_module = |p: &[String]| modules.iter().any(|m| m.as_slice() == p);
    let code = production_text(text);
    let t = path_tokens(&code);
    let mut f = FileUses {
        module: own.clone(),
        ..FileUses::default()
    };
    // Names imported so far, with the absolute paths they stand for.
    let mut names: Vec<(String, Vec<String>)> = Vec::new();
    let mut i = 0;
    while i < t.len() {
        let word = t[i];
        if matches!(
            word,
            "fn" | "struct" | "enum" | "type" | "const" | "static" | "trait" | "mod" | "union"
        ) && i + 1 < t.len()
            && is_ident(t[i + 1])
        {
            f.defs.push(t[i + 1].to_string());
        }
        if word == "macro_rules" && i + 2 < t.len() {
            f.defs.push(t[i + 2].to_string());
        }
        let after_use = i > 0 && t[i - 1] == "use";
        let reexport = after_use && i > 1 && (t[i - 2] == "pub" || t[i - 2] == ")");
        let starts_path = i + 1 < t.len() && t[i + 1] == "::" && (i == 0 || t[i - 1] != "::");
        // Where the path starts, and how many of its segments that root
        // stands for: the crate, this module, a child module, or a name
        // imported earlier (`use crate::fi::{self}` .. `fi::domain::f()`).
        let imported = || names.iter().rev().find(|(n, _)| n == word).map(|(_, p)| p.clone());
        let root = match word {
            "crate" => Some((Vec::new(), 1)),
            "self" => Some((own.clone(), 1)),
            "super" => Some((own.clone(), 0)),
            _ if !own.is_empty() && is_ident(word) => {
                let mut child = own.clone();
                child.push(word.to_string());
                if is_module(&child) {
                    Some((own.clone(), 0))
                } else if !after_use {
                    imported().map(|p| (p, 1))
                } else {
                    None
                }
            }
            _ => None,
        };
        let (Some((root, skip)), true) = (root, starts_path || (after_use && t.get(i + 1) == Some(&";"))) else {
            i += 1;
            continue;
        };
        for (path, glob, alias) in path_trees(&t, &mut i) {
            let mut abs = root.clone();
            let mut segs = path.iter().skip(skip).peekable();
            while segs.peek().is_some_and(|s| *s == "super") {
                abs.pop();
                segs.next();
            }
            abs.extend(segs.cloned());
            if after_use && !glob {
                if let Some(name) = alias.or_else(|| abs.last().cloned()) {
                    names.push((name, abs.clone()));
                }
            }
            if reexport {
                f.reexports.push((abs, glob));
            } else {
                f.uses.push((abs, glob));
            }
        }
    }
    f
}

/// The files (indices into `files`) an absolute path names an item of.
fn resolve(files: &[FileUses], path: &[String], glob: bool, depth: u32) -> Vec<usize> {
    let find = |m: &[String]| files.iter().position(|f| f.module.as_slice() == m);
    let mut k = 0;
    while k < path.len() && find(&path[..k + 1]).is_some() {
        k += 1;
    }
    if k == 0 {
        return Vec::new(); // the crate root, or outside the crate
    }
    let m = find(&path[..k]).expect("a module");
    if k == path.len() {
        // A module itself: with a glob, also every file it hands names on from.
        let mut out = vec![m];
        if glob && depth < 8 {
            for (p, g) in &files[m].reexports {
                out.extend(resolve(files, p, *g, depth + 1));
            }
        }
        return out;
    }
    resolve_name(files, m, &path[k], depth).unwrap_or(vec![m])
}

/// The file that defines `name` as module `m` offers it, if it can be found.
fn resolve_name(files: &[FileUses], m: usize, name: &str, depth: u32) -> Option<Vec<usize>> {
    if files[m].defs.iter().any(|d| d == name) {
        return Some(vec![m]);
    }
    if depth >= 8 {
        return None;
    }
    for (p, g) in &files[m].reexports {
        if !*g && p.last().is_some_and(|l| l == name) {
            return Some(resolve(files, p, false, depth + 1));
        }
    }
    for (p, g) in &files[m].reexports {
        if *g {
            let mut named = p.clone();
            named.push(name.to_string());
            let found = resolve(files, &named, false, depth + 1);
            let exact = files.iter().position(|f| f.module.as_slice() == p.as_slice());
            if let Some(&f) = found.first() {
                if Some(f) != exact || files[f].defs.iter().any(|d| d == name) {
                    return Some(found);
                }
            }
        }
    }
    None
}

/// The use graph of a set of files (`(path relative to src/, text)`), test
/// files left out: each file's path with the paths of the files it uses.
fn use_graph(files: &[(PathBuf, String)]) -> Vec<(String, Vec<String>)> {
    let files: Vec<&(PathBuf, String)> = files.iter().filter(|(rel, _)| !test_file(rel)).collect();
    let modules: Vec<Vec<String>> = files.iter().map(|(rel, _)| module_path(rel)).collect();
    let read: Vec<FileUses> = files.iter().map(|(rel, text)| read_uses(rel, text, &modules)).collect();
    let name = |k: usize| files[k].0.to_string_lossy().into_owned();
    (0..files.len())
        .map(|k| {
            let mut to: Vec<String> = Vec::new();
            for (p, g) in &read[k].uses {
                for t in resolve(&read, p, *g, 0) {
                    if t != k && !to.contains(&name(t)) {
                        to.push(name(t));
                    }
                }
            }
            (name(k), to)
        })
        .collect()
}

/// The cycles of a use graph: its strongly connected components of more
/// than one file (Tarjan), each sorted, in sorted order.
fn cycles(graph: &[(String, Vec<String>)]) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a [(String, Vec<String>)],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit(s: &mut T, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on[v] = true;
        for to in &s.g[v].1 {
            let Some(w) = s.g.iter().position(|(n, _)| n == to) else {
                continue;
            };
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on[w] = false;
                scc.push(s.g[w].0.clone());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                s.out.push(scc);
            }
        }
    }
    let n = graph.len();
    let mut s = T {
        g: graph,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

// ---- C layouts in the cores ----
//
// The cores (`core/`) work on Rust types; the C face (`fi/`) converts. A
// core names a libfabric C struct (one of `abi/`'s `#[repr(C)]` mirrors)
// only where the C layout is the data itself, listed here with why.

/// The C structs a core may name, and why.
const CORE_C_LAYOUTS: &[(&str, &str)] = &[
    // An EQ holds events as the bytes fi_eq_read copies out (fi_eq_write
    // hands them in that form): their sizes and the CM entry it builds for
    // a connection's events, whose `fid` is the endpoint's handle.
    ("fi_eq_entry", "core/eq.rs: the size of an event"),
    ("fi_eq_cm_entry", "core/eq.rs, core/connected.rs: a CM event's bytes"),
    ("fid", "core/eq.rs, core/connected.rs: the fid an event names"),
    // FI_BUFFERED_RECV: the engine writes the context the application
    // reads in front of each buffered message, in the receive buffer.
    ("fi_recv_context", "core/engine/buffered/held.rs: in the buffer"),
    ("fid_ep", "core/engine/buffered/held.rs: the context's endpoint"),
];

/// The C structs `abi/` mirrors (`struct name { .. }` in its tables).
fn abi_structs(abi_texts: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for text in abi_texts {
        for line in text.lines() {
            let l = strip_comment(line).trim_start();
            if let Some(rest) = l.strip_prefix("struct ") {
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if name.starts_with(|c: char| c.is_ascii_lowercase()) && !out.contains(&name) {
                    out.push(name);
                }
            }
        }
    }
    out
}

/// The C structs a core file's production code names outside
/// [`CORE_C_LAYOUTS`].
fn core_c_layouts(rel: &Path, text: &str, structs: &[String]) -> Vec<String> {
    if module_path(rel).first().map(String::as_str) != Some("core") || test_file(rel) {
        return Vec::new();
    }
    let code = production_text(text);
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        for w in path_tokens(line) {
            if structs.iter().any(|s| s == w) && !CORE_C_LAYOUTS.iter().any(|(c, _)| *c == w) {
                out.push(format!("{}:{}: a core names the C layout `{w}`", rel.display(), n + 1));
            }
        }
    }
    out
}

#[test]
fn cores_name_only_the_listed_c_layouts() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let abi: Vec<String> = files
        .iter()
        .filter(|f| f.strip_prefix(&src).is_ok_and(|r| r.starts_with("abi")))
        .map(|f| std::fs::read_to_string(f).expect("read source"))
        .collect();
    let structs = abi_structs(&abi);
    assert!(
        structs.iter().any(|s| s == "fi_info"),
        "abi/ mirrors no fi_info? {structs:?}"
    );
    let mut found = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).expect("under src/");
        found.extend(core_c_layouts(
            rel,
            &std::fs::read_to_string(f).expect("read source"),
            &structs,
        ));
    }
    assert!(found.is_empty(), "C layouts in the cores:\n{}", found.join("\n"));
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

/// Cycles not yet broken, each group exactly as it stands: nothing may be
/// added here, and a group that is broken or changes must leave the list.
/// None is left: the list stays so that a cycle someone must keep for a
/// while is written down here, not hidden.
const CYCLES_ALLOWED: &[&[&str]] = &[];

#[test]
fn no_cycles_between_files() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    paths.sort();
    let files: Vec<(PathBuf, String)> = paths
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(&src).expect("under src/").to_path_buf();
            (rel, std::fs::read_to_string(f).expect("read source"))
        })
        .collect();
    let graph = use_graph(&files);
    let found = cycles(&graph);
    let allowed: Vec<Vec<String>> = CYCLES_ALLOWED
        .iter()
        .map(|g| g.iter().map(|s| s.to_string()).collect())
        .collect();
    // Each new cycle with the uses that make it, for the reader to break.
    let new: Vec<String> = found
        .iter()
        .filter(|g| !allowed.contains(g))
        .map(|g| {
            let mut s = g.join(" ");
            for (from, to) in graph.iter().filter(|(f, _)| g.contains(f)) {
                let inside: Vec<&str> = to.iter().filter(|t| g.contains(t)).map(|t| t.as_str()).collect();
                s.push_str(&format!("\n    {from} -> {}", inside.join(", ")));
            }
            s
        })
        .collect();
    let stale: Vec<String> = allowed
        .iter()
        .filter(|g| !found.contains(g))
        .map(|g| g.join(" "))
        .collect();
    assert!(
        new.is_empty(),
        "files that use each other in a loop:\n{}",
        new.join("\n")
    );
    assert!(
        stale.is_empty(),
        "allowed cycles that are gone (take them off CYCLES_ALLOWED):\n{}",
        stale.join("\n")
    );
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

/// The cycles among planted files (`(path under src/, text)`).
fn planted_cycles(files: &[(&str, &str)]) -> Vec<Vec<String>> {
    let files: Vec<(PathBuf, String)> = files.iter().map(|(p, t)| (PathBuf::from(p), t.to_string())).collect();
    cycles(&use_graph(&files))
}

#[test]
fn a_cycle_between_two_files_is_caught() {
    let c = planted_cycles(&[
        ("core/mod.rs", "pub(crate) mod cq;\npub(crate) mod ep;\n"),
        ("core/cq.rs", "use crate::core::ep::Ep;\npub(crate) struct Cq;\n"),
        ("core/ep.rs", "pub(crate) struct Ep { cq: super::cq::Cq }\n"),
    ]);
    assert_eq!(c, vec![vec!["core/cq.rs".to_string(), "core/ep.rs".to_string()]]);
    // One way only: no cycle.
    let c = planted_cycles(&[
        ("core/mod.rs", "pub(crate) mod cq;\npub(crate) mod ep;\n"),
        ("core/cq.rs", "pub(crate) struct Cq;\n"),
        ("core/ep.rs", "pub(crate) struct Ep { cq: super::cq::Cq }\n"),
    ]);
    assert!(c.is_empty(), "{c:?}");
}

#[test]
fn a_cycle_through_a_chain_and_use_groups_is_caught() {
    // fi/ep.rs -> fi/rma.rs -> fi/mod.rs (an item it defines) -> fi/ep.rs,
    // the first through a `use` group, the last through a child path.
    let c = planted_cycles(&[
        ("fi/mod.rs", "mod ep;\nmod rma;\npub(crate) fn call() { ep::open() }\n"),
        (
            "fi/ep.rs",
            "use crate::{base::error::Result, fi::{rma::RMA_OPS, handle}};\npub(crate) fn open() {}\n",
        ),
        (
            "fi/rma.rs",
            "pub(crate) static RMA_OPS: u8 = 0;\nfn f() { super::call() }\n",
        ),
    ]);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0], ["fi/ep.rs", "fi/mod.rs", "fi/rma.rs"]);
    // A glob import uses the module and what it re-exports.
    let c = planted_cycles(&[
        (
            "abi/mod.rs",
            "mod types;\nmod consts;\npub use types::*;\npub use consts::*;\n",
        ),
        ("abi/types.rs", "use super::*;\npub struct fid;\n"),
        (
            "abi/consts.rs",
            "pub const FI_X: u32 = 0;\nfn f(_: crate::abi::types::fid) {}\n",
        ),
    ]);
    assert_eq!(c, vec![vec!["abi/consts.rs".to_string(), "abi/types.rs".to_string()]]);
    // A module imported by name (`self` in a group, or `as`) starts a path.
    let c = planted_cycles(&[
        ("fi/mod.rs", "mod cq;\nmod domain;\n"),
        ("fi/cq.rs", "use crate::fi::{self};\nfn f() { fi::domain::counts() }\n"),
        (
            "fi/domain.rs",
            "use super::cq as q;\npub(crate) fn counts() {}\nfn g() { q::open() }\n",
        ),
    ]);
    assert_eq!(c, vec![vec!["fi/cq.rs".to_string(), "fi/domain.rs".to_string()]]);
}

#[test]
fn re_exports_and_test_code_make_no_cycle() {
    // mod.rs hands `Ep` on; ep.rs uses cq.rs through that re-export.
    let files = [
        (
            "core/mod.rs",
            "pub(crate) mod cq;\npub(crate) mod ep;\npub(crate) use ep::Ep;\n",
        ),
        ("core/cq.rs", "pub(crate) struct Cq;\nfn f(_: &crate::core::Ep) {}\n"),
        (
            "core/ep.rs",
            "pub(crate) struct Ep;\n#[cfg(test)]\nmod tests {\n    use crate::core::cq::Cq;\n}\n",
        ),
    ];
    assert!(planted_cycles(&files).is_empty());
    // So is a module compiled only for tests under another cfg too (the
    // loom models), and its `use super::*`.
    let loom = [
        files[0],
        files[1],
        (
            "core/ep.rs",
            "pub(crate) struct Ep;\n#[cfg(all(test, loom))]\nmod models {\n    use super::*;\n    use crate::core::cq::Cq;\n}\n",
        ),
    ];
    assert!(planted_cycles(&loom).is_empty());
    // The same test module's use as production code closes the loop.
    let files = [
        files[0],
        files[1],
        ("core/ep.rs", "pub(crate) struct Ep;\nfn g(_: crate::core::cq::Cq) {}\n"),
    ];
    assert_eq!(planted_cycles(&files).len(), 1);
    // Test files are no part of the graph; comments and strings name nothing.
    let c = planted_cycles(&[
        ("core/mod.rs", "pub(crate) mod cq;\npub(crate) mod ep;\n"),
        (
            "core/cq.rs",
            "// crate::core::ep::Ep\nconst S: &str = \"crate::core::ep::Ep\";\n",
        ),
        ("core/ep.rs", "pub(crate) struct Ep(super::cq::Cq);\n"),
        ("core/ep/tests.rs", "use crate::core::cq::Cq;\n"),
    ]);
    assert!(c.is_empty(), "{c:?}");
}

#[test]
fn a_c_layout_in_a_core_is_caught() {
    let structs = abi_structs(&[
        "abi_structs! {\n    struct fi_info { caps: u64 }\n    struct fi_eq_entry { fid: *mut fid }\n}\n".to_string(),
    ]);
    assert_eq!(structs, ["fi_info", "fi_eq_entry"]);
    let v = core_c_layouts(Path::new("core/ep.rs"), "fn f(i: &fi_info) {}\n", &structs);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].contains("`fi_info`"));
    // A listed layout, a test module, a test file, another layer: fine.
    assert!(core_c_layouts(
        Path::new("core/eq.rs"),
        "const N: usize = size_of::<fi_eq_entry>();\n",
        &structs
    )
    .is_empty());
    let in_test = "#[cfg(test)]\nmod tests {\n    fn f(i: &fi_info) {}\n}\n";
    assert!(core_c_layouts(Path::new("core/ep.rs"), in_test, &structs).is_empty());
    assert!(core_c_layouts(Path::new("core/pep/tests.rs"), "fn f(i: &fi_info) {}\n", &structs).is_empty());
    assert!(core_c_layouts(Path::new("fi/attr.rs"), "fn f(i: &fi_info) {}\n", &structs).is_empty());
}
