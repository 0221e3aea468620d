//! What the end-to-end tests against a real Prometheus share: a server of the test's own that
//! it can stop and start again.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's `prometheus` binary on the PATH; `None` (the test skips) where it is absent,
/// except in CI (`AWARE_REQUIRE_SERVERS=1`), where that fails.
pub fn prometheus_binary() -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join("prometheus")).find(|p| p.is_file()));
    match found {
        Some(p) => Some(p),
        None if std::env::var("AWARE_REQUIRE_SERVERS").as_deref() == Ok("1") => {
            panic!("no prometheus binary on the PATH but AWARE_REQUIRE_SERVERS=1")
        }
        None => {
            eprintln!("skipped: no prometheus binary on the PATH (`bash .ci/services.sh start` installs it)");
            None
        }
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A Prometheus server of the test's own, scraping the exporter every 500 ms.
pub struct Server {
    binary: PathBuf,
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl Server {
    pub fn new(binary: PathBuf, dir: &Path, exporter: &str) -> Self {
        let config = format!(
            "global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\nscrape_configs:\n  - job_name: aware-sim\n    static_configs:\n      - targets: [\"{exporter}\"]\n"
        );
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        Self { binary, dir: dir.to_path_buf(), port: free_port(), child: None }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn start(&mut self) {
        let log = std::fs::File::create(self.dir.join("prometheus.log")).unwrap();
        let child = Command::new(&self.binary)
            .arg(format!("--config.file={}", self.dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", self.dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{}", self.port))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", self.binary.display()));
        self.child = Some(child);
        let ready = format!("{}/-/ready", self.url());
        let deadline = Instant::now() + Duration::from_secs(30);
        while ureq::get(&ready).call().is_err() {
            assert!(
                Instant::now() < deadline,
                "prometheus did not become ready: see {}/prometheus.log",
                self.dir.display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}
