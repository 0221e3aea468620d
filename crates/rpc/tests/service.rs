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
fn busy_polling_server_and_client_serve_the_same_rollouts() {
    let window = Duration::from_micros(200);
    let server = server(ServerSettings { busy_poll: window, ..Default::default() });
    let client = ClientOptions { busy_poll: window, ..opts() };
    let config = MakeConfig { num_envs: 2, seed: 7, episode_steps: Some(9), ..Default::default() };
    let mut local = make(EnvId::AutoscaleDiscrete, &config).unwrap();
    let mut remote =
        RemoteVecEnv::connect(&server.addr().to_string(), EnvId::AutoscaleDiscrete, &config, &client).unwrap();
    let id = EnvId::AutoscaleDiscrete;
    assert_eq!(rollout(&mut remote, id, 3, 20), rollout(local.as_mut(), id, 3, 20));
    // Idle past the window (the server goes back to sleeping), then calls again.
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(rollout(&mut remote, id, 4, 3), rollout(local.as_mut(), id, 4, 3));
    // A client that polls against a server that sleeps, and the errors come back the same way.
    let plain = self::server(ServerSettings::default());
    let mut remote = RemoteEnv::connect(&plain.addr().to_string(), id, &MakeConfig::default(), &client).unwrap();
    assert!(matches!(remote.step(&Action::Discrete(0)), Err(EnvError::NeedsReset)));
    remote.reset(Some(1)).unwrap();
    remote.step(&Action::Discrete(0)).unwrap();
}

#[test]
fn a_connected_client_that_never_reads_cannot_hold_the_server_past_its_grace() {
    let grace = Duration::from_millis(300);
    let server = server(ServerSettings { shutdown_grace: grace, ..Default::default() });
    // Connected with a session open, but idle: its runtime only runs inside a call, so it never
    // answers the server's GOAWAY.
    let mut idle =
        RemoteEnv::connect(&server.addr().to_string(), EnvId::AutoscaleDiscrete, &MakeConfig::default(), &opts())
            .unwrap();
    idle.reset(Some(1)).unwrap();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(server.shutdown().is_ok()).unwrap());
    assert_eq!(finished.recv_timeout(Duration::from_secs(30)), Ok(true), "the server did not stop");
    assert!(idle.step(&Action::Discrete(0)).is_err());
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

/// The learning curve and the checkpoint's weight files of a training run, byte for byte.
fn training_outputs(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors" || x == "csv"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    files.sort();
    files
}

/// `aware train --env grpc://` (`train_remote`): a real agent trained through the service on a
/// non-default workload (a profile file, the serverless population, restart-mode resizes, a
/// metrics pipeline that lags pod start-up so that some states are carried, not measured)
/// learns exactly what it learns in-process with the same seed.
#[test]
fn an_agent_trained_through_the_service_equals_one_trained_in_process() {
    use aware_lab::agent::Algorithm;
    use aware_lab::progress::Silent;
    use aware_lab::train::{TrainSpec, agent_for, train};
    use aware_lab::workload::{Workload, WorkloadSpec};

    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profile.yaml");
    std::fs::write(
        &profile,
        "targets: {cpu_utilisation: 0.6}\nreward: {alpha: 0.4}\nsimulation: {metrics_lag_s: 90}\n",
    )
    .unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, format!("  {TOKEN}\n")).unwrap();
    let workload = WorkloadSpec {
        apps: 3,
        seed: 12,
        profile: Some(profile),
        population: Some(aware_core::Population::Serverless),
        vertical_update: aware_sim::VerticalUpdate::Restart,
        steps: 30,
        ..WorkloadSpec::default()
    };
    // PPO learns from its first rollouts (the value-based agents wait for a replay warm-up), in
    // either action space: both autoscaling environments the service offers.
    for action in [aware_env::ActionKind::Discrete, aware_env::ActionKind::Continuous] {
        let algorithm = action.name();
        let spec = |out: &str| TrainSpec {
            algorithm: Some(Algorithm::Ppo),
            action: Some(action),
            resume: None,
            episodes: 4,
            steps: 30,
            out: dir.path().join(format!("{algorithm}-{out}")),
        };
        let server = server(ServerSettings::default());
        let remote = aware_rpc::RemoteEnvArgs {
            address: format!("grpc://{}", server.addr()),
            token_file: Some(token.clone()),
            tls_ca: None,
        };
        let by_rpc = aware_rpc::train_remote(&remote, &workload, &spec("rpc"), &Silent).unwrap();
        let local = train(&Workload::load(&workload).unwrap(), &spec("local"), &Silent).unwrap();
        assert_eq!(
            (by_rpc.first_mean_reward, by_rpc.last_10_mean_reward, by_rpc.apps, by_rpc.first_trace_seed),
            (local.first_mean_reward, local.last_10_mean_reward, local.apps, local.first_trace_seed),
            "{algorithm}"
        );
        let (rpc_files, local_files) = (training_outputs(&spec("rpc").out), training_outputs(&spec("local").out));
        assert!(rpc_files.iter().any(|(name, _)| name.ends_with(".safetensors")), "{rpc_files:?}");
        assert!(rpc_files == local_files, "{algorithm}: the checkpoints or learning curves differ");
        // And the agent did learn: its weights moved from the fresh agent's.
        let fresh = spec("fresh");
        std::fs::create_dir_all(&fresh.out).unwrap();
        agent_for(&fresh, workload.seed).unwrap().agent.save(&fresh.out, &aware_env::StateEncoder::space(), 0).unwrap();
        let weights = |files: &[(String, Vec<u8>)]| {
            files.iter().filter(|(n, _)| n.ends_with(".safetensors")).cloned().collect::<Vec<_>>()
        };
        assert!(weights(&training_outputs(&fresh.out)) != weights(&local_files), "{algorithm} learned nothing");
        server.shutdown().unwrap();
    }
}

/// Without the token the server refuses the training run, and the message says so.
#[test]
fn remote_training_without_the_token_is_refused() {
    use aware_lab::agent::Algorithm;
    use aware_lab::train::TrainSpec;
    let dir = tempfile::tempdir().unwrap();
    let server = server(ServerSettings::default());
    let remote = aware_rpc::RemoteEnvArgs { address: server.addr().to_string(), token_file: None, tls_ca: None };
    let spec = TrainSpec {
        algorithm: Some(Algorithm::Ppo),
        action: None,
        resume: None,
        episodes: 1,
        steps: 5,
        out: dir.path().join("out"),
    };
    let workload = aware_lab::workload::WorkloadSpec { apps: 1, ..Default::default() };
    let e = aware_rpc::train_remote(&remote, &workload, &spec, &aware_lab::progress::Silent).unwrap_err().to_string();
    assert!(e.starts_with(&format!("--env {}: Make: UNAUTHENTICATED", server.addr())), "{e}");
    assert!(!spec.out.exists(), "a refused run wrote {}", spec.out.display());
    let traced = aware_lab::workload::WorkloadSpec { trace: Some("t.csv".into()), ..workload.clone() };
    let e = aware_rpc::train_remote(&remote, &traced, &spec, &aware_lab::progress::Silent).unwrap_err().to_string();
    assert!(e.starts_with("--trace:"), "{e}");
    // A server that is not there: its address once, not twice.
    let absent = aware_rpc::RemoteEnvArgs { address: "127.0.0.1:1".into(), token_file: None, tls_ca: None };
    let e = aware_rpc::train_remote(&absent, &workload, &spec, &aware_lab::progress::Silent).unwrap_err().to_string();
    assert!(e.starts_with("--env 127.0.0.1:1: cannot connect"), "{e}");
    assert_eq!(e.matches("127.0.0.1:1").count(), 1, "{e}");
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
