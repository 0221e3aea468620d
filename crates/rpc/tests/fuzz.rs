//! Property tests: arbitrary bytes as request bodies, and adversarial but well-formed requests
//! (NaN and huge actions, huge dimensions, negative seeds), never crash the server. Every answer
//! is success or a status other than INTERNAL/UNKNOWN, and the server keeps answering.

use std::sync::OnceLock;

use aware_rpc::proto::env_service_client::EnvServiceClient;
use aware_rpc::proto::{self, Actions};
use aware_rpc::{ServerHandle, ServerSettings, spawn};
use bytes::{Buf, BufMut};
use proptest::prelude::*;
use prost::Message;
use tonic::Code;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Channel;

const TOKEN: &str = "fuzz";

/// Sends and receives bodies as they are, so a test can put any bytes on the wire.
#[derive(Default, Clone)]
struct Raw;

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        let v = src.chunk().to_vec();
        src.advance(v.len());
        Ok(Some(v))
    }
}

impl Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

struct Fixture {
    rt: tokio::runtime::Runtime,
    _server: ServerHandle,
    channel: Channel,
    /// Single-env sessions, reset: continuous and discrete.
    sessions: [String; 2],
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let server = spawn(
            "127.0.0.1:0",
            ServerSettings {
                token: Some(TOKEN.into()),
                max_sessions: 8,
                max_message_bytes: 1 << 20,
                ..Default::default()
            },
            1,
        )
        .unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        let channel =
            rt.block_on(Channel::from_shared(format!("http://{}", server.addr())).unwrap().connect()).unwrap();
        let mut c = EnvServiceClient::new(channel.clone());
        let mut open = |id: &str| {
            let made = rt
                .block_on(c.make(authed(proto::MakeRequest {
                    env_id: id.into(),
                    config: Some(proto::EnvConfig { episode_steps: 1_000_000, ..Default::default() }),
                })))
                .unwrap()
                .into_inner();
            rt.block_on(c.reset(authed(proto::ResetRequest {
                session_id: made.session_id.clone(),
                seed: Some(1),
                ..Default::default()
            })))
            .unwrap();
            made.session_id
        };
        let sessions = [open("aware/Autoscale-v0"), open("aware/AutoscaleDiscrete-v0")];
        Fixture { rt, _server: server, channel, sessions }
    })
}

fn authed<T>(msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut().insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    r
}

const METHODS: [&str; 6] = ["Make", "Reset", "Step", "ResetMany", "StepMany", "Close"];

fn call_raw(f: &Fixture, method: &str, body: Vec<u8>) -> Result<Vec<u8>, tonic::Status> {
    let path = format!("/aware.env.v1.EnvService/{method}");
    f.rt.block_on(async {
        let mut grpc = tonic::client::Grpc::new(f.channel.clone());
        grpc.ready().await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        grpc.unary(authed(body), path.parse().unwrap(), Raw).await.map(|r| r.into_inner())
    })
}

/// Success, or a status that says what was wrong. Bytes that are not a protobuf message are
/// INTERNAL "failed to decode Protobuf message" (gRPC's status-code table maps request parse
/// errors to INTERNAL; tonic follows it); any other INTERNAL would be a caught panic.
fn not_a_crash(r: &Result<Vec<u8>, tonic::Status>) -> bool {
    match r {
        Ok(_) => true,
        Err(s) if s.code() == Code::Internal => s.message().starts_with("failed to decode Protobuf message"),
        Err(s) => !matches!(s.code(), Code::Unknown | Code::Unavailable) && !s.message().is_empty(),
    }
}

/// The server still serves a good request.
fn alive(f: &Fixture) {
    let req = proto::StepRequest {
        session_id: f.sessions[1].clone(),
        action: Some(Actions { continuous: vec![], discrete: vec![0] }),
    };
    let r = call_raw(f, "Step", req.encode_to_vec());
    assert!(r.is_ok(), "{r:?}");
}

fn any_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        Just(f32::NAN),
        Just(f32::INFINITY),
        Just(f32::NEG_INFINITY),
        Just(f32::MAX),
        Just(-0.0f32),
        -1.0f32..=1.0,
        any::<f32>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_crash(method in 0..METHODS.len(), body in proptest::collection::vec(any::<u8>(), 0..512)) {
        let f = fixture();
        let r = call_raw(f, METHODS[method], body);
        prop_assert!(not_a_crash(&r), "{:?}", r);
        alive(f);
    }

    #[test]
    fn adversarial_actions_are_refused_or_served(
        which in 0..2usize,
        many in any::<bool>(),
        unknown_session in any::<bool>(),
        continuous in proptest::collection::vec(any_f32(), 0..40),
        discrete in proptest::collection::vec(prop_oneof![any::<i64>(), -2i64..9], 0..40),
    ) {
        let f = fixture();
        let session_id = if unknown_session { "s9-ffff".to_string() } else { f.sessions[which].clone() };
        let actions = Some(Actions { continuous, discrete });
        let body = if many {
            proto::StepManyRequest { session_id, actions }.encode_to_vec()
        } else {
            proto::StepRequest { session_id, action: actions }.encode_to_vec()
        };
        let r = call_raw(f, if many { "StepMany" } else { "Step" }, body);
        prop_assert!(not_a_crash(&r), "{:?}", r);
        alive(f);
    }

    #[test]
    fn adversarial_configs_and_seeds_never_crash(
        env in prop_oneof![Just("aware/Autoscale-v0".to_string()), Just("aware/Provisioning-v0".to_string()), ".{0,12}"],
        num_envs in prop_oneof![0u32..6, Just(4097u32), Just(u32::MAX)],
        seed in any::<i64>(),
        trace_seed in proptest::option::of(any::<i64>()),
        scenario in prop_oneof![Just(String::new()), Just("payload-up@3".to_string()), ".{0,10}"],
        episode_steps in prop_oneof![0u32..5, Just(u32::MAX)],
        day_seconds in prop_oneof![Just(0.0), Just(f64::NAN), Just(-1.0), Just(f64::INFINITY), 1.0f64..1e6],
        days in prop_oneof![0u32..3, Just(u32::MAX)],
        mean_count in prop_oneof![Just(0.0), Just(f64::NAN), Just(-5.0), Just(1e300), 1.0f64..1e4],
        reset_seed in proptest::option::of(any::<i64>()),
        population in prop_oneof![Just(String::new()), Just("serverless".to_string()), ".{0,10}"],
        vertical_update in prop_oneof![Just(String::new()), Just("restart".to_string()), ".{0,10}"],
    ) {
        let f = fixture();
        let config = proto::EnvConfig {
            num_envs, seed, trace_seed, profile_yaml: String::new(), scenario, episode_steps, day_seconds, days, mean_count,
            population, vertical_update,
        };
        let r = call_raw(f, "Make", proto::MakeRequest { env_id: env, config: Some(config) }.encode_to_vec());
        prop_assert!(not_a_crash(&r), "{:?}", r);
        if let Ok(body) = r {
            let made = proto::MakeResponse::decode(body.as_slice()).unwrap();
            let reset = proto::ResetRequest { session_id: made.session_id.clone(), seed: reset_seed, ..Default::default() };
            let r = call_raw(f, "ResetMany", reset.encode_to_vec());
            prop_assert!(not_a_crash(&r), "{:?}", r);
            prop_assert_eq!(r.is_ok(), reset_seed.is_none_or(|s| s >= 0));
            call_raw(f, "Close", proto::CloseRequest { session_id: made.session_id }.encode_to_vec()).unwrap();
        }
        alive(f);
    }
}
