//! CONTRIBUTING.md shows each convention with code from the library: every `rust` block of its
//! "Conventions" section must occur in `src/`, line after line (indentation aside), so that a
//! change to the code that a convention quotes changes the quote too.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The lines of `text`, trimmed, blank ones left out.
fn lines(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn the_conventions_quote_the_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("CONTRIBUTING.md")).unwrap();
    let start = doc.find("\n## Conventions").expect("a Conventions section");
    let section = &doc[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let snippets: Vec<&str> = section
        .split("```rust\n")
        .skip(1)
        .map(|s| &s[..s.find("```").expect("a closed block")])
        .collect();
    assert!(snippets.len() >= 5, "{} rust blocks", snippets.len());
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let sources: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    let sources: Vec<Vec<&str>> = sources.iter().map(|s| lines(s)).collect();
    for snippet in snippets {
        let want = lines(snippet);
        let found = sources
            .iter()
            .any(|src| src.windows(want.len()).any(|w| w == want.as_slice()));
        assert!(
            found,
            "CONTRIBUTING.md quotes code that src/ does not hold:\n{snippet}"
        );
    }
}
