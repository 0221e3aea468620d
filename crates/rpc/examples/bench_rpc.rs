//! `aware bench rpc --json` without the rest of the CLI: prints the report of
//! `aware_rpc::bench::run` with the default options (64 apps, 2000 steps, 5 repeats).

fn main() -> std::process::ExitCode {
    match aware_rpc::bench::run(&aware_rpc::bench::BenchOptions::default()) {
        Ok(report) => {
            println!("{}", serde_json::to_string_pretty(&report).expect("a report serialises"));
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::from(1)
        }
    }
}
