//! The code an app developer copies from the README and docs/api.md is the
//! code CI compiles and runs: every Rust or C block there follows an
//! `<!-- include: PATH -->` marker and equals PATH (`scripts/sync-includes.py`
//! rewrites them), and every included file exists.

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// (marker path or None, language, body) of each fenced block.
fn blocks(text: &str) -> Vec<(Option<String>, String, String)> {
    let mut out = vec![];
    let mut lines = text.lines().peekable();
    let mut marker: Option<String> = None;
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("<!-- include: ") {
            marker = rest.strip_suffix(" -->").map(str::to_string);
            continue;
        }
        if let Some(lang) = line.strip_prefix("```") {
            let mut body = String::new();
            for l in lines.by_ref() {
                if l.starts_with("```") {
                    break;
                }
                body.push_str(l);
                body.push('\n');
            }
            out.push((marker.take(), lang.to_string(), body));
            continue;
        }
        if !line.trim().is_empty() {
            marker = None;
        }
    }
    out
}

#[test]
fn code_blocks_in_the_readme_and_api_docs_are_the_files_ci_runs() {
    let mut included = 0;
    for doc in ["README.md", "docs/api.md"] {
        let text = std::fs::read_to_string(root().join(doc)).expect("doc");
        for (marker, lang, body) in blocks(&text) {
            if lang != "rust" && lang != "c" {
                continue;
            }
            let path = marker
                .unwrap_or_else(|| panic!("{doc}: a ```{lang} block without an include marker:\n{body}"));
            let file = std::fs::read_to_string(root().join(&path))
                .unwrap_or_else(|e| panic!("{doc}: include {path}: {e}"));
            assert!(
                file == body,
                "{doc}: the block of {path} differs from the file: run scripts/sync-includes.py"
            );
            included += 1;
        }
    }
    assert!(included >= 4, "only {included} included examples");
}
