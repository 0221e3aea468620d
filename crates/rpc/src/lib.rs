//! `aware`'s environments as a Gymnasium-style gRPC service (`aware serve-env`), and a client
//! that implements [`aware_core::VecEnv`] / [`aware_core::Env`] over it, so training code uses a
//! remote environment exactly as an in-process one.
//!
//! - [`envs`]: the environments by id, built from a [`MakeConfig`].
//! - [`server`]: sessions, validation, auth, health, graceful shutdown; [`serve`] runs it.
//! - [`client`]: [`RemoteVecEnv`] and [`RemoteEnv`].
//! - [`bench`]: `aware bench rpc`.
//! - [`train_remote`]: `aware train --env grpc://ADDR`.
//!
//! The protobuf (`proto/aware/env/v1/env.proto`) is compiled by `build.rs` with protox, so no
//! system `protoc` is needed.

pub mod bench;
mod busy;
mod client;
pub mod convert;
mod envs;
mod server;
mod train;

/// The generated messages and service stubs of `aware.env.v1`.
pub mod proto {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("aware.env.v1");
}

pub use client::{ClientError, ClientOptions, RemoteEnv, RemoteVecEnv, code_name};
pub use envs::{BoxedVecEnv, Copies, EnvId, MAX_DAYS, MAX_EPISODE_STEPS, MAX_NUM_ENVS, MakeConfig, MakeError, make};
pub use server::{
    BearerAuth, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_SESSIONS, DEFAULT_SHUTDOWN_GRACE,
    EnvServiceImpl, ServeError, ServeOptions, ServerHandle, ServerSettings, Sessions, TlsFiles, read_token_file, serve,
    serve_on, service, spawn,
};
pub use train::{RemoteEnvArgs, RemoteTrainError, train_remote};
