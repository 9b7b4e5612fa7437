//! `include/gdrapi.h` agrees with the Rust FFI layer.
//!
//! The header is written by hand (it must read like gdrcopy 2.6's own), so it can drift from
//! `src/ffi`. This test regenerates C declarations from `src/ffi` with cbindgen (settings in
//! `cbindgen.toml`) and compares them with the header declaration by declaration: every
//! function signature (parameter names, whitespace and `const` placement ignored), the layout
//! of every struct (offsets, sizes and field types; a C bitfield unit matches any 4-byte Rust
//! field at its offset), every enumerator's value and the version macros.

use std::collections::{BTreeMap, BTreeSet};

/// A parsed set of C declarations: just enough C for the two texts compared here.
#[derive(Debug, Default)]
struct Decls {
    /// Object-like macros: name -> replacement text.
    macros: BTreeMap<String, String>,
    /// Functions: name -> normalized return type and parameter types.
    functions: BTreeMap<String, (String, Vec<String>)>,
    /// Structs by typedef (or tag) name.
    structs: BTreeMap<String, Vec<Field>>,
    /// Enums by typedef name: enumerators and their values.
    enums: BTreeMap<String, Vec<(String, i64)>>,
    /// Other typedefs: name -> normalized type.
    aliases: BTreeMap<String, String>,
}

/// One struct member.
#[derive(Debug, Clone)]
struct Field {
    name: String,
    ty: String,
    /// Width of a bitfield, `None` for an ordinary member.
    bits: Option<u32>,
    /// Element count of an array member (1 otherwise).
    count: u64,
}

/// One laid-out storage unit of a struct: an ordinary member or a run of bitfields.
#[derive(Debug, Clone, PartialEq)]
struct Slot {
    offset: u64,
    size: u64,
    /// Member name, or `None` for a bitfield unit.
    name: Option<String>,
    ty: String,
}

fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |end| &after[end + 2..]);
            out.push(' ');
        } else if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |end| &after[end..]);
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            if !word.is_empty() {
                tokens.push(std::mem::take(&mut word));
            }
            if !c.is_whitespace() {
                tokens.push(c.to_string());
            }
        }
    }
    if !word.is_empty() {
        tokens.push(word);
    }
    tokens
}

/// A canonical spelling of a C type: no `struct`/`enum` keywords, `unsigned` spelled
/// `unsigned int`, `const` written after what it qualifies, single spaces.
fn normalize_type(tokens: &[String]) -> String {
    let mut t: Vec<&str> = tokens
        .iter()
        .map(String::as_str)
        .filter(|t| !matches!(*t, "struct" | "enum" | "volatile" | "restrict"))
        .collect();
    // Leading `const T` -> `T const`.
    if t.first() == Some(&"const") {
        t.remove(0);
        let base_end = t.iter().position(|x| *x == "*").unwrap_or(t.len());
        t.insert(base_end, "const");
    }
    let mut out: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < t.len() {
        match (t[i], t.get(i + 1).copied()) {
            ("unsigned" | "signed", next)
                if !matches!(next, Some("int" | "long" | "short" | "char")) =>
            {
                out.push(t[i]);
                out.push("int");
            }
            ("long", Some("int")) | ("short", Some("int")) => {
                out.push(t[i]);
                i += 1;
            }
            ("signed", Some(_)) => {}
            _ => out.push(t[i]),
        }
        i += 1;
    }
    out.join(" ")
}

/// Splits `type name` (a parameter or member) into the normalized type and the name.
fn split_declarator(tokens: &[String]) -> (String, String) {
    match tokens.split_last() {
        Some((last, ty)) if !ty.is_empty() && is_identifier(last) && !is_type_word(last) => {
            (normalize_type(ty), last.clone())
        }
        _ => (normalize_type(tokens), String::new()),
    }
}

fn is_identifier(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

fn is_type_word(s: &str) -> bool {
    matches!(
        s,
        "int" | "long" | "short" | "char" | "unsigned" | "signed" | "void" | "const"
    )
}

fn parse_int(text: &str) -> Option<i64> {
    let t = text
        .trim()
        .trim_start_matches('(')
        .trim_end_matches(')')
        .trim();
    let t = t.trim_end_matches(['u', 'U', 'l', 'L']);
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        i64::from_str_radix(hex, 16).ok()
    } else {
        t.parse().ok()
    }
}

/// Splits `text` at `sep` where no brace or parenthesis is open.
fn split_top(text: &str, sep: char) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in text.chars() {
        match c {
            '{' | '(' => depth += 1,
            '}' | ')' => depth -= 1,
            _ => {}
        }
        if c == sep && depth == 0 {
            parts.push(std::mem::take(&mut cur));
        } else if c == '}' && depth < 0 {
            // The brace closing `extern "C" {`.
            depth = 0;
        } else {
            cur.push(c);
        }
    }
    parts.push(cur);
    parts
}

fn parse_fields(body: &str) -> Vec<Field> {
    let mut fields = Vec::new();
    for member in body.split(';') {
        let (decl, bits) = match member.split_once(':') {
            Some((d, b)) => (d, parse_int(b).map(|b| b as u32)),
            None => (member, None),
        };
        let (decl, count) = match decl.split_once('[') {
            Some((d, n)) => (
                d,
                parse_int(n.trim_end().trim_end_matches(']')).unwrap_or(0) as u64,
            ),
            None => (decl, 1),
        };
        let tokens = tokenize(decl);
        if tokens.is_empty() {
            continue;
        }
        let (ty, name) = split_declarator(&tokens);
        fields.push(Field {
            name,
            ty,
            bits,
            count,
        });
    }
    fields
}

fn parse_enumerators(body: &str) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    let mut next = 0i64;
    for item in body.split(',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let (name, value) = match item.split_once('=') {
            Some((n, v)) => (n.trim(), parse_int(v).unwrap_or(i64::MIN)),
            None => (item, next),
        };
        out.push((name.to_string(), value));
        next = value.wrapping_add(1);
    }
    out
}

/// Parses the declarations of a header (preprocessor conditionals are ignored, so both
/// branches of `#ifdef __cplusplus` are read: only `extern "C" {` and its brace lie there).
fn parse(text: &str) -> Decls {
    let mut d = Decls::default();
    let text = strip_comments(text);
    let mut code = String::new();
    for line in text.lines() {
        let l = line.trim();
        if let Some(def) = l.strip_prefix('#') {
            let def = def.trim_start();
            if let Some(rest) = def.strip_prefix("define") {
                let rest = rest.trim_start();
                let name_end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                let (name, value) = rest.split_at(name_end);
                // Object-like macros only: a function-like one has '(' right after its name.
                if !value.starts_with('(') {
                    d.macros.insert(name.to_string(), value.trim().to_string());
                }
            }
            continue;
        }
        code.push_str(line);
        code.push('\n');
    }
    let code = code.replace("extern \"C\" {", " ");

    for decl in split_top(&code, ';') {
        let decl = decl.split_whitespace().collect::<Vec<_>>().join(" ");
        if decl.is_empty() {
            continue;
        }
        if let (Some(open), Some(close)) = (decl.find('{'), decl.rfind('}')) {
            let head = tokenize(&decl[..open]);
            let body = &decl[open + 1..close];
            let tail = tokenize(&decl[close + 1..]);
            let tag = head
                .iter()
                .rev()
                .find(|t| !matches!(t.as_str(), "typedef" | "struct" | "enum"));
            let name = tail.last().or(tag).cloned().unwrap_or_default();
            if head.iter().any(|t| t == "enum") {
                d.enums.insert(name, parse_enumerators(body));
            } else {
                d.structs.insert(name, parse_fields(body));
            }
        } else if let Some(rest) = decl.strip_prefix("typedef ") {
            let tokens = tokenize(rest);
            let (ty, name) = split_declarator(&tokens);
            d.aliases.insert(name, ty);
        } else if let (Some(open), Some(close)) = (decl.find('('), decl.rfind(')')) {
            let (ret, name) = split_declarator(&tokenize(&decl[..open]));
            let params = &decl[open + 1..close];
            let params: Vec<String> = if params.trim() == "void" || params.trim().is_empty() {
                Vec::new()
            } else {
                split_top(params, ',')
                    .iter()
                    .map(|p| split_declarator(&tokenize(p)).0)
                    .collect()
            };
            d.functions.insert(name, (ret, params));
        }
    }
    d
}

impl Decls {
    /// Size of a type in bytes on LP64, following typedefs of either side.
    fn size_of(&self, ty: &str, other: &Decls) -> Option<u64> {
        if ty.ends_with('*') {
            return Some(8);
        }
        let base = ty.trim_end_matches(" const").trim_start_matches("const ");
        let size = match base {
            "char" | "unsigned char" | "int8_t" | "uint8_t" => 1,
            "short" | "unsigned short" | "int16_t" | "uint16_t" => 2,
            "int" | "unsigned int" | "int32_t" | "uint32_t" => 4,
            "long" | "unsigned long" | "int64_t" | "uint64_t" | "size_t" | "uintptr_t" => 8,
            _ => {
                for decls in [self, other] {
                    if decls.enums.contains_key(base) {
                        return Some(4);
                    }
                    if let Some(alias) = decls.aliases.get(base) {
                        return decls.size_of(alias, other);
                    }
                    if let Some(fields) = decls.structs.get(base) {
                        return decls.layout(fields, other).map(|(_, size)| size);
                    }
                }
                return None;
            }
        };
        Some(size)
    }

    /// Storage slots and total size of a struct (natural alignment, bitfields packed into
    /// units of their declared type as GCC does for these simple cases).
    fn layout(&self, fields: &[Field], other: &Decls) -> Option<(Vec<Slot>, u64)> {
        let mut slots: Vec<Slot> = Vec::new();
        let mut offset = 0u64;
        let mut align_max = 1u64;
        let mut open_bits: Option<(u64, u32)> = None; // (unit size, bits used)
        for f in fields {
            let size = self.size_of(&f.ty, other)?;
            align_max = align_max.max(size);
            if let Some(bits) = f.bits {
                if let Some((unit, used)) = open_bits {
                    if unit == size && used + bits <= (unit * 8) as u32 {
                        open_bits = Some((unit, used + bits));
                        continue;
                    }
                }
                offset = offset.div_ceil(size) * size;
                slots.push(Slot {
                    offset,
                    size,
                    name: None,
                    ty: f.ty.clone(),
                });
                offset += size;
                open_bits = Some((size, bits));
                continue;
            }
            open_bits = None;
            offset = offset.div_ceil(size) * size;
            slots.push(Slot {
                offset,
                size: size * f.count,
                name: Some(f.name.clone()),
                ty: f.ty.clone(),
            });
            offset += size * f.count;
        }
        Some((slots, offset.div_ceil(align_max) * align_max))
    }
}

/// Differences between the hand-written header and the declarations generated from Rust.
fn compare(header: &Decls, rust: &Decls) -> Vec<String> {
    let mut errors = Vec::new();

    // Functions: the same set (the header spells the legacy gdr_get_info as a macro) and
    // the same signatures.
    let header_fns: BTreeSet<&String> = header.functions.keys().collect();
    let rust_fns: BTreeSet<&String> = rust
        .functions
        .keys()
        .filter(|n| *n != "gdr_get_info")
        .collect();
    for missing in rust_fns.difference(&header_fns) {
        errors.push(format!(
            "function {missing} is exported by src/ffi but not declared in the header"
        ));
    }
    for extra in header_fns.difference(&rust_fns) {
        errors.push(format!(
            "function {extra} is declared in the header but not defined in src/ffi"
        ));
    }
    for (name, (ret, params)) in &header.functions {
        if let Some((rret, rparams)) = rust.functions.get(name) {
            if ret != rret || params != rparams {
                errors.push(format!(
                    "{name}: header has {ret} ({}), src/ffi has {rret} ({})",
                    params.join(", "),
                    rparams.join(", ")
                ));
            }
        }
    }
    if header.macros.get("gdr_get_info").map(String::as_str) != Some("gdr_get_info_v2") {
        errors.push("the header must #define gdr_get_info gdr_get_info_v2".to_string());
    }
    if !rust.functions.contains_key("gdr_get_info") {
        errors.push("src/ffi does not define the legacy gdr_get_info".to_string());
    }

    // Structs: every header struct has the same layout in Rust.
    for (name, fields) in &header.structs {
        let Some(rfields) = rust.structs.get(name) else {
            errors.push(format!(
                "struct {name} of the header has no #[repr(C)] twin in src/ffi"
            ));
            continue;
        };
        let (Some((slots, size)), Some((rslots, rsize))) =
            (header.layout(fields, rust), rust.layout(rfields, header))
        else {
            errors.push(format!("struct {name}: a member type of unknown size"));
            continue;
        };
        if size != rsize {
            errors.push(format!(
                "struct {name}: size {size} in the header, {rsize} in src/ffi"
            ));
        }
        if slots.len() != rslots.len() {
            errors.push(format!(
                "struct {name}: {} storage units in the header, {} in src/ffi",
                slots.len(),
                rslots.len()
            ));
        }
        for (h, r) in slots.iter().zip(&rslots) {
            let same_place = h.offset == r.offset && h.size == r.size;
            let same_member = match &h.name {
                Some(_) => h.name == r.name && h.ty == r.ty,
                None => true, // a bitfield unit: Rust models it as one integer
            };
            if !same_place || !same_member {
                errors.push(format!(
                    "struct {name}: header {h:?} differs from src/ffi {r:?}"
                ));
            }
        }
    }
    // The legacy struct is the first 40 bytes of gdr_info_v2_t.
    if let (Some(v1), Some(v2)) = (
        rust.structs.get("gdr_info_v1_t"),
        header.structs.get("gdr_info_v2_t"),
    ) {
        match (rust.layout(v1, header), header.layout(v2, rust)) {
            (Some((s1, 40)), Some((s2, _))) => {
                if s1
                    .iter()
                    .zip(&s2)
                    .any(|(a, b)| a.offset != b.offset || a.size != b.size)
                {
                    errors.push(
                        "gdr_info_v1_t is not a prefix of the header's gdr_info_v2_t".to_string(),
                    );
                }
            }
            _ => errors.push("gdr_info_v1_t in src/ffi is not 40 bytes".to_string()),
        }
    }

    // Enums: each header enum type exists in Rust as a 4-byte type, each enumerator as a
    // constant (or enumerator) of the same value.
    let mut rust_values: BTreeMap<&str, i64> = BTreeMap::new();
    for (name, value) in &rust.macros {
        if let Some(v) = parse_int(value) {
            rust_values.insert(name, v);
        }
    }
    for items in rust.enums.values() {
        for (n, v) in items {
            rust_values.insert(n, *v);
        }
    }
    for (ty, items) in &header.enums {
        if rust.size_of(ty, header) != Some(4)
            || !(rust.aliases.contains_key(ty) || rust.enums.contains_key(ty))
        {
            errors.push(format!(
                "enum type {ty}: no 4-byte type of that name in src/ffi"
            ));
        }
        for (name, value) in items {
            match rust_values.get(name.as_str()) {
                Some(v) if v == value => {}
                Some(v) => errors.push(format!(
                    "{ty}::{name} is {value} in the header, {v} in src/ffi"
                )),
                None => errors.push(format!("{ty}::{name} has no constant in src/ffi")),
            }
        }
    }

    // Macros that both sides define (the version numbers) agree.
    for (name, value) in &header.macros {
        if let (Some(h), Some(r)) = (parse_int(value), rust_values.get(name.as_str())) {
            if h != *r {
                errors.push(format!("macro {name} is {h} in the header, {r} in src/ffi"));
            }
        }
    }
    errors
}

fn root() -> &'static str {
    env!("CARGO_MANIFEST_DIR")
}

fn header_text() -> String {
    std::fs::read_to_string(format!("{}/include/gdrapi.h", root())).expect("read include/gdrapi.h")
}

/// The declarations cbindgen generates from `src/ffi` (also written to the target's tmp
/// folder for inspection).
fn generated_text() -> String {
    let config = cbindgen::Config::from_file(format!("{}/cbindgen.toml", root()))
        .expect("read cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(format!("{}/src/ffi/mod.rs", root()))
        .generate()
        .expect("cbindgen parses src/ffi");
    let mut out = Vec::new();
    bindings.write(&mut out);
    let text = String::from_utf8(out).expect("cbindgen writes UTF-8");
    let dump = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("gdrapi-from-ffi.h");
    let _ = std::fs::write(dump, &text);
    text
}

#[test]
fn header_matches_ffi() {
    let header = parse(&header_text());
    let rust = parse(&generated_text());
    // The parser saw what it must see, so that an empty comparison means something.
    assert_eq!(
        header.functions.len(),
        18,
        "functions parsed from the header: {:?}",
        header.functions.keys()
    );
    assert_eq!(
        rust.functions.len(),
        19,
        "functions parsed from src/ffi: {:?}",
        rust.functions.keys()
    );
    assert_eq!(
        header.enums.len(),
        4,
        "enums parsed from the header: {:?}",
        header.enums.keys()
    );
    assert!(
        header.structs.contains_key("gdr_info_v2_t") && header.structs.contains_key("gdr_mh_t")
    );
    let errors = compare(&header, &rust);
    assert!(
        errors.is_empty(),
        "include/gdrapi.h disagrees with src/ffi:\n  {}",
        errors.join("\n  ")
    );
}

#[test]
fn version_macros_parse_as_build_scripts_expect() {
    // The build reads these with awk '/#define GDR_API_MAJOR_VERSION/ {print $3}'.
    let text = header_text();
    for (name, value) in [
        ("GDR_API_MAJOR_VERSION", "2"),
        ("GDR_API_MINOR_VERSION", "6"),
    ] {
        let line = text
            .lines()
            .find(|l| l.contains(&format!("#define {name}")))
            .unwrap_or_else(|| panic!("no #define {name}"));
        assert_eq!(line.split_whitespace().nth(2), Some(value), "{line}");
    }
}

/// The comparison notices drift; each edit of the header must produce an error.
#[test]
fn compare_detects_drift() {
    let good = header_text();
    let rust = parse(&generated_text());
    let edits = [
        (
            "size_t size, int flags)",
            "size_t size, unsigned flags)",
            "gdr_map_v2",
        ),
        (
            "int gdr_close(gdr_t g);",
            "void gdr_close(gdr_t g);",
            "gdr_close",
        ),
        (
            "const void *h_ptr, size_t size);",
            "void *h_ptr, size_t size);",
            "gdr_copy_to_mapping",
        ),
        (
            "    uint32_t page_size;",
            "    uint64_t page_size;",
            "gdr_info_v2",
        ),
        (
            "    unsigned wc_mapping:1;",
            "    unsigned wc_mapping:1;\n    unsigned char extra;",
            "gdr_info_v2",
        ),
        (
            "GDR_MAPPING_TYPE_DEVICE  = 3",
            "GDR_MAPPING_TYPE_DEVICE  = 5",
            "GDR_MAPPING_TYPE_DEVICE",
        ),
        (
            "GDR_ATTR_USING_DMA_BUF_MMAP          = 3,",
            "",
            "GDR_ATTR_MAX",
        ),
        (
            "#define GDR_API_MINOR_VERSION    6",
            "#define GDR_API_MINOR_VERSION    7",
            "GDR_API_MINOR_VERSION",
        ),
        ("#define gdr_get_info gdr_get_info_v2", "", "gdr_get_info"),
        (
            "int gdr_unpin_buffer(gdr_t g, gdr_mh_t handle);",
            "",
            "gdr_unpin_buffer",
        ),
    ];
    for (from, to, what) in edits {
        assert!(
            good.contains(from),
            "edit target {from:?} not in the header"
        );
        let errors = compare(&parse(&good.replacen(from, to, 1)), &rust);
        assert!(
            errors.iter().any(|e| e.contains(what)),
            "editing {from:?} -> {to:?} went unnoticed: {errors:?}"
        );
    }
}

#[test]
fn normalization() {
    let t = |s: &str| normalize_type(&tokenize(s));
    assert_eq!(t("const void *"), t("void const *"));
    assert_eq!(t("unsigned"), "unsigned int");
    assert_eq!(t("unsigned long int"), "unsigned long");
    assert_eq!(t("enum gdr_attr"), "gdr_attr");
    assert_ne!(t("void *"), t("const void *"));
    assert_ne!(t("void **"), t("void *"));
}
