//! The C ABI's tests, in one binary: the header is current, errors come
//! back through the ABI, and a C program built with `cc` runs a zoo model
//! locally and against a real handheld process, matching the Rust API.

mod abi;
mod c_program;
mod header;
