//! `aware`'s environments as a Gymnasium-style gRPC service (`aware serve-env`), and a client
//! that implements [`aware_core::VecEnv`] / [`aware_core::Env`] over it, so training code uses a
//! remote environment exactly as an in-process one.
//!
//! - [`envs`]: the environments by id, built from a [`MakeConfig`].
//! - [`server`]: sessions, validation, auth, health, graceful shutdown; [`serve`] runs it.
//! - [`client`]: [`RemoteVecEnv`] and [`RemoteEnv`].
//! - [`bench`]: `aware bench rpc`.
//!
//! The protobuf (`proto/aware/env/v1/env.proto`) is compiled by `build.rs` with protox, so no
//! system `protoc` is needed.

pub mod bench;
pub mod client;
pub mod convert;
pub mod envs;
pub mod server;

/// The generated messages and service stubs of `aware.env.v1`.
pub mod proto {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("aware.env.v1");
}

pub use client::{ClientError, ClientOptions, RemoteEnv, RemoteVecEnv};
pub use envs::{EnvId, MakeConfig, MakeError, make};
pub use server::{ServeError, ServeOptions, ServerHandle, ServerSettings, TlsFiles, serve, spawn};
