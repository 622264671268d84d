//! Generates TFLite's flatbuffer readers from `schema.fbs` with planus's own
//! code generator (the library planus-cli 1.3.0 calls), into `OUT_DIR`, so
//! that the 2.8 MB of generated Rust is never committed.
//!
//! planus does not accept `(deprecated)` on enum values, union members and
//! tables, so those three attributes are dropped first (deprecated fields
//! keep theirs), as `regenerate.sh` did.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=schema.fbs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let schema = std::fs::read_to_string("schema.fbs").expect("tflite/schema/schema.fbs");
    let accepted: String = schema.lines().map(|l| format!("{}\n", undeprecate(l))).collect();
    let fbs = out.join("schema.fbs");
    std::fs::write(&fbs, accepted).expect("writing OUT_DIR/schema.fbs");
    let options = planus_translation::ConverterOptions { ignore_docstring_errors: false };
    let declarations =
        planus_translation::translate_files_with_options(&[&fbs], options).expect("schema.fbs translates");
    let rust = planus_codegen::generate_rust(&declarations, false).expect("planus generates Rust");
    std::fs::write(out.join("generated.rs"), rust).expect("writing OUT_DIR/generated.rs");
}

/// `line` without a `(deprecated)` planus refuses: on an enum value
/// (`  NAME = 3 (deprecated),`), a union member (`  FooOptions (deprecated),`)
/// or a table (`table Foo (deprecated) {`).
fn undeprecate(line: &str) -> String {
    let enum_or_member = line.starts_with("  ")
        && !line.starts_with("   ")
        && line.ends_with(" (deprecated),")
        && !line.contains(':');
    if enum_or_member {
        return format!("{},", line.trim_end_matches(" (deprecated),"));
    }
    if line.starts_with("table ") && line.ends_with(" (deprecated) {") {
        return format!("{} {{", line.trim_end_matches(" (deprecated) {"));
    }
    line.to_string()
}
