//! Writing results to stdout. A reader that goes away (`| head`) is not an error: the command
//! has nothing left to say, so it ends with exit code 0, quietly.

use std::io::Write;

pub fn line(args: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    let written = out.write_fmt(args).and_then(|()| out.write_all(b"\n"));
    finish(written);
}

pub fn bytes(data: &[u8]) {
    let mut out = std::io::stdout().lock();
    let written = out.write_all(data).and_then(|()| out.flush());
    finish(written);
}

fn finish(written: std::io::Result<()>) {
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("error: stdout: {e}");
            std::process::exit(1);
        }
    }
}
