//! The integration tests of this crate, in one binary (linking tract into
//! one test binary per file cost build time).

mod app_api;
mod energy_weights;
mod fake_handheld;
mod handheld_limits;
mod hostile_handheld;
mod learning;
mod link;
mod paired_session;
mod secure_link;
mod stalled_handheld;
