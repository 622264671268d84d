//! Tandem's protocol, with no I/O and no clocks: time is passed in, bytes
//! are passed in and out. The I/O shell (`tandem`) drives these state
//! machines over TCP, emulated links or BLE.
//!
//! # Layout
//! - [`protocol`]: the wire format (framing, bincode 2 headers, raw tensor bodies, limits, `FrameDecoder`).
//! - [`encoding`]: tensor encodings for the link (raw, shuffle + LZ4, sparse + LZ4, f16, int8), checked decoding.
//! - [`session`]: both sides' protocol state machines with their rules and timers (handshake, model push, frames queued and in flight, keepalive, silence, idle and hello deadlines), time passed in.
//! - [`pair`]: a test double: both sessions, byte queues and a virtual clock, driven until idle.
//! - [`pipeline`]: the wearable's frames in flight, handed back and delivered in order, with time passed in.
//! - [`secure`]: pairing (SPAKE2 on a 6-digit code) and encrypted records (Noise), as state machines.
//! - [`profiler`]: bandwidth, RTT, the handheld's status and batteries, for the planner.

pub mod encoding;
pub mod pair;
pub mod pipeline;
pub mod profiler;
pub mod protocol;
pub mod secure;
pub mod session;
