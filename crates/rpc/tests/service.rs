//! The service end to end on loopback: remote rollouts equal in-process ones, every refusal is a
//! status with a reason, auth, limits, expiry, health.

use std::time::Duration;

use aware_core::{Action, Env, EnvError, VecEnv};
use aware_rpc::proto::env_service_client::EnvServiceClient;
use aware_rpc::proto::{self, Actions};
use aware_rpc::{ClientError, ClientOptions, RemoteEnv, RemoteVecEnv};
use aware_rpc::{EnvId, MakeConfig, make};
use aware_rpc::{ServerHandle, ServerSettings, spawn};
use tonic::Code;
use tonic::transport::Channel;

const TOKEN: &str = "test-token";

fn server(settings: ServerSettings) -> ServerHandle {
    spawn("127.0.0.1:0", ServerSettings { token: Some(TOKEN.into()), ..settings }, 1).unwrap()
}

fn opts() -> ClientOptions {
    ClientOptions { token: Some(TOKEN.into()), ..Default::default() }
}

/// A deterministic, varied action sequence so the rollout exercises the decoder.
fn action(id: EnvId, step: usize, i: usize) -> Action {
    match id {
        EnvId::Autoscale => {
            let x = |k: usize| (((step * 7 + i * 3 + k * 5) % 21) as f32 - 10.0) / 10.0;
            Action::Continuous(vec![x(0), x(1), x(2)])
        }
        EnvId::AutoscaleDiscrete => Action::Discrete((step * 3 + i) % 7),
        _ => Action::Discrete((step + 2 * i) % 5),
    }
}

fn rollout(env: &mut dyn VecEnv, id: EnvId, seed: u64, steps: usize) -> Vec<String> {
    let mut trace = vec![format!("{:?}", env.reset(Some(seed)).unwrap())];
    for t in 0..steps {
        let actions: Vec<Action> = (0..env.num_envs()).map(|i| action(id, t, i)).collect();
        match env.step(&actions) {
            Ok(s) => trace.push(format!("{s:?}")),
            Err(EnvError::NeedsReset) => trace.push(format!("reset {:?}", env.reset(None).unwrap())),
            Err(e) => panic!("{e}"),
        }
    }
    trace
}

#[test]
fn remote_rollouts_equal_in_process_ones() {
    let server = server(ServerSettings::default());
    let address = format!("grpc://{}", server.addr());
    for (id, config) in [
        (EnvId::Autoscale, MakeConfig { num_envs: 4, seed: 3, episode_steps: Some(12), ..Default::default() }),
        (
            EnvId::AutoscaleDiscrete,
            MakeConfig {
                num_envs: 3,
                seed: 5,
                scenario: Some("load-low-to-high".parse().unwrap()),
                ..Default::default()
            },
        ),
        (
            EnvId::Provisioning,
            MakeConfig { num_envs: 2, seed: 9, days: Some(2), episode_steps: Some(10), ..Default::default() },
        ),
    ] {
        let mut local = make(id, &config).unwrap();
        let mut remote = RemoteVecEnv::connect(&address, id, &config, &opts()).unwrap();
        assert_eq!(remote.observation_space(), local.observation_space());
        assert_eq!(remote.action_space(), local.action_space());
        assert_eq!(remote.num_envs(), config.num_envs as usize);
        // 30 steps cross episode ends (12 and 10 steps) where the rollout resets without a seed.
        assert_eq!(rollout(&mut remote, id, 42, 30), rollout(local.as_mut(), id, 42, 30), "{id}");
    }
}

#[test]
fn single_env_client_matches_in_process_env() {
    let server = server(ServerSettings::default());
    let config = MakeConfig { seed: 11, ..Default::default() };
    let mut local = make(EnvId::Autoscale, &config).unwrap();
    let mut remote = RemoteEnv::connect(&server.addr().to_string(), EnvId::Autoscale, &config, &opts()).unwrap();
    let (o, i) = remote.reset(Some(4)).unwrap();
    assert_eq!(vec![(o, i)], local.reset(Some(4)).unwrap());
    for t in 0..20 {
        let a = action(EnvId::Autoscale, t, 0);
        let s = remote.step(&a).unwrap();
        assert_eq!(vec![s], local.step(&[a]).unwrap().steps);
    }
    // The client checks actions against the space before sending them, with the same errors.
    assert!(matches!(
        remote.step(&Action::Continuous(vec![f32::NAN, 0.0, 0.0])),
        Err(EnvError::ActionOutOfSpace { .. })
    ));
    assert!(matches!(remote.step(&Action::Discrete(1)), Err(EnvError::ActionOutOfSpace { .. })));
}

fn stub(server: &ServerHandle, rt: &tokio::runtime::Runtime) -> EnvServiceClient<Channel> {
    rt.block_on(EnvServiceClient::connect(format!("http://{}", server.addr()))).unwrap()
}

fn authed<T>(msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut().insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    r
}

/// A request carrying a token one letter off the right one.
fn bad<T>(msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut().insert("authorization", "Bearer test-tokem".parse().unwrap());
    r
}

fn make_request(id: &str, num_envs: u32) -> proto::MakeRequest {
    proto::MakeRequest {
        env_id: id.into(),
        config: Some(proto::EnvConfig { num_envs, seed: 1, episode_steps: 3, ..Default::default() }),
    }
}

#[test]
fn wrong_or_missing_token_is_refused_on_every_call() {
    let server = server(ServerSettings::default());
    let wrong = ClientOptions { token: Some("nope".into()), ..Default::default() };
    for o in [wrong, ClientOptions::default()] {
        let e = RemoteVecEnv::connect(&server.addr().to_string(), EnvId::Autoscale, &MakeConfig::default(), &o)
            .err()
            .unwrap();
        assert_eq!(e.code(), Some(Code::Unauthenticated), "{e}");
        assert!(e.to_string().contains("UNAUTHENTICATED"), "{e}");
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut c = stub(&server, &rt);
    let session = rt.block_on(c.make(authed(make_request("aware/Autoscale-v0", 1)))).unwrap().into_inner().session_id;
    let codes = rt.block_on(async {
        vec![
            c.make(bad(make_request("aware/Autoscale-v0", 1))).await.err().map(|s| s.code()),
            c.reset(bad(proto::ResetRequest { session_id: session.clone(), ..Default::default() }))
                .await
                .err()
                .map(|s| s.code()),
            c.reset_many(tonic::Request::new(proto::ResetRequest {
                session_id: session.clone(),
                ..Default::default()
            }))
            .await
            .err()
            .map(|s| s.code()),
            c.step(bad(proto::StepRequest { session_id: session.clone(), action: None })).await.err().map(|s| s.code()),
            c.step_many(bad(proto::StepManyRequest { session_id: session.clone(), actions: None }))
                .await
                .err()
                .map(|s| s.code()),
            c.close(bad(proto::CloseRequest { session_id: session.clone() })).await.err().map(|s| s.code()),
        ]
    });
    assert!(codes.iter().all(|c| *c == Some(Code::Unauthenticated)), "{codes:?}");
}

#[test]
fn bad_requests_get_a_status_that_says_why() {
    let server = server(ServerSettings { max_message_bytes: 64 << 10, ..Default::default() });
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut c = stub(&server, &rt);
    let session = rt.block_on(c.make(authed(make_request("aware/Autoscale-v0", 1)))).unwrap().into_inner().session_id;
    let step = |c: &mut EnvServiceClient<Channel>, actions: Actions| {
        rt.block_on(c.step(authed(proto::StepRequest { session_id: session.clone(), action: Some(actions) })))
            .err()
            .unwrap()
    };
    // Before any reset.
    let s = step(&mut c, Actions { continuous: vec![0.0; 3], discrete: vec![] });
    assert_eq!(s.code(), Code::FailedPrecondition, "{s:?}");
    assert!(s.message().contains("call Reset"), "{s:?}");
    rt.block_on(c.reset(authed(proto::ResetRequest {
        session_id: session.clone(),
        seed: Some(1),
        ..Default::default()
    })))
    .unwrap();
    for (actions, says) in [
        (
            Actions { continuous: vec![0.0, f32::NAN, 0.0], discrete: vec![] },
            "action[1]: NaN is not in the action space",
        ),
        (Actions { continuous: vec![0.0, 1.5, 0.0], discrete: vec![] }, "action[1]: 1.5 is not in the action space"),
        (Actions { continuous: vec![0.0; 4], discrete: vec![] }, "expected 3 values (1 env(s) x 3), got 4"),
        (Actions { continuous: vec![], discrete: vec![1] }, "send `continuous` values"),
    ] {
        let s = step(&mut c, actions);
        assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
        assert!(s.message().contains(says), "{s:?} should say {says}");
    }
    let negative = rt
        .block_on(c.reset(authed(proto::ResetRequest {
            session_id: session.clone(),
            seed: Some(-5),
            ..Default::default()
        })))
        .unwrap_err();
    assert_eq!(negative.code(), Code::InvalidArgument);
    assert!(negative.message().contains("-5 is negative"), "{negative:?}");
    let unknown =
        rt.block_on(c.step(authed(proto::StepRequest { session_id: "s0-nope".into(), action: None }))).unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    assert!(unknown.message().contains("\"s0-nope\" is unknown, closed or expired"), "{unknown:?}");
    let env = rt.block_on(c.make(authed(make_request("CartPole-v1", 1)))).unwrap_err();
    assert_eq!(env.code(), Code::InvalidArgument);
    assert!(env.message().contains("CartPole-v1"), "{env:?}");
    let huge = rt.block_on(c.make(authed(make_request("aware/Autoscale-v0", u32::MAX)))).unwrap_err();
    assert_eq!(huge.code(), Code::InvalidArgument);
    assert!(huge.message().starts_with("config.num_envs"), "{huge:?}");
    // A message over the server's limit (64 KiB here).
    let big = Actions { continuous: vec![0.0; 100_000], discrete: vec![] };
    let s = step(&mut c, big);
    assert!(matches!(s.code(), Code::OutOfRange | Code::ResourceExhausted), "{s:?}");
    assert!(s.message().contains("too large"), "{s:?}");
    // Many-env sessions are stepped with StepMany.
    let many = rt.block_on(c.make(authed(make_request("aware/Autoscale-v0", 2)))).unwrap().into_inner().session_id;
    let s = rt.block_on(c.reset(authed(proto::ResetRequest { session_id: many, ..Default::default() }))).unwrap_err();
    assert_eq!(s.code(), Code::FailedPrecondition);
    assert!(s.message().contains("use ResetMany"), "{s:?}");
    // The server is still up.
    rt.block_on(c.reset(authed(proto::ResetRequest { session_id: session, seed: Some(2), ..Default::default() })))
        .unwrap();
}

#[test]
fn sessions_are_bounded_and_expire_when_idle() {
    let server =
        server(ServerSettings { max_sessions: 2, idle_timeout: Duration::from_millis(300), ..Default::default() });
    let address = server.addr().to_string();
    let config = MakeConfig::default();
    let a = RemoteVecEnv::connect(&address, EnvId::Autoscale, &config, &opts()).unwrap();
    let _b = RemoteVecEnv::connect(&address, EnvId::Autoscale, &config, &opts()).unwrap();
    let e = RemoteVecEnv::connect(&address, EnvId::Autoscale, &config, &opts()).err().unwrap();
    assert_eq!(e.code(), Some(Code::ResourceExhausted), "{e}");
    // Closing (dropping) a client frees its slot.
    drop(a);
    let mut c = RemoteVecEnv::connect(&address, EnvId::Autoscale, &config, &opts()).unwrap();
    std::thread::sleep(Duration::from_millis(900));
    let e = c.reset(Some(1)).unwrap_err().to_string();
    assert!(e.contains("NOT_FOUND") && e.contains("expired"), "{e}");
    // Expired sessions freed their slots.
    RemoteVecEnv::connect(&address, EnvId::Autoscale, &config, &opts()).unwrap();
}

#[test]
fn health_service_reports_serving() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let server = server(ServerSettings::default());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let status = rt.block_on(async {
        let channel = Channel::from_shared(format!("http://{}", server.addr())).unwrap().connect().await.unwrap();
        let mut h = HealthClient::new(channel);
        // No token: orchestrators' probes carry none.
        h.check(HealthCheckRequest { service: "aware.env.v1.EnvService".into() }).await.unwrap().into_inner().status
    });
    assert_eq!(status, ServingStatus::Serving as i32);
}

#[test]
fn client_errors_name_the_address() {
    let e = RemoteVecEnv::connect("127.0.0.1:1", EnvId::Autoscale, &MakeConfig::default(), &opts()).err().unwrap();
    assert!(matches!(e, ClientError::Connect { .. }), "{e}");
    assert!(e.to_string().starts_with("127.0.0.1:1: cannot connect"), "{e}");
}

/// Tabular Q-learning on the discrete autoscaling env (ε-greedy from a fixed LCG), standing in
/// for any agent: training through the client must give the identical Q-table and returns.
fn train_q_table(env: &mut dyn VecEnv, episodes: u64) -> (Vec<f64>, Vec<f64>) {
    const BUCKETS: usize = 5;
    let bucket = |x: f32| ((x.clamp(0.0, 1.0) * (BUCKETS as f32 - 1.0)).round()) as usize;
    let key = |o: &[f32]| bucket(o[2]) * BUCKETS + bucket(o[3]);
    let mut q = vec![0.0f64; BUCKETS * BUCKETS * 7];
    let mut lcg = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move || {
        lcg = lcg.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (lcg >> 33) as f64 / (1u64 << 31) as f64
    };
    let mut returns = Vec::new();
    for ep in 0..episodes {
        let mut states: Vec<Vec<f32>> = env.reset(Some(100 + ep)).unwrap().into_iter().map(|(o, _)| o).collect();
        let mut total = 0.0;
        loop {
            let actions: Vec<usize> = states
                .iter()
                .map(|s| {
                    let row = &q[key(s) * 7..key(s) * 7 + 7];
                    if rand() < 0.2 {
                        (rand() * 7.0) as usize % 7
                    } else {
                        (0..7).max_by(|&a, &b| row[a].total_cmp(&row[b]).then(b.cmp(&a))).unwrap()
                    }
                })
                .collect();
            let out = env.step(&actions.iter().map(|&a| Action::Discrete(a)).collect::<Vec<_>>()).unwrap();
            let mut done = false;
            for ((s, a), step) in states.iter().zip(&actions).zip(&out.steps) {
                let next = &q[key(&step.observation) * 7..key(&step.observation) * 7 + 7];
                let best = next.iter().cloned().fold(f64::MIN, f64::max);
                let target = step.reward + if step.terminated { 0.0 } else { 0.9 * best };
                let cell = &mut q[key(s) * 7 + a];
                *cell += 0.1 * (target - *cell);
                total += step.reward;
                done |= step.truncated || step.terminated;
            }
            states = out.steps.into_iter().map(|s| s.observation).collect();
            if done {
                break;
            }
        }
        returns.push(total);
    }
    (q, returns)
}

#[test]
fn training_through_the_client_equals_training_in_process() {
    let server = server(ServerSettings::default());
    let config = MakeConfig { num_envs: 4, seed: 21, episode_steps: Some(25), ..Default::default() };
    let mut local = make(EnvId::AutoscaleDiscrete, &config).unwrap();
    let mut remote =
        RemoteVecEnv::connect(&server.addr().to_string(), EnvId::AutoscaleDiscrete, &config, &opts()).unwrap();
    let (q_remote, r_remote) = train_q_table(&mut remote, 6);
    let (q_local, r_local) = train_q_table(local.as_mut(), 6);
    assert!(q_local.iter().any(|&v| v != 0.0), "the agent learned nothing");
    assert_eq!(r_remote, r_local);
    assert_eq!(q_remote, q_local);
}

/// A CA and a server certificate for localhost / 127.0.0.1, made with the `openssl` command.
fn make_certificates(dir: &std::path::Path) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl").args(args).current_dir(dir).output();
        let out = out.expect("the TLS test needs the `openssl` command");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    run(&[
        &["req", "-x509"][..],
        &ec,
        &["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=aware-test-ca"],
    ]
    .concat());
    run(&[&["req"][..], &ec, &["-keyout", "key.pem", "-out", "req.csr", "-subj", "/CN=localhost"]].concat());
    std::fs::write(dir.join("ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n").unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "req.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "cert.pem",
        "-days",
        "2",
        "-extfile",
        "ext",
    ]);
    let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
    (read("ca.pem"), read("cert.pem"), read("key.pem"))
}

#[test]
fn tls_serves_clients_that_trust_the_ca_and_refuses_plaintext() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = make_certificates(dir.path());
    let server = server(ServerSettings { tls: Some((cert, key)), ..Default::default() });
    let config = MakeConfig { seed: 2, ..Default::default() };
    let tls = ClientOptions { tls_ca_pem: Some(ca), tls_domain: Some("localhost".into()), ..opts() };
    let mut env = RemoteEnv::connect(&server.addr().to_string(), EnvId::Autoscale, &config, &tls).unwrap();
    let mut local = make(EnvId::Autoscale, &config).unwrap();
    assert_eq!(vec![env.reset(Some(1)).unwrap()], local.reset(Some(1)).unwrap());
    // A plaintext client gets no session.
    assert!(RemoteEnv::connect(&server.addr().to_string(), EnvId::Autoscale, &config, &opts()).is_err());
}
