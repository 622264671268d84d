//! The integration tests of `tandem-oip`, in one binary: the client
//! against a real KServe server on loopback (`kserve`), and against a
//! hostile fake server that answers crafted HTTP (`hostile`).

mod common;
mod hostile;
mod kserve;
