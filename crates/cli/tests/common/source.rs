//! Rough scans of the workspace's Rust sources, shared by the source
//! tests (function and file lengths, import circles): comments, strings
//! and character literals are blanked first, so only code counts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The text with comments, strings and character literals blanked (lines
/// kept), so that only code braces count.
pub fn code_only(src: &str) -> Vec<u8> {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            let end = rest
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |p| i + p);
            blank(&mut out, i, end);
            i = end;
        } else if rest.starts_with(b"/*") {
            let end = src[i + 2..].find("*/").map_or(b.len(), |p| i + 2 + p + 2);
            blank(&mut out, i, end);
            i = end;
        } else if let Some(hashes) = raw_string_start(rest) {
            let close = format!("\"{}", "#".repeat(hashes));
            let body = i + 2 + hashes;
            let end = src[body..]
                .find(&close)
                .map_or(b.len(), |p| body + p + close.len());
            blank(&mut out, i, end);
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i, (j + 1).min(b.len()));
            i = j + 1;
        } else if b[i] == b'\'' {
            // A character literal ('{', '\'', '\u{7b}'), not a lifetime.
            let len = match rest.get(1) {
                Some(b'\\') => rest[2..].iter().position(|&c| c == b'\'').map(|p| p + 3),
                Some(_) if rest.get(2) == Some(&b'\'') => Some(3),
                _ => None,
            };
            match len {
                Some(n) => {
                    blank(&mut out, i, i + n);
                    i += n;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out
}

/// `r"`, `r#"`, ... at the start of `rest`: the number of `#`s.
fn raw_string_start(rest: &[u8]) -> Option<usize> {
    if rest.first() != Some(&b'r') {
        return None;
    }
    let hashes = rest[1..].iter().take_while(|&&c| c == b'#').count();
    (rest.get(1 + hashes) == Some(&b'"')).then_some(hashes)
}

/// Each function as (line of `fn`, name, lines from `fn` to its closing
/// brace). A `fn` without a body (a trait's declaration) has none.
pub fn functions(src: &str) -> Vec<(usize, String, usize)> {
    let code = code_only(src);
    let text = String::from_utf8_lossy(&code);
    let line_of = |pos: usize| text[..pos].matches('\n').count() + 1;
    let mut found = Vec::new();
    let bytes = text.as_bytes();
    let mut search = 0;
    while let Some(p) = text[search..].find("fn ") {
        let at = search + p;
        search = at + 3;
        let word_start =
            at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
        if !word_start {
            continue;
        }
        let name: String = text[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        // The body opens at the first `{` before any `;` (a declaration).
        let Some(open) = text[at..].find(['{', ';']).map(|q| at + q) else {
            continue;
        };
        if bytes[open] == b';' {
            continue;
        }
        let Some(close) = matching_close(bytes, open) else {
            continue;
        };
        let first = line_of(at);
        found.push((first, name, line_of(close) - first + 1));
    }
    found
}

/// The `}` that closes the `{` at `open` (blanked code, as from
/// [`code_only`]), or `None` when the text ends first.
pub fn matching_close(bytes: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, &c) in bytes[open..].iter().enumerate() {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(open + k);
                }
            }
            _ => {}
        }
    }
    None
}

/// The workspace's `crates/` folder.
pub fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `.rs` files of crate `krate`'s `src/`, sorted; `src/bin/` is left
/// out (each file there is a crate of its own).
pub fn crate_sources(krate: &str) -> Vec<PathBuf> {
    let src = crates_dir().join(krate).join("src");
    let mut files = Vec::new();
    super::rust_files(&src, &mut files);
    files.retain(|f| !f.starts_with(src.join("bin")));
    files.sort();
    files
}

/// Every crate of the workspace (its folder name under `crates/`).
pub fn crate_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(crates_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A file's module path in its crate: `lib.rs` and `main.rs` are the
/// root, `a.rs` and `a/mod.rs` are `a`, `a/b.rs` is `a::b`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main")
        || parts.last().is_some_and(|p| p == "mod")
    {
        parts.pop();
    }
    parts
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Whether `at` starts a word (not inside an identifier, not `$crate`).
fn word_start(b: &[u8], at: usize) -> bool {
    at == 0 || !(is_ident(b[at - 1]) || b[at - 1] == b'$' || b[at - 1] == b':')
}

/// The brace ranges of inline `mod name { ... }` blocks: a `super::`
/// inside one first climbs out of the block, not out of the file.
fn inline_mods(code: &str) -> Vec<(usize, usize)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(p) = code[from..].find("mod ") {
        let at = from + p;
        from = at + 4;
        if !word_start(b, at) {
            continue;
        }
        let Some(q) = code[at..].find(['{', ';']).map(|q| at + q) else {
            continue;
        };
        if b[q] == b';' {
            continue;
        }
        let mut depth = 0usize;
        for (k, &c) in b[q..].iter().enumerate() {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        out.push((q, q + k));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// `use` trees expanded into whole paths: `crate::{a::B, c::{D, E}}` is
/// `crate::a::B`, `crate::c::D`, `crate::c::E`.
fn expand_use(tree: &str) -> Vec<String> {
    let Some(open) = tree.find('{') else {
        // `a::B as C` names `a::B`.
        let path = tree.split_whitespace().next().unwrap_or_default();
        return vec![path.to_string()];
    };
    let prefix = tree[..open].trim();
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| expand_use(p).into_iter().map(|q| format!("{prefix}{q}")))
        .collect()
}

/// Every `crate::` and `super::` path of a file's code (comments and
/// strings blanked), with its position: `use` trees expanded, and
/// paths written inline.
fn paths(code: &str) -> Vec<(usize, String)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(p) = code[from..].find("use ") {
        let at = from + p;
        from = at + 4;
        if word_start(b, at) {
            if let Some(end) = code[at..].find(';') {
                let tree = &code[at + 4..at + end];
                out.extend(expand_use(tree).into_iter().map(|path| (at, path)));
            }
        }
    }
    for head in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(p) = code[from..].find(head) {
            let at = from + p;
            from = at + head.len();
            if !word_start(b, at) {
                continue;
            }
            let len = b[at..]
                .iter()
                .position(|&c| !(is_ident(c) || c == b':'))
                .unwrap_or(b.len() - at);
            out.push((at, code[at..at + len].to_string()));
        }
    }
    out
}

/// The module a path names, from a file of module `here` at `depth`
/// inline modules deep; `None` for a path inside the file itself or
/// outside the crate.
fn target(here: &[String], depth: usize, path: &str) -> Option<Vec<String>> {
    let mut parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
    let mut module: Vec<String>;
    if parts.first() == Some(&"crate") {
        parts.remove(0);
        module = Vec::new();
    } else if parts.first() == Some(&"super") {
        let supers = parts.iter().take_while(|p| **p == "super").count();
        if supers <= depth {
            return None;
        }
        module = here.to_vec();
        for _ in 0..supers - depth {
            module.pop()?;
        }
        parts.drain(..supers);
    } else {
        return None;
    }
    module.extend(parts.iter().map(|p| p.to_string()));
    Some(module)
}

/// The files of crate `krate` each file reaches through `crate::` and
/// `super::` paths (a path names the file of its longest module prefix),
/// by file name relative to `src/`.
pub fn import_graph(krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src = crates_dir().join(krate).join("src");
    let files = crate_sources(krate);
    let name = |f: &Path| f.strip_prefix(&src).unwrap().display().to_string();
    let modules: BTreeMap<Vec<String>, String> = files
        .iter()
        .map(|f| (module_of(&src, f), name(f)))
        .collect();
    let mut graph = BTreeMap::new();
    for file in &files {
        let here = module_of(&src, file);
        let code = String::from_utf8(code_only(&std::fs::read_to_string(file).unwrap())).unwrap();
        let blocks = inline_mods(&code);
        let mut uses = BTreeSet::new();
        for (at, path) in paths(&code) {
            let depth = blocks.iter().filter(|(o, c)| *o < at && at < *c).count();
            let Some(mut module) = target(&here, depth, &path) else {
                continue;
            };
            while !modules.contains_key(&module) {
                module.pop();
            }
            let used = &modules[&module];
            if *used != name(file) {
                uses.insert(used.clone());
            }
        }
        graph.insert(name(file), uses);
    }
    graph
}

/// The files each file reaches, directly or through a chain.
fn reach(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<&str> = vec![from];
    while let Some(f) = todo.pop() {
        for g in graph.get(f).into_iter().flatten() {
            if seen.insert(g.clone()) {
                todo.push(g);
            }
        }
    }
    seen
}

/// The import circles of crate `krate`: groups of two or more files that
/// each reach the others (A uses B and B uses A, directly or through a
/// chain), each sorted.
pub fn import_circles(krate: &str) -> Vec<Vec<String>> {
    circles(&import_graph(krate))
}

/// The circles of a graph of files (see [`import_circles`]).
pub fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|f| (f, reach(graph, f))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for (f, from_f) in &reached {
        if out.iter().any(|c| c.contains(f)) {
            continue;
        }
        let mut circle: Vec<String> = from_f
            .iter()
            .filter(|g| *g != *f && reached.get(g).is_some_and(|r| r.contains(*f)))
            .cloned()
            .collect();
        if !circle.is_empty() {
            circle.push((*f).clone());
            circle.sort();
            out.push(circle);
        }
    }
    out
}

/// Each inherent `impl` block of a file (`impl Type {`, `impl<T> Type<T>
/// {`, not `impl Trait for Type`) as (line of `impl`, the type's last path
/// segment without its generics). Only an `impl` that starts its line is
/// an item (one in a signature, `-> impl Iterator`, is not); a macro's
/// `impl $t` names no type and is left out.
pub fn inherent_impls(src: &str) -> Vec<(usize, String)> {
    let code = code_only(src);
    let text = String::from_utf8_lossy(&code);
    let mut found = Vec::new();
    for (k, line) in text.lines().enumerate() {
        let item = line.trim_start();
        let item = item.strip_prefix("unsafe ").unwrap_or(item);
        let Some(rest) = item.strip_prefix("impl") else {
            continue;
        };
        if !rest.starts_with([' ', '<']) {
            continue;
        }
        // The header runs to the body's brace (or the end of the line, for
        // a header rustfmt broke over lines).
        let header = rest.split('{').next().unwrap_or(rest);
        let header = skip_generics(header.trim_start());
        let header = header.split(" where").next().unwrap_or(header);
        if header.split_whitespace().any(|w| w == "for") {
            continue;
        }
        let path: String = header
            .trim_start()
            .chars()
            .take_while(|c| is_ident(*c as u8) || *c == ':' || *c == '$')
            .collect();
        let name = path.rsplit("::").next().unwrap_or_default();
        if !name.is_empty() && !name.starts_with('$') {
            found.push((k + 1, name.to_string()));
        }
    }
    found
}

/// `text` after a leading `<...>` (angle brackets balanced), else `text`.
fn skip_generics(text: &str) -> &str {
    if !text.starts_with('<') {
        return text;
    }
    let mut depth = 0usize;
    let mut last = ' ';
    for (i, c) in text.char_indices() {
        let arrow = last == '-';
        last = c;
        match c {
            '<' => depth += 1,
            '>' if !arrow => {
                depth -= 1;
                if depth == 0 {
                    return &text[i + 1..];
                }
            }
            _ => {}
        }
    }
    ""
}
