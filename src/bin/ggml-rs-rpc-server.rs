//! ggml-rs-rpc-server: lends this machine's CPU to ggml-rs (or any ggml RPC
//! client of the same protocol version) over TCP. One command starts a
//! worker; see `--help`.

use std::path::PathBuf;
use std::process::ExitCode;

use std::time::Duration;

use ggml_rs::ml::rpc::{self, ServerOptions, DEFAULT_IDLE_TIMEOUT_SECS, DEFAULT_PORT};

fn usage() -> String {
    format!(
        "\
ggml-rs-rpc-server: serve this machine's CPU to ggml RPC clients (ggml-rs:
add it with GGML_RS_RPC_SERVERS=host:port or ggml_rs_rpc_add_server).

Usage: ggml-rs-rpc-server [--host ADDR] [--port PORT] [--threads N] [--mem MiB]
                          [--cache DIR] [--max-clients N] [--idle-timeout SECS]
                          [--io-timeout SECS] [--allow-remote]

Options:
  -H, --host ADDR      IPv4 address to listen on (default 127.0.0.1;
                       \"localhost\" is 127.0.0.1)
  -p, --port PORT      TCP port (default {DEFAULT_PORT})
  -t, --threads N      CPU threads per client (default: the CPUs this
                       process may use, within any cgroup quota)
  -m, --mem MiB        memory to report to clients, and the most their buffers
                       may hold together (default: this host's)
  -c, --cache DIR      cache large tensors here by hash, so clients that load
                       the same weights again skip sending them
      --max-clients N  clients served at once (default 16); more are refused,
                       unless a connection has idled longer than --idle-timeout
      --idle-timeout SECS
                       when every client slot is taken, a new client gets the
                       slot of the connection that has waited longest for its
                       next command, if longer than SECS (default {DEFAULT_IDLE_TIMEOUT_SECS}; 0:
                       never). An idle connection keeps its slot while no one
                       needs it: ggml's RPC client holds one connection per
                       server, with the model's weights, for as long as the
                       model stays loaded, idle or not
      --io-timeout SECS
                       the longest wait for the next bytes of a request, or
                       for a client to take a reply's; a whole request (or
                       reply) may take SECS plus a second per 64 KiB of it
                       (default 60). HELLO must be through within 10 s
      --allow-remote   allow a non-loopback ADDR (see SECURITY)
  -h, --help           this text
  -V, --version        the version

Each client is served by a process of its own, side by side with the others;
every request is checked before it is computed, and a bad one ends only the
connection that sent it (the reason is logged). The server runs until it is
stopped.

SECURITY: the ggml RPC protocol has no authentication and no encryption.
Anyone who can connect can use this machine's devices and read and write the
tensors it holds. The server therefore listens on loopback only unless
--allow-remote is given; then expose it only on a network you trust (or
through an SSH tunnel or VPN).
"
    )
}

fn parse(args: &[String]) -> Result<Option<ServerOptions>, String> {
    let mut o = ServerOptions::default();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a, None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            i += 1;
            args.get(i).cloned().ok_or_else(|| format!("{name} needs a value"))
        };
        match flag {
            "-h" | "--help" => {
                print!("{}", usage());
                return Ok(None);
            }
            "-V" | "--version" => {
                println!("ggml-rs-rpc-server {}", env!("CARGO_PKG_VERSION"));
                return Ok(None);
            }
            "-H" | "--host" => o.host = value("--host")?,
            "-p" | "--port" => {
                let v = value("--port")?;
                o.port = v
                    .parse()
                    .ok()
                    .filter(|&p| p > 0)
                    .ok_or(format!("--port {v:?} is not a port in 1..65535"))?;
            }
            "-t" | "--threads" => {
                let v = value("--threads")?;
                o.threads = v
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or(format!("--threads {v:?} is not a positive number"))?;
            }
            "-m" | "--mem" => {
                let v = value("--mem")?;
                o.mem_mib = Some(
                    v.parse()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or(format!("--mem {v:?} is not a positive number of MiB"))?,
                );
            }
            "-c" | "--cache" => o.cache_dir = Some(PathBuf::from(value("--cache")?)),
            "--max-clients" => {
                let v = value("--max-clients")?;
                o.max_clients = v
                    .parse()
                    .ok()
                    .filter(|&n| (1..=4096).contains(&n))
                    .ok_or(format!("--max-clients {v:?} is not a number in 1..4096"))?;
            }
            "--idle-timeout" => o.idle_timeout = seconds("--idle-timeout", &value("--idle-timeout")?, true)?,
            "--io-timeout" => o.io_timeout = seconds("--io-timeout", &value("--io-timeout")?, false)?,
            "--allow-remote" => o.allow_remote = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
        i += 1;
    }
    Ok(Some(o))
}

/// A whole number of seconds up to a day (`zero`: 0 allowed).
fn seconds(flag: &str, v: &str, zero: bool) -> Result<Duration, String> {
    let lo = if zero { 0 } else { 1 };
    v.parse::<u64>()
        .ok()
        .filter(|n| (lo..=86_400).contains(n))
        .map(Duration::from_secs)
        .ok_or(format!("{flag} {v:?} is not a number of seconds in {lo}..86400"))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match parse(&args) {
        Ok(Some(o)) => o,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ggml-rs-rpc-server: {e}\nTry --help.");
            return ExitCode::from(2);
        }
    };
    let result = rpc::serve(&opts, |endpoint, device| {
        println!("ggml-rs-rpc-server: listening on {endpoint} ({device})");
        if opts.allow_remote {
            println!(
                "ggml-rs-rpc-server: WARNING: no authentication; anyone who can reach {endpoint} can use this machine"
            );
        }
        use std::io::Write;
        let _ = std::io::stdout().flush();
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ggml-rs-rpc-server: {e}");
            ExitCode::FAILURE
        }
    }
}
